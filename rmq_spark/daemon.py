"""Spark's Python daemon with the rmq source's read and write paths imported once, before it forks any worker.

Set `spark.python.daemon.module rmq_spark.daemon` (conf/spark-defaults.conf does): Spark then starts this module
instead of pyspark.daemon for the Python workers of its tasks, and every worker it forks finds pyspark's worker,
pyarrow, numpy, pandas, the store, the clients and the filters already imported instead of importing them in its
first task. Measured (benchmarks/worker_start_bench.py, docs/benchmarks.md): a fresh worker's first read 0.01-0.02 s
of CPU instead of 0.41-0.49 s, against 0.6 s instead of 0.2 s for the daemon's start, once per executor; the
daemon holds 134 MB resident instead of 38 MB, and each worker forked from it 16 MB of its own instead of 73 MB
(the rest is the daemon's pages, shared).

pyspark's daemon forks with a single thread and must: a thread running at the fork (a lock it holds, a pool the
child believes it has) can hang or corrupt a worker. Two libraries start one at import: OpenBLAS (numpy) its thread
pool, and the jemalloc linked into pyarrow its background purging thread; both are kept from starting (the
environment below, inherited by the workers: their OpenBLAS runs one thread, as a task gets one core). When a
thread runs all the same, or the imports fail, or /proc cannot say, this process becomes pyspark's own daemon,
without the imports: the workers then import what they need themselves, as by default.
"""
from __future__ import annotations

import gc
import os
import sys
from typing import Optional

STOCK_DAEMON = "pyspark.daemon"
# Read by OpenBLAS and Arrow's jemalloc when they load: no thread pool, no background thread. Arrow allocates
# through mimalloc by default; its jemalloc is loaded all the same.
NO_THREAD_ENV = {"OPENBLAS_NUM_THREADS": "1", "JE_ARROW_MALLOC_CONF": "background_thread:false"}


def import_read_path() -> None:
    """What a worker's first read or write of format("rmq") imports: pyspark's worker (imported after the fork by
    pyspark.daemon) and its data source read function, the source and its readers, the sink, and the reads and
    writes of a store directory and of brokers (imported when a reader or writer opens one). Also pandas, when it
    is installed: the source's reads and writes never import it, but pandas UDFs and pyarrow's conversions of
    Python and numpy values in a job's own code do; and the IDNA codec, which a worker's first connection by host
    name loads."""
    import encodings.idna  # noqa: F401

    import pyspark.sql.worker.plan_data_source_read  # noqa: F401
    import pyspark.worker  # noqa: F401
    try:
        import pandas  # noqa: F401
    except ImportError:
        pass

    import pyspark_rmq  # noqa: F401
    import rmq_log.cluster_reads  # noqa: F401
    import rmq_log.cluster_writes  # noqa: F401
    import rmq_log.store_reads  # noqa: F401
    import rmq_log.store_writes  # noqa: F401
    import rmq_spark.batch_reader  # noqa: F401
    import rmq_spark.sink  # noqa: F401
    import rmq_spark.stream_reader  # noqa: F401


def read_zip_archives_again_only_when_changed() -> None:
    """pyspark's worker puts its task's files directory on sys.path at its first task and invalidates the import
    caches; before Python 3.12 each zipimporter then reads its archive's directory again at once, and there is one
    per package imported from pyspark.zip (16 here: 0.13 s of CPU in every fresh worker; Python 3.12 reads it when
    next needed). The workers inherit this: an archive's directory is read again only when its size or time
    changed since the daemon read it."""
    if sys.version_info >= (3, 12):
        return
    import zipimport

    def stamp(path: str) -> tuple[int, int]:
        st = os.stat(path)
        return st.st_mtime_ns, st.st_size

    read: dict[str, tuple[int, int]] = {}
    for finder in list(sys.path_importer_cache.values()):
        if isinstance(finder, zipimport.zipimporter):
            try:
                read[finder.archive] = stamp(finder.archive)
            except OSError:
                pass
    invalidate = zipimport.zipimporter.invalidate_caches

    def invalidate_when_changed(self: zipimport.zipimporter) -> None:
        try:
            unchanged = read.get(self.archive) == stamp(self.archive)
        except OSError:
            unchanged = False
        if not unchanged:
            invalidate(self)

    zipimport.zipimporter.invalidate_caches = invalidate_when_changed  # type: ignore[method-assign]


def threads() -> int:
    """This process's threads (Linux), or -1 when it cannot tell."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return -1


def _stock_daemon(why: str) -> None:
    print(f"rmq_spark.daemon: {why}; running {STOCK_DAEMON} without the imports", file=sys.stderr, flush=True)
    # Spark gave the worker module as the argument: the stock daemon reads it the same way
    os.execv(sys.executable, [sys.executable, "-m", STOCK_DAEMON, *sys.argv[1:]])


def prepare() -> Optional[str]:
    """Imports the read path with no library thread started: None when this process may fork workers with it,
    else why not (`rmq doctor` asks the same of the workers' Python)."""
    for key, value in NO_THREAD_ENV.items():
        os.environ.setdefault(key, value)
    try:
        import_read_path()
    except Exception as e:  # a broken install: the workers report it in the task that needs the module
        return f"importing the read path failed ({type(e).__name__}: {e})"
    running = threads()
    if running != 1:
        return f"{running} threads after the imports" if running > 0 else "/proc/self/task is unreadable"
    return None


def main() -> None:
    why = prepare()
    if why is not None:
        _stock_daemon(why)
    from pyspark.daemon import manager

    read_zip_archives_again_only_when_changed()
    # The imported objects out of the collector's reach: the workers' collections (pyspark's daemon runs one after
    # every task) would otherwise walk them all and write to every page holding one, copying it from the daemon.
    gc.freeze()
    manager()


if __name__ == "__main__":
    main()
