"""Many topics: what creating them, opening the store and a streaming trigger cost as the topic count grows.

For each count (default 100, 1,000 and 10,000 topics x 8 queues): the time to create every topic with one
put_batch of 8 x 100 B messages (one per queue), the files and the disk they take (du), a read-only open plus
max_offset of every queue, a Spark stream subscribed by pattern to all of them: the driver-side work of one
trigger when nothing changed (latestOffset; Spark plans no batch then) and when 1% of the queues received a
message from another process (latestOffset + partitions), and `rmq check` and a retention pass over the store.
Each column's growth is printed as a ratio to the topic count's growth (target <= 1.5), and the empty trigger at
1,000 topics against its target (< 100 ms).

    .venv/bin/python benchmarks/scale_bench.py [--topics 100 1000 10000] [--queues 8]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from pyspark.sql.streaming.datasource import ReadAllAvailable  # noqa: E402

from rmq_spark.options import parse_options  # noqa: E402
from rmq_spark.stream_reader import RmqStreamReader  # noqa: E402
from store import MessageStore  # noqa: E402

BODY = b"x" * 100


def create(path: str, topics: int, queues: int) -> float:
    """Until the store is closed: its last topics' files and topics.json are on disk then (a store that creates
    100 topics in less than the one-second flush interval would otherwise be timed without any fsync)."""
    s = MessageStore(path)
    started = time.perf_counter()
    try:
        for t in range(topics):
            s.create_topic(f"topic-{t:05d}", queues)
            s.put_batch(f"topic-{t:05d}", [BODY] * queues, queue_id=list(range(queues)))
    finally:
        s.close()
    return time.perf_counter() - started


def check_and_clean(path: str) -> tuple[float, float]:
    """`rmq check`'s whole-store check, and a retention pass that finds nothing expired: seconds each."""
    from store.store_check import check_store
    started = time.perf_counter()
    assert check_store(path).ok
    checked = time.perf_counter() - started
    cleaned = []
    for _ in range(3):  # the median of three fresh opens: a pass is short enough to be noisy
        with MessageStore(path) as s:
            started = time.perf_counter()
            s.clean_expired()
            cleaned.append(time.perf_counter() - started)
    return checked, statistics.median(cleaned)


def files_and_disk(path: str) -> tuple[int, int]:
    files = sum(len(names) for _, _, names in os.walk(path))
    du = subprocess.run(["du", "-sk", path], capture_output=True, text=True, check=True).stdout.split()[0]
    return files, int(du) * 1024


def open_and_ends(path: str) -> float:
    os.sync()  # the creation's dirty pages written back first: their writeback is not the reader's cost
    started = time.perf_counter()
    with MessageStore(path, read_only=True) as s:
        total = 0
        for t in s.topics():
            for q in s.queues(t):
                total += s.max_offset(t, q)
    return time.perf_counter() - started


PUT_ONE_PERCENT = """
import sys
from store import MessageStore
path, topics, queues, r = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
with MessageStore(path) as writer:
    for i in range(max(1, topics * queues // 100)):  # 1% of the queues, spread over the topics
        k = (i * 100 + r) % (topics * queues)
        writer.put(f"topic-{k // queues:05d}", b"x" * 100, queue_id=k % queues)
"""


def triggers(path: str, topics: int, queues: int, rounds: int = 5) -> tuple[float, float]:
    """(empty trigger s, trigger after 1% of the queues got a message s): medians of `rounds`. The messages come
    from another process, as from a producer beside a running query."""
    opts = parse_options({"path": path, "subscribePattern": "topic-.*", "startingOffsets": "latest",
                          "pollTimeoutMs": "0"})
    reader = RmqStreamReader(opts, None)
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    empty, changed = [], []
    env = dict(os.environ, PYTHONPATH=ROOT)
    n = max(1, topics * queues // 100)
    for r in range(rounds):
        t0 = time.perf_counter()
        end2 = reader.latestOffset(end, ReadAllAvailable())  # nothing new: Spark plans no batch
        empty.append(time.perf_counter() - t0)
        assert end2 == end
        subprocess.run([sys.executable, "-c", PUT_ONE_PERCENT, path, str(topics), str(queues), str(r)], env=env,
                       check=True, timeout=600)
        t0 = time.perf_counter()
        end2 = reader.latestOffset(end, ReadAllAvailable())
        reader.partitions(end, end2)
        changed.append(time.perf_counter() - t0)
        assert sum(int(v) for qs in end2.values() for v in qs.values()) == \
            sum(int(v) for qs in end.values() for v in qs.values()) + n
        end = end2
    return statistics.median(empty), statistics.median(changed)


def raise_open_files_limit() -> None:
    """Every consume-queue file a process maps keeps a descriptor (as a Java broker's FileChannels do): tens of
    thousands of queues need more than the usual 1,024 or 20,000 (RocketMQ's deployment notes raise it, and
    vm.max_map_count, in the same way)."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        with open("/proc/sys/fs/nr_open") as f:
            ceiling = int(f.read())
        resource.setrlimit(resource.RLIMIT_NOFILE, (ceiling, ceiling))  # root may raise the hard limit
    except (OSError, ValueError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def main() -> int:
    raise_open_files_limit()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topics", type=int, nargs="+", default=[100, 1000, 10000])
    ap.add_argument("--queues", type=int, default=8)
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="rmq-scale-bench-")
    rows = []
    try:
        print(f"scale benchmark in {root} ({os.cpu_count()} cores), {args.queues} queues per topic", flush=True)
        print(f"{'topics':>7} | {'create all':>10} | {'files':>7} | {'disk':>9} | {'open + ends':>11} | "
              f"{'empty trigger':>13} | {'1% trigger':>10} | {'rmq check':>9} | {'retention':>9}", flush=True)
        for topics in args.topics:
            path = os.path.join(root, f"s{topics}")
            made = create(path, topics, args.queues)
            files, disk = files_and_disk(path)
            opened = open_and_ends(path)
            empty, changed = triggers(path, topics, args.queues)
            checked, cleaned = check_and_clean(path)
            rows.append((topics, made, opened, empty, changed, checked, cleaned))
            print(f"{topics:>7,} | {made:>9.2f}s | {files:>7,} | {disk / 2**20:>7.1f}MB | {opened:>10.3f}s | "
                  f"{empty * 1000:>11.1f}ms | {changed * 1000:>8.1f}ms | {checked:>8.2f}s | {cleaned:>8.3f}s",
                  flush=True)
            shutil.rmtree(path, ignore_errors=True)
        for (t0, *a), (t1, *b) in zip(rows, rows[1:]):
            growth = t1 / t0
            ratios = ", ".join(f"{name} {(y / x) / growth:.2f}" for name, x, y in
                               zip(("create", "open+ends", "empty trigger", "1% trigger", "check", "retention"),
                                   a, b))
            print(f"{t0:,} -> {t1:,} topics ({growth:.0f}x): time growth / topic growth: {ratios} (target <= 1.5)",
                  flush=True)
        for topics, _, _, empty, *_ in rows:
            if topics == 1000:
                print(f"empty trigger at 1,000 topics: {empty * 1000:.1f} ms (target < 100 ms)", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
