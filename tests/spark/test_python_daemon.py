"""Spark's Python workers forked from rmq_spark.daemon (`spark.python.daemon.module`, set in
conf/spark-defaults.conf and for the tests' drivers by conftest.py): the daemon imported the source's read path
before it forked them and holds one thread when it forks; when a library starts a thread all the same it becomes
pyspark's own daemon, which imports nothing before forking. Its workers still see a zip archive's new modules."""
from __future__ import annotations

import json
import os
import select
import struct
import subprocess
import sys

import pytest
from pyspark.sql import functions as F
from source_testkit import fill

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_a_read_runs_in_workers_forked_from_a_daemon_holding_the_read_path(spark, tmp_path):
    assert spark.conf.get("spark.python.daemon.module") == "rmq_spark.daemon"
    path = fill(tmp_path / "store", "T", n=120, queues=2)

    @F.udf("string")
    def parent(_):  # a local function: sent by value, it imports nothing of the project in the worker
        """What the worker's parent, the daemon that forked it, is and holds."""
        import gc
        import json
        import os
        import sys

        pid = os.getppid()
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            command = [a.decode() for a in f.read().split(b"\0") if a]
        with open(f"/proc/{pid}/maps", encoding="utf-8") as f:
            maps = f.read()
        return json.dumps({"command": command, "threads": len(os.listdir(f"/proc/{pid}/task")),
                           "arrow": "libarrow.so" in maps, "numpy": "_multiarray_umath" in maps,
                           "reader_module": "rmq_spark.stream_reader" in sys.modules,
                           "frozen": gc.get_freeze_count()})

    rows = (spark.read.format("rmq").option("subscribe", "T").load(path)
            .select("queue_id", parent("queue_offset").alias("parent")).collect())
    assert sorted((r.queue_id for r in rows)) == [0] * 60 + [1] * 60
    for seen in {r.parent for r in rows}:
        daemon = json.loads(seen)
        assert daemon["command"][1:3] == ["-m", "rmq_spark.daemon"], daemon
        # a single thread while it forks; the shared libraries of Arrow and numpy mapped before any task ran
        assert daemon["threads"] == 1 and daemon["arrow"] and daemon["numpy"], daemon
        # what it imported is out of the worker's garbage collections, which would copy its pages
        assert daemon["reader_module"] and daemon["frozen"] > 0, daemon


def _started_as_spark_starts_it(env: dict) -> tuple[subprocess.Popen, int]:
    """`python -m rmq_spark.daemon pyspark.worker`, its stdin open (closing it stops the daemon), and the port it
    writes to its stdout once it listens."""
    proc = subprocess.Popen([sys.executable, "-m", "rmq_spark.daemon", "pyspark.worker"], env=env, cwd=ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], 120)
    assert ready, "the daemon wrote no port within 120 s"
    port = struct.unpack(">i", proc.stdout.read(4))[0]
    return proc, port


@pytest.mark.parametrize("extra, runs, imported", [
    ({}, "rmq_spark.daemon", True),
    # the jemalloc linked into pyarrow starts its background thread at import when told to
    ({"JE_ARROW_MALLOC_CONF": "background_thread:true"}, "pyspark.daemon", False),
])
def test_the_daemon_forks_with_one_thread_or_runs_pysparks_own(extra, runs, imported):
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "JE_ARROW_MALLOC_CONF")}
    env.update(extra, PYTHONPATH=ROOT)
    proc, port = _started_as_spark_starts_it(env)
    try:
        assert 0 < port < 65536
        with open(f"/proc/{proc.pid}/cmdline", "rb") as f:
            assert f.read().split(b"\0")[1:3] == [b"-m", runs.encode()]
        assert len(os.listdir(f"/proc/{proc.pid}/task")) == 1
        with open(f"/proc/{proc.pid}/maps", encoding="utf-8") as f:
            assert ("libarrow.so" in f.read()) == imported
    finally:
        _, err = proc.communicate(timeout=60)  # closes its stdin: Spark's way of stopping its daemon
    stderr = err.decode()
    assert "Traceback" not in stderr, stderr
    if not imported:
        assert "threads after the imports; running pyspark.daemon without the imports" in stderr


ZIP_PROBE = """
import importlib, os, sys, zipfile
archive = sys.argv[1]
sys.path.insert(0, archive)
import first_module  # a zipimporter for the archive, its directory read
from rmq_spark.daemon import read_zip_archives_again_only_when_changed
read_zip_archives_again_only_when_changed()
importlib.invalidate_caches()  # unchanged: nothing to read again
with zipfile.ZipFile(archive, "a") as z:
    z.writestr("second_module.py", "VALUE = 2")
importlib.invalidate_caches()  # changed: read again
import second_module
print(first_module.VALUE + second_module.VALUE)
"""


def test_a_zip_archive_changed_after_the_daemon_started_is_read_again(tmp_path):
    """The daemon's workers read a zip's directory again on pyspark's invalidation only when the zip changed: one
    that did change shows its new modules."""
    import zipfile

    archive = tmp_path / "code.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("first_module.py", "VALUE = 1")
    done = subprocess.run([sys.executable, "-c", ZIP_PROBE, str(archive)], env=dict(os.environ, PYTHONPATH=ROOT),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["3"]
