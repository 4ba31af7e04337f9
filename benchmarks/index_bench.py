"""Key lookups from the index vs the same read without it, in Spark and in the store.

Run: .venv/bin/python benchmarks/index_bench.py [--messages 10000000] [--dir /tmp/rmq-index-bench] [--keep]

N messages (100 B bodies, 8 queues, each with its own key `key-<i>` and a shared `group-<i % 1000>`) are put in
batches of 100,000 (RocketMQ's default index geometry: 5,000,000 slots, 20,000,000 entries a file). Then, each best
of a few runs:
  Spark: format("rmq").option("key", k) (found through the index) vs the same read with useIndex=false (a scan
         keeping the rows whose keys hold k: what array_contains(keys, k) keeps), the same rows; and a pushed
         msg_id = '<offset msgId>' with and without the index;
  store: MessageStore.query_message vs a scan of the keys column.
Figures are printed as ratios to the scan measured in the same run.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("PYSPARK_PYTHON", os.path.join(ROOT, ".venv", "bin", "python"))
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", os.environ["PYSPARK_PYTHON"])

from store import MessageStore  # noqa: E402

BATCH = 100_000


def fill(path: str, n: int) -> float:
    body = np.frombuffer(np.random.default_rng(1).bytes(100), dtype=np.uint8)
    offsets = pa.array(np.arange(0, 100 * BATCH + 1, 100, dtype=np.int32))
    bodies = pa.Array.from_buffers(pa.binary(), BATCH, [None, offsets.buffers()[1],
                                                        pa.py_buffer(np.tile(body, BATCH).tobytes())])
    t0 = time.perf_counter()
    with MessageStore(path) as s:
        s.create_topic("Keyed", 8)
        for start in range(0, n, BATCH):
            m = min(BATCH, n - start)
            ids = np.arange(start, start + m)
            keys = pc.binary_join_element_wise(pa.array(np.char.add("key-", ids.astype(str))),
                                               pa.array(np.char.add("group-", (ids % 1000).astype(str))), " ")
            s.put_batch("Keyed", bodies.slice(0, m), keys=keys)
            if start // BATCH % 10 == 0:
                print(f"  put {start + m:,} of {n:,} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    return time.perf_counter() - t0


def best(fn, runs: int):
    times, out = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--dir", default=None, help="keep the store here (reused when it holds --messages already)")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--scan-runs", type=int, default=2)
    args = ap.parse_args()
    root = args.dir or tempfile.mkdtemp(prefix="rmq-index-bench-")
    path = os.path.join(root, f"store-{args.messages}")
    n = args.messages
    if not os.path.exists(os.path.join(path, "index")):
        shutil.rmtree(path, ignore_errors=True)
        took = fill(path, n)
        print(f"loaded {n:,} messages in {took:.1f} s ({n / took:,.0f} msg/s, with the index)")
    with MessageStore(path, read_only=True) as s:
        assert sum(s.max_offset("Keyed", q) for q in s.queues("Keyed")) == n
        target = n * 3 // 4 + 7
        key = f"key-{target}"
        t_idx, found = best(lambda: s.query_message("Keyed", key), 5)
        msg_id = found[0].msg_id

        def scan_keys():
            hits = 0
            for q in s.queues("Keyed"):
                for b in s.scan("Keyed", q, 0, None, columns=["keys"]):
                    flat = pc.list_flatten(b.column("keys"))
                    hits += pc.sum(pc.equal(flat, key)).as_py() or 0
            return hits

        t_scan, hits = best(scan_keys, args.scan_runs)
        assert hits == len(found) == 1
        print(f"\nstore, {n:,} messages: query_message {t_idx * 1e3:.2f} ms | scan of the keys column "
              f"{t_scan:.2f} s | ratio {t_scan / t_idx:,.0f}x")

    import pyspark.sql.functions as F
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[2]").appName("index-bench").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        def read(**opts):
            r = spark.read.format("rmq").option("path", path).option("topic", "Keyed")
            for k, v in opts.items():
                r = r.option(k, v)
            return r.load()

        def rows(df):
            return sorted((r.queue_id, r.queue_offset, bytes(r.body)) for r in df.collect())

        read(key=key).collect()  # warm up the workers
        t_idx, by_index = best(lambda: rows(read(key=key)), 3)
        t_scan, by_scan = best(lambda: rows(read(key=key, useIndex="false")), args.scan_runs)
        assert by_index == by_scan and len(by_index) == 1
        print(f"spark, {n:,} messages, option key: index {t_idx:.2f} s | without the index {t_scan:.2f} s | "
              f"ratio {t_scan / t_idx:,.1f}x (target >= 100x), same {len(by_index)} row(s)")
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
        t_id, by_id = best(lambda: rows(read().where(F.col("msg_id") == msg_id)), 3)
        t_id_scan, by_id_scan = best(lambda: rows(read(useIndex="false").where(F.col("msg_id") == msg_id)),
                                     args.scan_runs)
        assert by_id == by_id_scan == by_index
        print(f"spark, {n:,} messages, msg_id = '...': offset lookup {t_id:.2f} s | without {t_id_scan:.2f} s | "
              f"ratio {t_id_scan / t_id:,.1f}x")
    finally:
        spark.stop()
    if not args.keep and not args.dir:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
