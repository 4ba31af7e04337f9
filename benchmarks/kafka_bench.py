"""Side by side with Spark's Kafka source: the same messages through Apache Kafka (one broker, KRaft, on
loopback) read by spark-sql-kafka-0-10, and through the rmq source, in one run, cases interleaved, best of --repeat.

The messages are spark_source_bench's (10,000,000 x 100 B bodies, a key, TAGS and two properties price/region, 8
queues), built once under --dir with its code. Kafka gets them from that bench's Parquet copy through Spark's own
Kafka sink: key = the message's key, value = the body, headers = the two properties, partition = the queue (8
partitions). Kafka keeps no tags: its records carry key, value and two headers.

Throughput, rows/s (readStream ... availableNow -> noop, and spark.read ... count()):
  K  Kafka, includeHeaders=true          a  rmq from the store directory      w  rmq over the wire (`rmq serve`,
  K0 Kafka, includeHeaders=false         a0 rmq, includeProperties=false         pulls of 4,096): w, w0, w6
  K6 Kafka, six columns (a projection:   a6 rmq, the six-column schema (Python sources prune nothing: the schema
     topic, partition, offset, key,         topic, queue_id, queue_offset, tags, body, store_timestamp)
     value, timestamp)
  the batch count of each of K, a, w (suffix b: Kb, ab, wb).
  s, s0, s6, sb: w's shapes through a stock Apache RocketMQ 4.9.7 broker (its own name server; the JVM options of
     RocketMQ's launcher) serving a copy of the store directory, its pull caps raised as docs/broker.md tells Spark
     users (4,096 messages / 8 MiB): the wire figure against the brokers users run, not only `rmq serve`. Needs the
     stock peers (`make peers`).
Latency: 10 messages/s sent one at a time (Kafka: a Java KafkaProducer, acks=1, no linger; rmq: rmq_client's
Producer in its own process), read by a stream with trigger 0 s into foreachBatch, which collects the bodies
(each the send time in microseconds); p50/p90/p99 of (collected - sent), the first data batch left out.

Ratios rmq/Kafka are printed for each shape. Each run's load is recorded (machine_load: the 1-minute load
average, and the cores the rest of the machine kept busy while it ran); a ratio whose runs had the rest of the
machine above --max-others cores is marked "(busy machine)" and is no figure: run it again when the machine is
quiet. Spark's JVM gets conf/spark-defaults.conf's Arrow options (Arrow Java's per-value checks off) unless
--arrow-checks; in local[2] it is one JVM for both sources. Fetches its jars with benchmarks/kafka/fetch.sh into
.peers/kafka/.
    .venv/bin/python benchmarks/kafka_bench.py [--messages 10000000] [--dir /tmp/rmq-kafka-bench] [--repeat 3]
    .venv/bin/python benchmarks/kafka_bench.py --quick      # 1,000,000 messages, 20 s of latency: development
"""
from __future__ import annotations

import argparse
import base64
import glob
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from javac_cache import compiled  # noqa: E402
from machine_load import Interval, Load  # noqa: E402
from spark_source_bench import (  # noqa: E402
    QUEUES,
    SIX_DDL,
    TOPIC,
    _serve,
    _timed,
    best_interleaved,
    build_parquet,
    build_store,
    run_stream,
)

KAFKA_HOME = os.environ.get("RMQ_KAFKA_DIR", os.path.join(ROOT, ".peers", "kafka"))
# Of the connector's runtime dependencies only these go on Spark's class path: pyspark brings Spark, Scala,
# Hadoop and the compression codecs itself.
CONNECTOR_JARS = ("spark-sql-kafka-0-10_", "spark-token-provider-kafka-0-10_", "kafka-clients-", "commons-pool2-")
KAFKA_SIX = ["topic", "partition", "offset", "key", "value", "timestamp"]
LATENCY_TOPIC = "BenchLatency"
BROKER_JVM = ["-Xms256m", "-Xmx1g", "-XX:+UseG1GC", "-Djava.awt.headless=true", "-Djava.net.preferIPv4Stack=true"]


def fetch() -> tuple[str, list[str], str]:
    """The broker's lib folder, the connector's jars for Spark, and the connector's version."""
    subprocess.run(["sh", os.path.join(HERE, "kafka", "fetch.sh")], check=True)
    broker = sorted(glob.glob(os.path.join(KAFKA_HOME, "broker-*", "lib")))[-1]
    connector = sorted(glob.glob(os.path.join(KAFKA_HOME, "spark-sql-kafka-*", "lib")))[-1]
    jars = [j for j in sorted(glob.glob(os.path.join(connector, "*.jar")))
            if os.path.basename(j).startswith(CONNECTOR_JARS)]
    return broker, jars, os.path.basename(os.path.dirname(connector)).rsplit("-", 1)[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class KafkaBroker:
    """One Apache Kafka broker in KRaft mode (broker and controller in one JVM) on loopback, its log under
    `workdir`, formatted once and reused; stopped on exit whatever happens."""

    def __init__(self, lib: str, workdir: str):
        self.lib, self.workdir = lib, workdir
        self.logs = os.path.join(workdir, "logs")
        self.proc: subprocess.Popen | None = None
        self.bootstrap = ""

    def _java(self, main: str, *args: str, **kw) -> subprocess.Popen:
        return subprocess.Popen(["java", *BROKER_JVM, f"-Dlog4j2.configurationFile={self.workdir}/log4j2.properties",
                                 "-cp", os.path.join(self.lib, "*"), main, *args], **kw)

    def start(self, fresh: bool) -> "KafkaBroker":
        if fresh:
            shutil.rmtree(self.logs, ignore_errors=True)
        os.makedirs(self.logs, exist_ok=True)
        port, controller = _free_port(), _free_port()
        self.bootstrap = f"127.0.0.1:{port}"
        props = os.path.join(self.workdir, "server.properties")
        with open(props, "w") as f:
            f.write(f"""process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:{controller}
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}
advertised.listeners=PLAINTEXT://127.0.0.1:{port}
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
log.dirs={self.logs}
num.partitions={QUEUES}
auto.create.topics.enable=true
log.retention.hours=-1
log.segment.bytes=1073741824
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
group.initial.rebalance.delay.ms=0
""")
        with open(os.path.join(self.workdir, "log4j2.properties"), "w") as f:
            f.write(f"""appender.f.type=File
appender.f.name=f
appender.f.fileName={self.workdir}/server.log
appender.f.layout.type=PatternLayout
appender.f.layout.pattern=%d %p %c{{1}} - %m%n
rootLogger.level=INFO
rootLogger.appenderRef.f.ref=f
""")
        if not os.path.exists(os.path.join(self.logs, "meta.properties")):
            cluster = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
            fmt = self._java("kafka.tools.StorageTool", "format", "-t", cluster, "-c", props,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            out, _ = fmt.communicate(timeout=180)
            if fmt.returncode != 0:
                raise SystemExit(f"kafka-storage format failed:\n{out[-2000:]}")
        log = os.path.join(self.workdir, "server.log")
        if os.path.exists(log):
            os.remove(log)
        self.proc = self._java("kafka.Kafka", props, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 180
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"the Kafka broker exited ({self.proc.returncode}); see {log}")
            if os.path.exists(log) and "Kafka Server started" in open(log, errors="replace").read():
                return self
            time.sleep(0.5)
        self.stop()
        raise SystemExit(f"the Kafka broker did not start in 180 s; see {log}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def __enter__(self) -> "KafkaBroker":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def compiled_producer(broker_lib: str) -> str:
    """benchmarks/kafka/LatencyProducer.java compiled against the broker's kafka-clients, once."""
    return compiled(os.path.join(HERE, "kafka", "LatencyProducer.java"), broker_lib, KAFKA_HOME)


def load_kafka(spark, parquet_path: str, bootstrap: str) -> float:
    """The Parquet copy's messages into the Kafka topic through Spark's Kafka sink, one task per queue file so each
    partition keeps its queue's order; returns the seconds it took."""
    from pyspark.sql import functions as F
    spark.conf.set("spark.sql.files.maxPartitionBytes", str(1 << 40))
    header = [F.struct(F.lit(k).alias("key"), F.col("properties")[k].cast("binary").alias("value"))
              for k in ("price", "region")]
    df = spark.read.parquet(parquet_path).select(
        F.col("keys")[0].cast("binary").alias("key"), F.col("body").alias("value"),
        F.array(*header).alias("headers"), F.col("queue_id").alias("partition"))
    t0 = time.perf_counter()
    (df.write.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("topic", TOPIC)
     .option("kafka.linger.ms", "5").option("kafka.batch.size", str(256 * 1024)).save())
    spark.conf.unset("spark.sql.files.maxPartitionBytes")
    return time.perf_counter() - t0


def percentiles(samples: list[float]) -> tuple[float, float, float]:
    import numpy as np
    p = np.percentile(np.array(samples), [50, 90, 99])
    return float(p[0]), float(p[1]), float(p[2])


def measure_latency(df, column: str, sender: list[str], tmp: str, seconds: float) -> list[float]:
    """ms from send to the bodies collected in foreachBatch, trigger 0 s; the first batch with data is left out
    (it holds what came while the query started)."""
    samples: list[float] = []
    seen_data = [False]

    def on_batch(batch_df, epoch_id):
        bodies = [r[0] for r in batch_df.select(column).collect()]
        now = time.time() * 1e6
        if not bodies:
            return
        if not seen_data[0]:
            seen_data[0] = True
            return
        samples.extend((now - int(bytes(b))) / 1000 for b in bodies)

    ck = os.path.join(tmp, f"lat-{time.time_ns()}")
    q = (df.writeStream.foreachBatch(on_batch).trigger(processingTime="0 seconds")
         .option("checkpointLocation", ck).start())
    try:
        deadline = time.time() + 120
        while not q.recentProgress and time.time() < deadline:  # the query has resolved its start offsets
            time.sleep(0.2)
        proc = subprocess.Popen(sender)
        proc.wait(seconds + 120)
        time.sleep(3)
    finally:
        q.stop()
        shutil.rmtree(ck, ignore_errors=True)
    return samples


def send_rmq(namesrv: str, topic: str, rate: float, seconds: float) -> None:
    """rmq's latency sender (run in its own process, as Kafka's is): one message at a time, round robin over the
    queues, each body the send time in microseconds."""
    from rmq_client.producer import Producer
    with Producer(namesrv) as p:
        start = time.perf_counter()
        for i in range(int(rate * seconds)):
            wait = start + i / rate - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
            p.send(topic, str(int(time.time() * 1e6)).encode())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=None, help="10,000,000 (--quick: 1,000,000)")
    ap.add_argument("--quick", action="store_true", help="for development: 1,000,000 messages (unless --messages "
                                                        "says otherwise), 20 s of latency measurement")
    ap.add_argument("--dir", default="/tmp/rmq-kafka-bench")
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement; the best is reported")
    ap.add_argument("--max-others", type=float, default=0.3,
                    help="cores the rest of the machine may keep busy during a run before its ratio is marked")
    ap.add_argument("--cases", default="K,K0,K6,a,a0,a6,w,w0,w6,s,s0,s6,Kb,ab,wb,sb",
                    help="which throughput cases to run")
    ap.add_argument("--latency-seconds", type=float, default=None, help="60 (--quick: 20); 0: no latency "
                                                                           "measurement")
    ap.add_argument("--rate", type=float, default=10.0, help="latency: messages a second")
    ap.add_argument("--arrow-checks", action="store_true",
                    help="leave Arrow Java's per-value checks on in the JVM (by default it gets "
                         "conf/spark-defaults.conf's options that turn them off, as users' sessions do)")
    ap.add_argument("--profile", default="", help="a folder: py-spy (rmq, a and w) and JFR (Kafka, K) profiles of "
                                                 "one stream run each, after the measurements")
    ap.add_argument("--send-rmq", nargs=4, metavar=("NAMESRV", "TOPIC", "RATE", "SECONDS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.send_rmq:
        namesrv, topic, rate, seconds = args.send_rmq
        send_rmq(namesrv, topic, float(rate), float(seconds))
        return
    if args.messages is None:
        args.messages = 1_000_000 if args.quick else 10_000_000
    if args.latency_seconds is None:
        args.latency_seconds = 20.0 if args.quick else 60.0
    if args.profile and not os.path.exists(os.path.join(os.path.dirname(sys.executable), "py-spy")):
        raise SystemExit("--profile needs py-spy beside this interpreter: pip install py-spy")
    n = args.messages
    store_path = os.path.join(args.dir, "store")
    parquet_path = os.path.join(args.dir, "parquet")
    os.makedirs(args.dir, exist_ok=True)
    broker_lib, jars, connector_version = fetch()
    build_store(store_path, n)
    build_parquet(store_path, parquet_path, n)
    producer_classes = compiled_producer(broker_lib)

    kafka = KafkaBroker(broker_lib, os.path.join(args.dir, "kafka"))
    rmq = None
    spark = None
    stock = None
    try:
        if any(c.startswith("s") for c in args.cases.split(",")):
            stock = stock_broker(store_path, os.path.join(args.dir, "stock"))
        marker = os.path.join(args.dir, "kafka", "loaded.json")
        loaded = os.path.exists(marker) and json.load(open(marker)).get("messages") == n
        kafka.start(fresh=not loaded)
        rmq = _serve(store_path, os.path.join(args.dir, "serve"))
        from pyspark.sql import SparkSession
        spark = (SparkSession.builder.master("local[2]").appName("kafka_bench")
                 .config("spark.jars", ",".join(jars))
                 .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                 .config("spark.sql.shuffle.partitions", "2")
                 .config("spark.sql.execution.arrow.pyspark.enabled", "true")
                 .config("spark.driver.memory", "4g")
                 .config("spark.driver.extraJavaOptions", java_options(args)).getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        if not loaded:
            secs = load_kafka(spark, parquet_path, kafka.bootstrap)
            json.dump({"messages": n, "seconds": secs}, open(marker, "w"))
            print(f"loaded Kafka: {n:,} messages through Spark's Kafka sink in {secs:.1f} s "
                  f"({n / secs:,.0f} msg/s)", flush=True)
        else:
            secs = json.load(open(marker))["seconds"]
            print(f"Kafka already holds the {n:,} messages (loaded at {n / secs:,.0f} msg/s)", flush=True)
        results = run_cases(spark, args, kafka.bootstrap, rmq[1], store_path, n,
                            stock.namesrv if stock is not None else "")
        lat: dict = {}
        if args.latency_seconds > 0:
            lat = run_latency(spark, args, kafka.bootstrap, rmq[1], producer_classes, broker_lib)
        report(results, lat, args, n, connector_version, os.path.basename(os.path.dirname(broker_lib)))
        if args.profile:
            profile(spark, args, kafka.bootstrap, rmq[1], store_path)
    finally:
        if spark is not None:
            spark.stop()
        if rmq is not None:
            rmq[0].terminate()
            rmq[0].wait(30)
        if stock is not None:
            stock.stop()
        kafka.stop()


def java_options(args) -> str:
    """The driver JVM's options: in local[2] both sources' tasks run in it, so whatever it gets, both get (Kafka's
    source reads no Arrow: the options change only the rmq source's side)."""
    from rmq_cli.spark_java_options import ARROW_JAVA_OPTIONS
    return "" if args.arrow_checks else " ".join(ARROW_JAVA_OPTIONS)


def stock_broker(store_path: str, workdir: str):
    """A stock RocketMQ 4.9.7 name server and broker serving a copy of the store (a stock broker opens the
    store's files as its own: tests/peers/test_stock_store.py), started."""
    sys.path.insert(0, ROOT)
    from store import StoreConfig
    from tests.peers.stock_peers import STOCK_4, STOCK_BROKER_JVM, StockCluster

    sizes = StoreConfig()  # the bench store's file sizes (RocketMQ's defaults), which the broker must be given
    conf = {"flushDiskType": "ASYNC_FLUSH", "mappedFileSizeCommitLog": str(sizes.mappedFileSizeCommitLog),
            "mappedFileSizeConsumeQueue": str(sizes.mappedFileSizeConsumeQueue),
            "maxTransferCountOnMessageInMemory": "4096", "maxTransferBytesOnMessageInMemory": "8388608"}
    shutil.rmtree(workdir, ignore_errors=True)
    cluster = StockCluster(STOCK_4, workdir, brokers=("broker-s",), conf=conf, broker_jvm=STOCK_BROKER_JVM)
    shutil.copytree(store_path, cluster.store("broker-s"))
    for leftover in ("lock", "abort"):  # a store closed cleanly has neither; the copy must not look crashed
        if os.path.exists(os.path.join(cluster.store("broker-s"), leftover)):
            os.remove(os.path.join(cluster.store("broker-s"), leftover))
    return cluster.__enter__()


def _readers(spark, bootstrap: str, namesrv: str, store_path: str, stock_namesrv: str = ""):
    def kafka(stream: bool, headers: bool):
        r = (spark.readStream if stream else spark.read).format("kafka")
        r = (r.option("kafka.bootstrap.servers", bootstrap).option("subscribe", TOPIC)
             .option("startingOffsets", "earliest").option("includeHeaders", str(headers).lower()))
        return r.load()

    def ours(stream: bool, wire: bool, schema=None, stock: bool = False, **opts):
        r = (spark.readStream if stream else spark.read).format("rmq").option("topic", TOPIC)
        r = r.option("startingOffsets", "earliest")
        if wire:
            r = r.option("namesrvAddr", stock_namesrv if stock else namesrv).option("pullBatchSize", "4096")
        for k, v in opts.items():
            r = r.option(k, v)
        if schema is not None:
            r = r.schema(schema)
        return r.load() if wire else r.load(store_path)
    return kafka, ours


def run_cases(spark, args, bootstrap: str, namesrv: str, store_path: str, n: int, stock_namesrv: str = "") -> dict:
    kafka, ours = _readers(spark, bootstrap, namesrv, store_path, stock_namesrv)
    tmp = os.path.join(args.dir, "tmp")

    def count(df):
        got = [0]
        t, _ = _timed(lambda: got.__setitem__(0, df.count()))
        return t, got[0]

    streams = {
        "K": lambda: kafka(True, True), "K0": lambda: kafka(True, False),
        "K6": lambda: kafka(True, False).select(*KAFKA_SIX),
        "a": lambda: ours(True, False), "a0": lambda: ours(True, False, includeProperties="false"),
        "a6": lambda: ours(True, False, SIX_DDL),
        "w": lambda: ours(True, True), "w0": lambda: ours(True, True, includeProperties="false"),
        "w6": lambda: ours(True, True, SIX_DDL),
        "s": lambda: ours(True, True, stock=True),
        "s0": lambda: ours(True, True, stock=True, includeProperties="false"),
        "s6": lambda: ours(True, True, SIX_DDL, stock=True)}
    batches = {"Kb": lambda: kafka(False, True), "ab": lambda: ours(False, False), "wb": lambda: ours(False, True),
               "sb": lambda: ours(False, True, stock=True)}
    cases = args.cases.split(",")
    runs = {}
    for c in cases:
        if c in streams:
            runs[c] = measured((lambda f: lambda: run_stream(spark, f(), tmp))(streams[c]))
        elif c in batches:
            runs[c] = measured((lambda f: lambda: count(f()))(batches[c]))
        else:
            raise SystemExit(f"--cases: unknown case {c!r}")
    # Warm-up outside the timings: the JVM's Kafka classes, Spark's Python workers, the lookup of format("rmq").
    kafka(False, False).limit(10).collect()
    ours(False, False).limit(10).collect()
    got = best_interleaved(runs, args.repeat)
    for c, (t, rows, _) in got.items():
        if rows != n:
            raise SystemExit(f"case {c} read {rows:,} rows, not {n:,}")
    return got


def measured(fn):
    """A case's run as (seconds, rows, the load it ran under)."""
    def run():
        interval = Interval().begin()
        t, rows = fn()
        load = interval.end()
        print(f"    {load.text()}; {load.cpu_text(rows)}", flush=True)
        return t, rows, load
    return run


def run_latency(spark, args, bootstrap: str, namesrv: str, classes: str, broker_lib: str) -> dict:
    from rmq_client.producer import Producer
    tmp = os.path.join(args.dir, "tmp")
    cp = f"{classes}:{os.path.join(broker_lib, '*')}"
    subprocess.run(["java", "-cp", cp, "LatencyProducer", "--create",
                    bootstrap, LATENCY_TOPIC, str(QUEUES)], check=True, timeout=120)
    with Producer(namesrv) as p:
        p.create_topic(LATENCY_TOPIC, QUEUES)
    k = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
         .option("subscribe", LATENCY_TOPIC).option("startingOffsets", "latest").load())
    r = (spark.readStream.format("rmq").option("namesrvAddr", namesrv).option("topic", LATENCY_TOPIC)
         .option("startingOffsets", "latest").load())
    secs = str(args.latency_seconds)
    k_sender = ["java", "-Xmx128m", "-cp", cp, "LatencyProducer", bootstrap, LATENCY_TOPIC, str(args.rate), secs,
                str(QUEUES)]
    r_sender = [sys.executable, os.path.abspath(__file__), "--send-rmq", namesrv, LATENCY_TOPIC, str(args.rate), secs]
    interval = Interval().begin()
    out = {"K": measure_latency(k, "value", k_sender, tmp, args.latency_seconds),
           "w": measure_latency(r, "body", r_sender, tmp, args.latency_seconds)}
    return {**out, "load": interval.end()}


LABELS = {
    "K": "Kafka, includeHeaders=true, stream", "K0": "Kafka, includeHeaders=false, stream",
    "K6": "Kafka, six columns, stream", "Kb": "Kafka, includeHeaders=true, batch count",
    "a": "rmq directory, all columns, stream", "a0": "rmq directory, includeProperties=false, stream",
    "a6": "rmq directory, six-column schema, stream", "ab": "rmq directory, all columns, batch count",
    "w": "rmq wire, all columns, stream", "w0": "rmq wire, includeProperties=false, stream",
    "w6": "rmq wire, six-column schema, stream", "wb": "rmq wire, all columns, batch count",
    "s": "rmq, stock 4.9.7 broker, all columns, stream", "s0": "rmq, stock 4.9.7, includeProperties=false, stream",
    "s6": "rmq, stock 4.9.7, six-column schema, stream", "sb": "rmq, stock 4.9.7, all columns, batch count"}
# Each rmq case against the Kafka case of the same shape.
PAIRS = {"a": "K", "w": "K", "s": "K", "a0": "K0", "w0": "K0", "s0": "K0", "a6": "K6", "w6": "K6", "s6": "K6",
         "ab": "Kb", "wb": "Kb", "sb": "Kb"}


def busy(load: Load, args) -> bool:
    return load.others_cores > args.max_others


def report(got: dict, lat: dict, args, n: int, connector: str, broker: str) -> None:
    loads = [load for _, _, load in got.values()] + ([lat["load"]] if lat else [])
    averages = [load.loadavg for load in loads] or [os.getloadavg()[0]]
    print(f"\nkafka_bench: {n:,} messages, 100-byte bodies, {QUEUES} queues/partitions, local[2], best of "
          f"{args.repeat} (cases interleaved); Kafka {broker.split('-', 1)[1]} (KRaft), spark-sql-kafka-0-10 "
          f"{connector}; load average {min(averages):.1f}-{max(averages):.1f} during the run; each row's load is "
          f"that of its best run (others: cores the rest of the machine kept busy, marked above {args.max_others}); "
          f"the one JVM both sources' tasks run in: {java_options(args) or 'Arrow Java checks on (--arrow-checks)'}")
    marked = []
    for c, (t, _, load) in got.items():
        ratio = ""
        if c in PAIRS and PAIRS[c] in got:
            ratio = f"  rmq/Kafka {got[PAIRS[c]][0] / t:.2f}"
            if busy(load, args) or busy(got[PAIRS[c]][2], args):
                ratio += " (busy machine)"
                marked.append(c)
        print(f"({c:>2}) {LABELS[c]:<44} {n / t:>12,.0f} rows/s  ({t:6.2f} s, {load.text()}){ratio}", flush=True)
    if marked:
        print(f"marked ratios ({', '.join(marked)}): the rest of the machine kept more than {args.max_others} cores "
              f"busy while a run of the pair ran; they are no figure, run again on a quiet machine")
    if lat:
        pk, pw = percentiles(lat["K"]), percentiles(lat["w"])
        print(f"latency at {args.rate:g} msg/s, send -> foreachBatch, trigger 0 s, {args.latency_seconds:g} s:")
        print(f"  Kafka     p50 {pk[0]:8.1f} ms  p90 {pk[1]:8.1f} ms  p99 {pk[2]:8.1f} ms  ({len(lat['K'])} samples)")
        print(f"  rmq wire  p50 {pw[0]:8.1f} ms  p90 {pw[1]:8.1f} ms  p99 {pw[2]:8.1f} ms  ({len(lat['w'])} samples)")
        print(f"  rmq/Kafka p50 {pw[0] / pk[0]:.2f}  p90 {pw[1] / pk[1]:.2f}  p99 {pw[2] / pk[2]:.2f} "
              f"(latency: above 1 is slower; {lat['load'].text()}"
              f"{', busy machine: no figure' if busy(lat['load'], args) else ''})", flush=True)


def profile(spark, args, bootstrap: str, namesrv: str, store_path: str) -> None:
    """One stream run each of K, a and w with JFR recording the driver JVM (where local[2]'s tasks run), a and w
    also under py-spy (this process and its children: Spark's Python workers and `rmq serve`); prints where the
    task threads and the Python processes spent their samples."""
    kafka, ours = _readers(spark, bootstrap, namesrv, store_path)
    tmp = os.path.join(args.dir, "tmp")
    os.makedirs(args.profile, exist_ok=True)
    pid = str(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    spy = os.path.join(os.path.dirname(sys.executable), "py-spy")
    for name, df in (("K", lambda: kafka(True, True)), ("a", lambda: ours(True, False)),
                     ("w", lambda: ours(True, True))):
        jfr = os.path.abspath(os.path.join(args.profile, f"{name}.jfr"))
        raw = os.path.abspath(os.path.join(args.profile, f"{name}.pyspy.txt"))
        subprocess.run(["jcmd", pid, "JFR.start", f"name=kbench-{name}", "settings=profile", f"filename={jfr}"],
                       check=True, capture_output=True)
        rec = None
        if name != "K":
            rec = subprocess.Popen([spy, "record", "--subprocesses", "-r", "50", "-f", "raw", "-o", raw,
                                    "--pid", str(os.getpid())], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(2)
        t, _ = run_stream(spark, df(), tmp)
        if rec is not None:
            rec.send_signal(2)
            rec.wait(120)
        subprocess.run(["jcmd", pid, "JFR.stop", f"name=kbench-{name}"], check=True, capture_output=True)
        print(f"\nprofile of {name} ({LABELS[name]}, {t:.2f} s): {jfr}" + (f", {raw}" if rec else ""))
        print(jfr_summary(jfr))
        if rec is not None:
            print(pyspy_summary(raw), flush=True)


# What a task thread's sample is doing: the first of these found walking its stack from the top.
JFR_KINDS = (("Kafka consumer: fetch, decode records", ("org.apache.kafka.",)),
             ("Spark Kafka source: record -> row", ("org.apache.spark.sql.kafka010.",)),
             ("Python data source: Arrow from the worker -> rows", ("org.apache.spark.sql.execution.python.",
                                                                   "org.apache.spark.sql.execution.arrow.",
                                                                   "org.apache.arrow.",
                                                                   "org.apache.spark.api.python.",
                                                                   "org.apache.spark.sql.vectorized.")),
             ("Spark generated code, rows, noop", ("org.apache.spark.sql.catalyst.", "GeneratedClass",
                                                  "org.apache.spark.sql.execution.")),
             ("socket / native I/O", ("sun.nio.", "java.net.", "java.io.")))


def jfr_summary(path: str, top: int = 8) -> str:
    """Execution samples of Spark's task threads ("Executor task launch worker"): the share of each kind above and
    the methods with the most samples on top of the stack."""
    out = subprocess.run(["jfr", "print", "--json", "--stack-depth", "64", "--events", "jdk.ExecutionSample", path],
                         capture_output=True, text=True, check=True).stdout
    kinds: dict[str, int] = {}
    tops: dict[str, int] = {}
    total = 0
    for ev in json.loads(out)["recording"]["events"]:
        v = ev["values"]
        if not (v["sampledThread"].get("javaName") or "").startswith("Executor task"):
            continue
        frames = [f"{f['method']['type']['name'].replace('/', '.')}.{f['method']['name']}"
                  for f in v["stackTrace"]["frames"]]
        if not frames:
            continue
        total += 1
        tops[frames[0]] = tops.get(frames[0], 0) + 1
        kind = next((k for fr in frames for k, marks in JFR_KINDS if any(m in fr for m in marks)), "other")
        kinds[kind] = kinds.get(kind, 0) + 1
    lines = [f"  JFR, task threads: {total} samples"]
    lines += [f"    {k:<52} {c / total:6.1%}" for k, c in sorted(kinds.items(), key=lambda x: -x[1])]
    lines += ["    top of stack:"] + [f"      {c / total:6.1%}  {m}" for m, c in
                                      sorted(tops.items(), key=lambda x: -x[1])[:top]]
    return "\n".join(lines)


def pyspy_summary(path: str, top: int = 10) -> str:
    """py-spy's raw samples (CPU only) by process (Spark's Python workers, `rmq serve`, the driver) and the
    workers' functions with the most samples on top of the stack."""
    procs: dict[str, int] = {}
    tops: dict[str, int] = {}
    for line in open(path):
        stack, _, count = line.rstrip("\n").rpartition(" ")
        frames = stack.split(";")
        at = max(i for i, f in enumerate(frames) if f.startswith("process "))
        cmd = frames[at]
        proc = ("Python workers" if "pyspark.daemon" in cmd or "pyspark.worker" in cmd else
                "rmq serve" if "rmq_cli" in cmd else "driver (this process)" if "kafka_bench" in cmd else
                "Spark's driver-side Python source runner" if "pyspark.sql." in cmd else cmd[:60])
        procs[proc] = procs.get(proc, 0) + int(count)
        if proc == "Python workers" and len(frames) > at + 1:
            tops[frames[-1]] = tops.get(frames[-1], 0) + int(count)
    total = sum(procs.values()) or 1
    workers = procs.get("Python workers", 0) or 1
    lines = [f"  py-spy, CPU samples at 50/s: {total}"]
    lines += [f"    {p:<52} {c / total:6.1%}" for p, c in sorted(procs.items(), key=lambda x: -x[1])]
    lines += ["    Python workers, top of stack:"] + [f"      {c / workers:6.1%}  {f}" for f, c in
                                                      sorted(tops.items(), key=lambda x: -x[1])[:top]]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
