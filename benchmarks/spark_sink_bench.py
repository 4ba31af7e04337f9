"""Spark sink benchmark: rows/s of df.writeStream.format("rmq"), as a ratio to Spark's Parquet sink
and the noop sink fed the same stream in the same run (target: ours / Parquet >= 0.5), then the exactly-once
fault runs with their counts (duplicates and lost must be 0).

Default: 2 million rows, 100-byte bodies, a tag and two properties, local[2]. The rows are written once as
Parquet files under --dir; each sink reads them as a stream (maxFilesPerTrigger=1, availableNow), so every sink
sees the same microbatches.
    .venv/bin/python benchmarks/spark_sink_bench.py [--rows 2000000] [--files 8] [--trials 40] [--dir /tmp/...]

Wire cases (--wire, the default): the same stream into one local broker (`rmq serve` on a fresh store, registered
with `rmq namesrv`) through the wire sink, exactly once (transactional halves committed per microbatch; target:
>= 0.6x the local rmq sink) and at least once (plain sends), in the same rounds.

Stock cases (--stock, or --stock-only; a stock Apache RocketMQ 4.9.7 name server and broker started as its own
launcher starts it, and one `rmq serve`, in the same run): the exactly-once sink into the stock broker (a half
message per row) beside (a) the at-least-once sink into the same broker, (b) Apache RocketMQ's own
TransactionMQProducer (Java, benchmarks/java/PeerLoad.java `txn`, sync halves from as many threads as given, the
local transaction answering COMMIT) writing the same rows into the same broker, until every message is visible,
and (c) the exactly-once sink into `rmq serve` (half batches). Target: stock exactly once >= 1.0x (b). The load
average is sampled through the run.
    .venv/bin/python benchmarks/spark_sink_bench.py --stock-only [--stock-rows 200000] [--java-threads 16,64]

Fault runs: (1) SIGKILL of a child process running the commit of a staged batch, at named protocol steps,
inside the commitlog write and at random moments, each followed by the replay a restarted query would do;
(2) a streaming query stopped at random points and restarted from its checkpoint until the input is done.
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests", "spark"))  # the fault-injection helpers the tests use
sys.path.insert(0, os.path.join(ROOT, "tests"))  # WireCluster: real rmq namesrv / rmq serve processes
sys.path.insert(0, os.path.join(ROOT, "tests", "peers"))  # StockCluster: stock Apache RocketMQ processes
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))  # peer_bench's PeerLoad runner
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def session():
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("rmq-sink-bench")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").config("spark.driver.memory", "3g")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def make_input(spark, path: str, rows: int, files: int) -> None:
    import pyspark.sql.functions as F

    marker = os.path.join(path, f"_rows_{rows}_{files}")
    if os.path.exists(marker):
        return
    shutil.rmtree(path, ignore_errors=True)
    df = spark.range(0, rows, numPartitions=files).select(
        F.encode(F.lpad(F.col("id").cast("string"), 100, "x"), "utf-8").alias("body"),  # 100 bytes, unique
        F.concat(F.lit("Tag"), (F.col("id") % 10).cast("string")).alias("tags"),
        F.create_map(F.lit("region"), F.when(F.col("id") % 2 == 0, "eu").otherwise("us"),
                     F.lit("price"), (F.col("id") % 1000).cast("string")).alias("properties"))
    df.write.mode("overwrite").parquet(path)
    open(marker, "w").close()


def timed_stream(spark, src: str, schema, sink: str, out: str, cp: str, **options) -> float:
    stream = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(src)
    w = stream.writeStream.format(sink).option("checkpointLocation", cp).trigger(availableNow=True)
    for k, v in options.items():
        w = w.option(k, v)
    t0 = time.perf_counter()
    q = w.start(out) if out else w.start()
    q.awaitTermination()
    if q.exception():
        raise q.exception()
    return time.perf_counter() - t0


WIRE_SINKS = {"wire": "exactly_once", "wire-alo": "at_least_once"}


def _sink_args(sink: str, out: str, namesrv: str, topic: str) -> tuple[str, str, dict]:
    """(format, path, options) of one case."""
    if sink in WIRE_SINKS:
        return "rmq", "", {"namesrvAddr": namesrv, "topic": topic, "deliveryGuarantee": WIRE_SINKS[sink]}
    return sink, "" if sink == "noop" else out, ({"topic": topic} if sink == "rmq" else {})


def throughput(spark, work: str, rows: int, files: int, repeat: int, namesrv: str = "") -> None:
    src = os.path.join(work, "input")
    make_input(spark, src, rows, files)
    schema = spark.read.parquet(src).schema
    sinks = ["noop", "parquet", "rmq"] + (list(WIRE_SINKS) if namesrv else [])
    # Warm-up, untimed, every sink on a small input: Python workers, the data source lookup, JIT (the first
    # Python data source write of a session costs ~15 s of start-up).
    warm = os.path.join(work, "warm-input")
    make_input(spark, warm, 20_000, 2)
    for sink in sinks:
        out, cp = os.path.join(work, f"warm-out-{sink}"), os.path.join(work, f"warm-cp-{sink}")
        shutil.rmtree(out, ignore_errors=True)
        shutil.rmtree(cp, ignore_errors=True)
        fmt, path, opts = _sink_args(sink, out, namesrv, "Warm")
        timed_stream(spark, warm, schema, fmt, path, cp, **opts)
    results: dict = {k: [] for k in sinks}
    for r in range(repeat):
        for sink in sinks:
            out = os.path.join(work, f"out-{sink}")
            cp = os.path.join(work, f"cp-{sink}")
            shutil.rmtree(out, ignore_errors=True)
            shutil.rmtree(cp, ignore_errors=True)
            topic = {"wire": f"Bench{r}", "wire-alo": f"BenchAlo{r}"}.get(sink, "Bench")
            fmt, path, opts = _sink_args(sink, out, namesrv, topic)
            secs = timed_stream(spark, src, schema, fmt, path, cp, **opts)
            results[sink].append(rows / secs)
    best = {k: max(v) for k, v in results.items()}
    print(f"rows {rows:,} in {files} microbatches of {rows // files:,} (100-byte bodies, a tag, two properties), "
          f"local[2], best of {repeat}")
    for sink in ["rmq", "parquet", "noop"] + [k for k in WIRE_SINKS if k in best]:
        print(f"  {sink:8s} sink: {best[sink]:12,.0f} rows/s   (runs: {', '.join(f'{x:,.0f}' for x in results[sink])})")
    print(f"  ours / Parquet = {best['rmq'] / best['parquet']:.2f}   (target >= 0.5)")
    print(f"  ours / noop    = {best['rmq'] / best['noop']:.2f}")
    if namesrv:
        print(f"  wire exactly once / local rmq = {best['wire'] / best['rmq']:.2f}   (target >= 0.6)")
        print(f"  wire at least once / local rmq = {best['wire-alo'] / best['rmq']:.2f}")
        print(f"  wire exactly once / at least once = {best['wire'] / best['wire-alo']:.2f}")
        from rmq_client import PullConsumer
        with PullConsumer(namesrv, "bench-check") as c:
            held = sum(hi - lo for lo, hi in c.queue_bounds(f"Bench{repeat - 1}").values())
        print(f"  the broker holds {held:,} messages of the last exactly-once round (want {rows:,})")
    from sink_testkit import counts
    n, distinct, dup, lost = counts(os.path.join(work, "out-rmq"), "Bench", [])
    print(f"  rmq store holds {n:,} messages, {distinct:,} distinct UNIQ_KEYs")


class LoadSampler:
    """The 1-minute load average every few seconds while a run goes: the figure a result is read against."""

    def __init__(self, every: float = 5.0):
        import threading
        self.samples: list[float] = [os.getloadavg()[0]]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(every,), daemon=True)
        self._thread.start()

    def _run(self, every: float) -> None:
        while not self._stop.wait(every):
            self.samples.append(os.getloadavg()[0])

    def stop(self) -> str:
        self._stop.set()
        self._thread.join()
        return f"load average {min(self.samples):.1f}-{max(self.samples):.1f} (1 min, {len(self.samples)} samples)"


def _visible(namesrv: str, topic: str) -> int:
    from rmq_client import PullConsumer
    with PullConsumer(namesrv, "bench-check") as c:
        return sum(hi - lo for lo, hi in c.queue_bounds(topic).values())


def java_transactions(load, namesrv: str, topic: str, rows: int, threads: int) -> float:
    """Rows/s of TransactionMQProducer: from its first send until the broker shows every message (its ENDs are
    oneway: the producer's own end is not the messages' arrival)."""
    out = load.run(namesrv, "txn", topic, rows, threads)
    assert out["failed"] == 0, out
    while _visible(namesrv, topic) < rows:
        time.sleep(0.05)
    return rows / (time.time() - out["start_ms"] / 1000)


def stock_throughput(spark, work: str, rows: int, files: int, repeat: int, java_threads: list[int]) -> None:
    from peer_bench import Load
    from stock_peers import STOCK_4, STOCK_BROKER_JVM, StockCluster
    from wire_cluster import PULL_LIMITS, WireCluster

    src = os.path.join(work, "stock-input")
    make_input(spark, src, rows, files)
    schema = spark.read.parquet(src).schema
    warm = os.path.join(work, "warm-input")
    make_input(spark, warm, 20_000, 2)
    root, serve_root = os.path.join(work, "stock-cluster"), os.path.join(work, "serve-cluster")
    shutil.rmtree(root, ignore_errors=True)
    shutil.rmtree(serve_root, ignore_errors=True)
    # Apache RocketMQ 4.9's own transaction settings (the tests' peers check far more often)
    stock_conf = {"transactionTimeOut": "6000", "transactionCheckInterval": "60000", "transactionCheckMax": "15"}
    load = Load(STOCK_4)
    with StockCluster(STOCK_4, root, brokers=("broker-a",), conf=stock_conf, broker_jvm=STOCK_BROKER_JVM) as stock, \
            WireCluster(serve_root, brokers=("broker-s",), conf=PULL_LIMITS) as serve:
        cases = {"stock-eo": (stock.namesrv, "exactly_once"), "stock-alo": (stock.namesrv, "at_least_once"),
                 "serve-eo": (serve.namesrv, "exactly_once")}
        for name, (namesrv, guarantee) in cases.items():  # warm-up, untimed: workers, JIT, routes
            cp = os.path.join(work, f"warm-cp-{name}")
            shutil.rmtree(cp, ignore_errors=True)
            timed_stream(spark, warm, schema, "rmq", "", cp, namesrvAddr=namesrv,
                         topic=f"Warm{name.replace('-', '')}", deliveryGuarantee=guarantee)
        java_transactions(load, stock.namesrv, "WarmJava", 20_000, java_threads[0])
        results: dict[str, list[float]] = {k: [] for k in [*cases, *(f"java-txn-{t}" for t in java_threads)]}
        sampler = LoadSampler()
        for r in range(repeat):
            for name, (namesrv, guarantee) in cases.items():
                cp = os.path.join(work, f"cp-{name}")
                shutil.rmtree(cp, ignore_errors=True)
                topic = f"{name.replace('-', '')}{r}"
                secs = timed_stream(spark, src, schema, "rmq", "", cp, namesrvAddr=namesrv, topic=topic,
                                    deliveryGuarantee=guarantee)
                held = _visible(namesrv, topic)
                assert held == rows, f"{name}: the broker shows {held:,} of {rows:,} rows"
                results[name].append(rows / secs)
            for t in java_threads:
                results[f"java-txn-{t}"].append(java_transactions(load, stock.namesrv, f"JavaTxn{t}x{r}", rows, t))
        loadavg = sampler.stop()
    best = {k: max(v) for k, v in results.items()}
    java = max(best[f"java-txn-{t}"] for t in java_threads)
    print(f"stock Apache RocketMQ {STOCK_4} (one broker, its launcher's JVM) and rmq serve: {rows:,} rows in {files} "
          f"microbatches (100-byte bodies, a tag, two properties), local[2], best of {repeat}; {loadavg}")
    for k, v in results.items():
        print(f"  {k:14s} {best[k]:10,.0f} rows/s   (runs: {', '.join(f'{x:,.0f}' for x in v)})")
    print(f"  stock exactly once / TransactionMQProducer = {best['stock-eo'] / java:.2f}   (target >= 1.0)")
    print(f"  stock exactly once / stock at least once   = {best['stock-eo'] / best['stock-alo']:.2f}")
    print(f"  stock exactly once / rmq serve exactly once = {best['stock-eo'] / best['serve-eo']:.2f}")


def fault_runs(spark, work: str, trials: int, rows_per_trial: int, restarts: int) -> None:
    from sink_testkit import counts, markers
    from test_sink_exactly_once import sigkill_trials, wait_for_first_offsets

    from store.store_check import check_store

    seed = random.randrange(1 << 30)
    for atomic in (True, False):
        path = os.path.join(work, f"crash-{'atomic' if atomic else 'plain'}")
        shutil.rmtree(path, ignore_errors=True)
        t0 = time.perf_counter()
        expected, outcomes = sigkill_trials(path, trials, rows_per_trial, random.Random(seed), atomic=atomic)
        n, distinct, dup, lost = counts(path, "C", expected)
        kinds = {k: outcomes.count(k) for k in sorted(set(outcomes))}
        print(f"SIGKILL inside commit ({'atomic' if atomic else 'plain'} put_batch), seed {seed}: {trials} trials x "
              f"{rows_per_trial:,} rows in {time.perf_counter() - t0:.0f} s; replays {kinds}; input {len(expected):,}, "
              f"stored {n:,}, distinct UNIQ_KEYs {distinct:,}, duplicates {dup}, lost {lost}, "
              f"rmq check {'ok' if check_store(path).ok else 'FAILED'}")

    # a query stopped at random points and restarted from its checkpoint
    from source_testkit import fill
    rng = random.Random(seed)
    base = os.path.join(work, "restarts")
    shutil.rmtree(base, ignore_errors=True)
    n = 20_000
    src = fill(os.path.join(base, "src"), "T", n=n, queues=4)
    dst = os.path.join(base, "dst")

    def start(available_now):
        s = (spark.readStream.format("rmq").option("topic", "T").option("startingOffsets", "earliest")
             .option("maxMessagesPerTrigger", 500).load(src).select("body", "tags", "properties"))
        w = s.writeStream.format("rmq").option("topic", "S").option("checkpointLocation", os.path.join(base, "cp"))
        return w.trigger(availableNow=True).start(dst) if available_now else w.start(dst)

    stops = 0
    t0 = time.perf_counter()
    for _ in range(restarts):
        q = start(False)
        if stops == 0:
            wait_for_first_offsets(q, os.path.join(base, "cp"))
        time.sleep(rng.uniform(0.2, 4.0))
        q.stop()
        stops += 1
    q = start(True)
    q.awaitTermination()
    stored_n, distinct, dup, lost = counts(dst, "S", [f"body-T-{i}".encode() for i in range(n)])
    ids = [m[1] for m in markers(dst)]
    print(f"query stopped at random points and restarted: {stops} stops in {time.perf_counter() - t0:.0f} s; "
          f"input {n:,}, stored {stored_n:,}, distinct UNIQ_KEYs {distinct:,}, duplicates {dup}, lost {lost}, "
          f"batches committed {len(ids)} (each once: {len(ids) == len(set(ids))})")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--files", type=int, default=8, help="input files = microbatches")
    ap.add_argument("--repeat", type=int, default=3, help="rounds (each sink once per round, interleaved); best of")
    ap.add_argument("--trials", type=int, default=40, help="SIGKILL trials per put_batch kind")
    ap.add_argument("--trial-rows", type=int, default=20_000)
    ap.add_argument("--restarts", type=int, default=8)
    ap.add_argument("--dir", default="/tmp/rmq-spark-sink-bench")
    ap.add_argument("--no-wire", action="store_true", help="skip the wire sink cases")
    ap.add_argument("--no-faults", action="store_true", help="skip the fault runs")
    ap.add_argument("--stock", action="store_true", help="also the stock Apache RocketMQ cases")
    ap.add_argument("--stock-only", action="store_true", help="only the stock Apache RocketMQ cases")
    ap.add_argument("--stock-rows", type=int, default=200_000)
    ap.add_argument("--java-threads", default="16,64", help="TransactionMQProducer threads, each a case")
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    spark = session()
    if args.stock or args.stock_only:
        stock_throughput(spark, args.dir, args.stock_rows, args.files, args.repeat,
                         [int(t) for t in args.java_threads.split(",")])
        if args.stock_only:
            spark.stop()
            return
    if args.no_wire:
        throughput(spark, args.dir, args.rows, args.files, args.repeat)
    else:
        from wire_cluster import PULL_LIMITS, WireCluster
        broker_root = os.path.join(args.dir, "wire-cluster")
        shutil.rmtree(broker_root, ignore_errors=True)
        with WireCluster(broker_root, conf=PULL_LIMITS) as cluster:
            throughput(spark, args.dir, args.rows, args.files, args.repeat, cluster.namesrv)
    if not args.no_faults:
        fault_runs(spark, args.dir, args.trials, args.trial_rows, args.restarts)
    spark.stop()


if __name__ == "__main__":
    main()
