"""Side by side with Apache RocketMQ's own broker: the same load against a stock 4.9 broker and `rmq serve`, in the
same run on this machine, with the stock Java client (benchmarks/java/PeerLoad.java) as the load generator. Each
row is msg/s (or ms) for both and the ratio ours / stock; the targets are on docs/benchmarks.md.

  send1     single-message synchronous sends, 1 producer thread, 100-byte bodies (msg/s, p99 ms)
  send16    the same with 16 producer threads in one JVM
  batch     send(Collection) of 32 x 100 B, 4 threads
  drain     a push consumer draining --messages messages (tags *) from the first offset
  drainsql  the same with a 10% SQL92 selector (a = 0)
  latency   a held pull answered after a send's response: p50 / p99 ms over 200 messages, one every 20 ms
  sync16    send16 with both brokers restarted with flushDiskType=SYNC_FLUSH (SEND_OK after the fsync)
  spark32   the Spark wire read (format("rmq").option("namesrvAddr", ...), count) of --messages messages with the
            brokers' default pull caps (32 messages / 256 KiB)
  spark4k   the same with the caps raised to 4,096 messages / 8 MiB (what docs/broker.md tells Spark users to set)

The stock broker runs in the JVM RocketMQ's own launcher gives it (stock_peers.STOCK_BROKER_JVM: the server JIT,
G1, an 8 GiB heap), the load generator in a JVM with Java's defaults, as an application runs. Both brokers
ASYNC_FLUSH (but for sync16), one broker each with its own name server, on loopback. Before the rows, and after
each restart (sync16's), each broker gets --warmup seconds of load not measured (a JIT compiles as it runs). The rows
run interleaved (stock, ours) and --repeat times, best kept; each row notes the 1-minute load average when it
ended (the machine is shared). Needs the stock peers (`make peers`).

    .venv/bin/python benchmarks/peer_bench.py [--messages 1000000] [--seconds 10] [--repeat 1] [--cases ...]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

from tests.peers.stock_peers import OPENS, STOCK_4, STOCK_BROKER_JVM, StockCluster, classpath, compiled  # noqa: E402
from tests.wire_cluster import WireCluster  # noqa: E402

BENCH_JAVA = os.path.join(ROOT, "benchmarks", "java")
DEFAULT_CAPS = {"maxTransferCountOnMessageInMemory": "32", "maxTransferBytesOnMessageInMemory": "262144"}
RAISED_CAPS = {"maxTransferCountOnMessageInMemory": "4096", "maxTransferBytesOnMessageInMemory": "8388608"}
CASES = ["send1", "send16", "batch", "drain", "drainsql", "latency", "sync16", "spark32", "spark4k"]
SYNC_FLUSH, ASYNC_FLUSH = {"flushDiskType": "SYNC_FLUSH"}, {"flushDiskType": "ASYNC_FLUSH"}


def conf_text(conf: dict) -> str:
    return "".join(f"{k} = {v}\n" for k, v in conf.items())


class Load:
    """PeerLoad runs of the stock 4.9 Java client against one name server, in a JVM as an application runs it (the
    default JIT and collector)."""

    def __init__(self, version: str):
        self.cp = classpath(version, compiled(version, BENCH_JAVA))

    def run(self, namesrv: str, *args, timeout: float = 900) -> dict:
        cmd = ["java", *OPENS, "-Djava.net.preferIPv4Stack=true", "-Xmx1g", "-Drocketmq.client.logLevel=ERROR",
               "-cp", self.cp, "PeerLoad",
               args[0], namesrv, *map(str, args[1:])]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        lines = [x for x in done.stdout.splitlines() if x.startswith("{")]
        if done.returncode != 0 or not lines:
            raise RuntimeError(f"PeerLoad {' '.join(map(str, args))} exited {done.returncode}: {done.stderr[-2000:]}")
        return json.loads(lines[-1])


def spark_count(spark, namesrv: str, topic: str) -> tuple[float, int]:
    t0 = time.perf_counter()
    n = (spark.read.format("rmq").option("namesrvAddr", namesrv).option("topic", topic)
         .option("pullBatchSize", "4096").load().select("queue_offset").count())
    return time.perf_counter() - t0, n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--seconds", type=float, default=10.0, help="length of each send row")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--warmup", type=float, default=10.0,
                    help="seconds of each warm-up load before the rows and after a restart (0: none)")
    ap.add_argument("--drain-timeout", type=float, default=300, help="seconds a drain may take")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--dir", default=None, help="where the stores go (default: a temporary folder)")
    args = ap.parse_args()
    cases = [c for c in CASES if c in args.cases.split(",")]
    root = args.dir or tempfile.mkdtemp(prefix="peer-bench-")
    load = Load(STOCK_4)
    results: dict[str, dict[str, list[dict]]] = {c: {"stock": [], "ours": []} for c in cases}
    try:
        run_all(cases, root, load, args, results)
    finally:
        if not args.dir:  # its stores: gigabytes after the drains
            shutil.rmtree(root, ignore_errors=True)
    report(results, args)


def run_all(cases: list[str], root: str, load: "Load", args, results: dict) -> None:
    with StockCluster(STOCK_4, os.path.join(root, "stock"), brokers=("broker-s",), conf=DEFAULT_CAPS,
                      broker_jvm=STOCK_BROKER_JVM) as stock, \
            WireCluster(os.path.join(root, "ours"), brokers=("broker-o",), conf=conf_text(DEFAULT_CAPS)) as ours:
        print(f"stock {STOCK_4} broker at {stock.addresses['broker-s']} (started in "
              f"{stock.start_seconds['broker-s']:.1f} s); ours at {ours.addresses['broker-o']}", flush=True)
        spark_cases = [c for c in cases if c.startswith("spark")]
        warm_up(load, stock, ours, args.warmup, full=True)
        for r in range(args.repeat):
            for case in cases:
                if case.startswith("spark"):
                    continue
                if case == "sync16":
                    restart(stock, ours, {**DEFAULT_CAPS, **SYNC_FLUSH})
                    warm_up(load, stock, ours, args.warmup, full=False)
                for side, namesrv in (("stock", stock.namesrv), ("ours", ours.namesrv)):
                    got = run_case(load, case, namesrv, args, r)
                    got["load1"] = round(os.getloadavg()[0], 2)
                    results[case][side].append(got)
                    print(f"  {case:9s} {side:5s} {json.dumps(got)}", flush=True)
                if case == "sync16":
                    restart(stock, ours, {**DEFAULT_CAPS, **ASYNC_FLUSH})
                    if r + 1 < args.repeat or spark_cases:
                        warm_up(load, stock, ours, args.warmup, full=True)
        if spark_cases:
            spark_rows(spark_cases, load, stock, ours, args, results)


def run_case(load: Load, case: str, namesrv: str, args, r: int) -> dict:
    s = args.seconds
    if case == "send1":
        return load.run(namesrv, "send", f"S1-{r}", 1, s, 1)
    if case == "send16":
        return load.run(namesrv, "send", f"S16-{r}", 16, s, 1)
    if case == "sync16":
        return load.run(namesrv, "send", f"SY16-{r}", 16, s, 1)
    if case == "batch":
        return load.run(namesrv, "send", f"B-{r}", 4, s, 32)
    if case in ("drain", "drainsql"):
        topic = f"D-{r}"
        if case == "drain" or "drain" not in args.cases.split(","):
            loaded = load.run(namesrv, "load", topic, args.messages)
            assert loaded["failed"] == 0, loaded
        # a drain that has not finished within --drain-timeout reports the rate of what it received by then
        if case == "drain":
            return load.run(namesrv, "drain", topic, f"g-{r}", args.messages, int(args.drain_timeout))
        return load.run(namesrv, "drain", topic, f"gsql-{r}", args.messages // 10, int(args.drain_timeout), "a = 0")
    if case == "latency":
        return load.run(namesrv, "latency", f"L-{r}", 200, 20)
    raise ValueError(case)


def warm_up(load: Load, stock: StockCluster, ours: WireCluster, seconds: float, full: bool) -> None:
    """Load not measured, on both brokers, so that the rows measure a running broker and not a cold one: the stock
    broker's JIT compiles its send and pull paths within the first seconds of load (measured cold: its send1
    row 1,152 msg/s). full: sends, batches and a drain; else sends only (after a restart)."""
    if seconds <= 0:
        return
    for cluster in (stock, ours):
        load.run(cluster.namesrv, "send", "W16", 16, seconds, 1)
        if full:
            load.run(cluster.namesrv, "send", "WB", 4, seconds, 32)
            load.run(cluster.namesrv, "load", "WD", 200_000)
            load.run(cluster.namesrv, "drain", "WD", "gw", 200_000, 120)
    print(f"warmed up ({seconds:g} s loads{', a drain' if full else ''})", flush=True)


def restart(stock: StockCluster, ours: WireCluster, conf: dict) -> None:
    """Both brokers stopped cleanly (SIGTERM, stores kept) and started again with conf."""
    stock.conf.update(conf)
    ours.conf = conf_text(conf)
    for cluster, name in ((stock, "broker-s"), (ours, "broker-o")):
        cluster.kill(name, 15)
        cluster.start(name)


def spark_rows(cases, load: Load, stock: StockCluster, ours: WireCluster, args, results) -> None:
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[2]").appName("peer_bench")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", "2g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    topic = "SPARK"
    for namesrv in (stock.namesrv, ours.namesrv):
        loaded = load.run(namesrv, "load", topic, args.messages)
        assert loaded["failed"] == 0, loaded
    spark_count(spark, ours.namesrv, topic)  # warm-up: the JVM's Python workers and the source's lookup
    for case in cases:
        caps = {**(DEFAULT_CAPS if case == "spark32" else RAISED_CAPS), **ASYNC_FLUSH}
        restart(stock, ours, caps)
        for _ in range(args.repeat):
            for side, namesrv in (("stock", stock.namesrv), ("ours", ours.namesrv)):
                took, n = spark_count(spark, namesrv, topic)
                assert n == args.messages, (side, n)
                got = {"messages": n, "seconds": round(took, 3), "msg_per_s": round(n / took, 1)}
                results[case][side].append(got)
                print(f"  {case:9s} {side:5s} {json.dumps(got)}", flush=True)
    spark.stop()


def report(results, args) -> None:
    print(f"\npeer_bench: stock Apache RocketMQ {STOCK_4} vs rmq serve, {args.messages:,} messages, "
          f"best of {args.repeat}")
    print("| case | stock | ours | ours / stock |\n|---|---|---|---|")
    for case, sides in results.items():
        if not sides["stock"] or not sides["ours"]:
            continue
        if case == "latency":
            s = min(sides["stock"], key=lambda x: x["p99_ms"])
            o = min(sides["ours"], key=lambda x: x["p99_ms"])
            print(f"| {case} p50 / p99 ms | {s['p50_ms']:.2f} / {s['p99_ms']:.2f} | {o['p50_ms']:.2f} / "
                  f"{o['p99_ms']:.2f} | p99 {o['p99_ms'] / max(s['p99_ms'], 1e-9):.2f}x |")
            continue
        s = max(sides["stock"], key=lambda x: x["msg_per_s"])
        o = max(sides["ours"], key=lambda x: x["msg_per_s"])
        extra = "".join(f" ({side} stopped after {x['seconds']:.0f} s with {x['messages']:,} messages)"
                        for side, x in (("stock", s), ("ours", o)) if x.get("complete") is False)
        if "p99_ms" in s:
            extra = f" (p99 {s['p99_ms']:.2f} ms / {o['p99_ms']:.2f} ms)"
        if "load1" in s:
            extra += f" (load {s['load1']:.1f} / {o['load1']:.1f})"
        print(f"| {case} | {s['msg_per_s']:,.0f} msg/s | {o['msg_per_s']:,.0f} msg/s | "
              f"{o['msg_per_s'] / s['msg_per_s']:.2f}x{extra} |")


if __name__ == "__main__":
    main()
