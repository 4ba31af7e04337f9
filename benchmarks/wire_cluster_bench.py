"""Spark over the wire, two brokers against one, with master local-cluster[2,1,1024] (two executor JVMs),
in the same run: rows/s of an availableNow stream into noop reading the same messages from one broker, then spread
over two brokers (half each), through one name server. Prints the ratio two/one.

On one 2-core machine this measures overhead, not scale: both brokers, both executors and the driver share the
same two cores, so a second broker adds a process to schedule rather than a machine's worth of disk, network and
CPU. On a cluster each broker serves its queues from its own machine and each executor pulls in parallel.

    .venv/bin/python benchmarks/wire_cluster_bench.py [--messages 2000000] [--dir /tmp/rmq-wire-cluster-bench]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

from store import MessageStore  # noqa: E402

TOPIC, QUEUES, CHUNK = "Bench", 8, 100_000
CONF = "maxTransferCountOnMessageInMemory = 4096\nmaxTransferBytesOnMessageInMemory = 8388608\n"


def build(path: str, n: int) -> None:
    shutil.rmtree(path, ignore_errors=True)
    with MessageStore(path) as s:
        s.create_topic(TOPIC, QUEUES)
        for lo in range(0, n, CHUNK):
            m = min(CHUNK, n - lo)
            s.put_batch(TOPIC, [b"x" * 100] * m, tags=["TagA"] * m, queue_id=np.arange(lo, lo + m) % QUEUES)


def start(args: list[str], log: str) -> tuple[subprocess.Popen, dict]:
    with open(log, "ab") as err:
        proc = subprocess.Popen([sys.executable, "-m", "rmq_cli", *args], stdout=subprocess.PIPE, stderr=err, text=True,
                                env=dict(os.environ, PYTHONPATH=ROOT))
    line = proc.stdout.readline() if proc.stdout else ""
    if not line:
        proc.kill()
        raise SystemExit(f"rmq {args[0]} did not start: see {log}")
    return proc, json.loads(line)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=2_000_000)
    ap.add_argument("--dir", default="/tmp/rmq-wire-cluster-bench")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    n, d = args.messages, args.dir
    os.makedirs(d, exist_ok=True)
    build(os.path.join(d, "one", "broker-a"), n)
    build(os.path.join(d, "two", "broker-a"), n // 2)
    build(os.path.join(d, "two", "broker-b"), n - n // 2)
    with open(os.path.join(d, "broker.conf"), "w") as f:
        f.write(CONF)
    procs: list[subprocess.Popen] = []
    try:
        namesrvs = {}
        for setup, brokers in (("one", ["broker-a"]), ("two", ["broker-a", "broker-b"])):
            proc, out = start(["namesrv", "--listen", "127.0.0.1:0"], os.path.join(d, f"{setup}.log"))
            procs.append(proc)
            namesrvs[setup] = out["namesrv"]
            for b in brokers:
                proc, _ = start(["-s", os.path.join(d, setup, b), "serve", "--config", os.path.join(d, "broker.conf"),
                                 "--listen", "127.0.0.1:0", "--namesrv", out["namesrv"], "--broker-name", b],
                                os.path.join(d, f"{setup}.log"))
                procs.append(proc)

        from pyspark.sql import SparkSession
        spark = (SparkSession.builder.master("local-cluster[2,1,1024]").appName("wire_cluster_bench")
                 .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                 .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable).getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")

        def run(setup: str) -> float:
            df = (spark.readStream.format("rmq").option("namesrvAddr", namesrvs[setup]).option("topic", TOPIC)
                  .option("startingOffsets", "earliest").option("pullBatchSize", "4096").load())
            ck = os.path.join(d, f"ck-{time.time_ns()}")
            t0 = time.perf_counter()
            q = df.writeStream.format("noop").option("checkpointLocation", ck).trigger(availableNow=True).start()
            q.awaitTermination()
            elapsed = time.perf_counter() - t0
            rows = sum(p["numInputRows"] for p in q.recentProgress)
            assert rows == n, (setup, rows, n)
            shutil.rmtree(ck, ignore_errors=True)
            return elapsed

        run("one")  # warm-up: executors' Python workers and the source lookup
        best = {"one": float("inf"), "two": float("inf")}
        for _ in range(args.repeat):
            for setup in ("one", "two"):
                best[setup] = min(best[setup], run(setup))
        spark.stop()
        print(f"\nwire_cluster_bench: {n:,} messages, 100-byte bodies, {QUEUES} queues a broker, "
              f"local-cluster[2,1,1024], best of {args.repeat}")
        print(f"one broker  {n / best['one']:>12,.0f} rows/s  ({best['one']:.2f} s)")
        print(f"two brokers {n / best['two']:>12,.0f} rows/s  ({best['two']:.2f} s)")
        print(f"two/one = {best['one'] / best['two']:.2f}  (2 cores: overhead, not scale)", flush=True)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(30)


if __name__ == "__main__":
    main()
