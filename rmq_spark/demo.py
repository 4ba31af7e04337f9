"""`make demo`: a Spark Structured Streaming pipeline on the embedded store under ./data/demo-store.

A producer thread keeps appending orders to the topic Orders while one streaming query reads them with
format("rmq") (tag and SQL92 selectors pushed into the scan), enriches them and writes them back with the rmq
sink (exactly once per microbatch) into OrdersEU. One line per microbatch: rows, rates and the lag of each queue
as the consumer group's committed offsets show it (`rmq stat --group`); then a summary that counts the output
against what was produced. The Spark session takes conf/spark-defaults.conf and conf/log4j2.properties.
Fresh on every run.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import threading
import time
from typing import Optional

from store import MessageStore, OffsetStore, ReadOffsetType, StoreConfig
from store.store_check import check_store

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# conf/ of a clone, else the copy installed with the package (rmq_spark/conf)
CONF_DIR = next((d for d in (os.path.join(ROOT, "conf"), os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                        "conf"))
                 if os.path.isfile(os.path.join(d, "spark-defaults.conf"))), os.path.join(ROOT, "conf"))
STORE_DIR = os.path.join("data", "demo-store")
CHECKPOINT_DIR = os.path.join("data", "demo-checkpoint")

SOURCE_TOPIC, QUEUES = "Orders", 4
TARGET_TOPIC = "OrdersEU"
GROUP = "demo-enrich"
TAGS = ["TagA", "TagB", "TagC", "TagD"]
REGIONS = ["EU", "US", "APAC"]
TAG_SELECTOR = "TagA || TagC"
SQL_SELECTOR = "region = 'EU' AND amount > 300"


# --- Spark ---------------------------------------------------------------------------------------------------

def spark_defaults(conf_dir: str = CONF_DIR) -> dict:
    """conf/spark-defaults.conf as a dict ("key value" lines), with the log4j2 file given by absolute path so the
    session's logging does not depend on the working directory (the driver's other JVM options as the file has them)."""
    conf = {}
    with open(os.path.join(conf_dir, "spark-defaults.conf"), encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                key, _, value = line.partition(" ")
                conf[key] = value.strip()
    log4j = os.path.join(conf_dir, "log4j2.properties")
    others = [o for o in conf.get("spark.driver.extraJavaOptions", "").split()
              if not o.startswith("-Dlog4j2.configurationFile=")]  # the file's other JVM options are kept
    conf["spark.driver.extraJavaOptions"] = " ".join([f"-Dlog4j2.configurationFile=file:{log4j}", *others])
    return conf


def spark_session(app_name: str = "rmq-spark-demo", conf: Optional[dict] = None):
    # Python workers must run this interpreter, or they fail with "Python worker failed to connect back".
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    for key, value in (spark_defaults() if conf is None else conf).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


# --- Data ----------------------------------------------------------------------------------------------------

class OrderGenerator:
    """Orders with tags, keys and properties; remembers how many match the demo's selectors."""

    def __init__(self, store: MessageStore, seed: int = 7):
        self.store, self.rng = store, random.Random(seed)
        self.produced = self.matching = 0
        self.next_id = 0

    def produce(self, n: int) -> None:
        bodies, tags, keys, props = [], [], [], []
        for _ in range(n):
            order, tag = f"order-{self.next_id:06d}", self.rng.choice(TAGS)
            region, amount = self.rng.choice(REGIONS), self.rng.randint(1, 1000)
            self.next_id += 1
            tags.append(tag)
            keys.append([order, f"customer-{self.rng.randint(1, 500)}"])
            props.append({"region": region, "amount": str(amount)})
            bodies.append(json.dumps({"id": order, "amount": amount, "region": region, "items": amount % 7 + 1}))
            self.matching += tag in ("TagA", "TagC") and region == "EU" and amount > 300
        self.store.put_batch(SOURCE_TOPIC, bodies, tags=tags, keys=keys, properties=props)
        self.produced += n


def pipeline(spark, store_dir: str, checkpoint: str, max_per_trigger: int):
    """Orders -> (tags, SQL92 pushed into the scan) -> enrich -> OrdersEU through the rmq sink."""
    from pyspark.sql import functions as F

    orders = (spark.readStream.format("rmq")
              .option("subscribe", SOURCE_TOPIC)
              .option("tags", TAG_SELECTOR)
              .option("sql", SQL_SELECTOR)
              .option("startingOffsets", "earliest")
              .option("maxMessagesPerTrigger", max_per_trigger)
              .option("consumerGroup", GROUP)
              .load(store_dir))
    order = F.from_json(F.col("body").cast("string"), "id string, amount int, region string, items int")
    enriched = (orders
                .withColumn("order", order)
                .withColumn("priority", F.when(F.col("order.amount") > 800, "High").otherwise("Normal"))
                .select(
                    F.col("priority").alias("tags"),
                    F.col("keys"),
                    F.to_json(F.struct(
                        F.col("order.id").alias("id"), F.col("order.amount").alias("amount"),
                        F.col("order.items").alias("items"),
                        F.round(F.col("order.amount") / F.col("order.items"), 2).alias("per_item"),
                        F.col("store_timestamp").alias("received"))).alias("body"),
                    F.map_concat(F.col("properties"), F.create_map(
                        F.lit("source_msg_id"), F.col("msg_id"),
                        F.lit("priority"), F.col("priority"))).alias("properties")))
    return (enriched.writeStream.format("rmq")
            .option("path", store_dir)
            .option("topic", TARGET_TOPIC)
            .option("checkpointLocation", checkpoint)
            .start())


# --- Progress ------------------------------------------------------------------------------------------------

def group_offsets(store_dir: str) -> dict:
    offsets = OffsetStore(store_dir, GROUP)
    return {q: offsets.read_offset((SOURCE_TOPIC, q), ReadOffsetType.READ_FROM_STORE) for q in range(QUEUES)}


def lags(store: MessageStore, store_dir: str) -> dict:
    """Per queue: max offset - the group's committed offset (everything, when nothing is committed yet)."""
    committed = group_offsets(store_dir)
    return {q: store.max_offset(SOURCE_TOPIC, q) - max(committed[q], 0) for q in range(QUEUES)}


def queue_total(store: MessageStore, topic: str) -> int:
    if topic not in store.topics():
        return 0
    return sum(store.max_offset(topic, q) - store.min_offset(topic, q) for q in store.queues(topic))


def offsets_read(progress: dict) -> int:
    """Queue offsets a batch covered (matching or not): end - start summed over queues."""
    src = progress["sources"][0]
    start, end = (_offset(src.get(key)) for key in ("startOffset", "endOffset"))
    return sum(o - start.get(SOURCE_TOPIC, {}).get(q, 0) for q, o in end.get(SOURCE_TOPIC, {}).items())


def _offset(value) -> dict:
    """A progress report's offset: JSON text, already parsed, or null before the first batch."""
    if isinstance(value, str):
        value = json.loads(value)
    return value if isinstance(value, dict) else {}


HEADER = (f"{'batch':>5}  {'offsets':>7}  {'rows':>6}  {'in rows/s':>9}  {'done rows/s':>11}  {'ms':>6}  "
          f"{'written':>7}  lag per queue (group {GROUP})")


def progress_line(p: dict, store: MessageStore, store_dir: str) -> str:
    lag = lags(store, store_dir)
    lag_text = " ".join(f"q{q}={n:<5}" for q, n in lag.items())
    return (f"{p['batchId']:>5}  {offsets_read(p):>7}  {p['numInputRows']:>6}  "
            f"{p.get('inputRowsPerSecond') or 0:>9.0f}  {p.get('processedRowsPerSecond') or 0:>11.0f}  "
            f"{p['durationMs'].get('triggerExecution', 0):>6}  {queue_total(store, TARGET_TOPIC):>7}  "
            f"{lag_text} total={sum(lag.values())}")


# --- Main ----------------------------------------------------------------------------------------------------

def main(argv=None) -> int:
    args = _arguments(argv)
    spark_conf = spark_defaults()  # every input checked before anything is written
    started = time.monotonic()
    store_dir, checkpoint = os.path.abspath(STORE_DIR), os.path.abspath(CHECKPOINT_DIR)
    for d in (store_dir, checkpoint):
        shutil.rmtree(d, ignore_errors=True)
    print("rmq-spark demo: Orders -> format(\"rmq\") stream (tags + SQL92 pushed down) -> enrich -> rmq sink "
          f"-> {TARGET_TOPIC}")
    print(f"store {store_dir}\nconf  {os.path.join(CONF_DIR, 'spark-defaults.conf')}, "
          f"{os.path.join(CONF_DIR, 'log4j2.properties')}\n", flush=True)

    # Small files, so the demo store rolls over like a real one does at 1 GiB.
    config = StoreConfig(mappedFileSizeCommitLog=1024 * 1024, mappedFileSizeConsumeQueue=20 * 4000)
    with MessageStore(store_dir, config) as store:
        store.create_topic(SOURCE_TOPIC, QUEUES)
        store.create_topic(TARGET_TOPIC, QUEUES)
        producer = OrderGenerator(store)
        # the orders are made while Spark's JVM starts (one waits on the other otherwise)
        loader = threading.Thread(target=producer.produce, args=(args.messages,), name="orders", daemon=True)
        loader.start()
        t0 = time.monotonic()
        spark = spark_session(conf=spark_conf)
        loader.join()
        print(f"Produced {producer.produced} messages into {SOURCE_TOPIC} ({QUEUES} queues); "
              f"{args.bursts} bursts of {args.burst_size} follow while the query runs", flush=True)
        spark.sparkContext.setLogLevel("WARN")
        print(f"Spark {spark.version} session {spark.sparkContext.master} started in {time.monotonic() - t0:.1f} s")
        print(f"Query: tags `{TAG_SELECTOR}`, sql `{SQL_SELECTOR}`, maxMessagesPerTrigger {args.max_per_trigger}, "
              f"checkpoint {checkpoint}\n", flush=True)
        batches, rows_in, elapsed, error, times = _run_query(spark, store, store_dir, checkpoint, producer, args)
        if error is not None:
            print(f"\nFAILED: {error}", file=sys.stderr)
            spark.stop()
            return 1
        counts = _count_output(spark, store_dir)
        spark.stop()
        final_lag = lags(store, store_dir)
        written = queue_total(store, TARGET_TOPIC)

    report = check_store(store_dir)
    expected = producer.matching
    duplicates, missing = counts["rows"] - counts["distinct"], expected - counts["distinct"]
    print(f"\nSummary ({time.monotonic() - started:.1f} s in all, query {elapsed:.1f} s)")
    print(f"  produced      {producer.produced} orders into {SOURCE_TOPIC}; {expected} match the selectors")
    print(f"  streamed      {rows_in} rows in {batches} microbatches; {_batch_times(times)}")
    print(f"  written       {written} messages into {TARGET_TOPIC} ({counts['high']} tagged High)")
    print(f"  exactly once  duplicates {duplicates}, missing {missing}")
    print(f"  group {GROUP}  lag " + " ".join(f"q{q}={n}" for q, n in final_lag.items()))
    print(f"  store         {report.summary()}")
    print(f"\nNext: .venv/bin/rmq -s {STORE_DIR} stat --group {GROUP}   ·   "
          f".venv/bin/rmq -s {STORE_DIR} consume --topic {TARGET_TOPIC} --tags High --max 3   ·   notebooks/")
    ok = report.ok and duplicates == 0 and missing == 0 and written == expected and sum(final_lag.values()) == 0
    return 0 if ok else 1


def _arguments(argv) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m rmq_spark.demo", description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--messages", type=int, default=20_000, help="orders in the store before the query starts")
    ap.add_argument("--bursts", type=int, default=6, help="bursts the producer adds while the query runs")
    ap.add_argument("--burst-size", type=int, default=2_500, help="orders per burst")
    ap.add_argument("--burst-every", type=float, default=0.5, help="seconds between bursts")
    ap.add_argument("--max-per-trigger", type=int, default=6_000, help="maxMessagesPerTrigger of the query")
    ap.add_argument("--timeout", type=float, default=150, help="give up when not caught up after this many s")
    return ap.parse_args(argv)


def _run_query(spark, store, store_dir: str, checkpoint: str, producer: "OrderGenerator", args):
    """Run the pipeline until the producer is done and the group has committed everything it produced (lag 0
    per queue), printing a line per microbatch. Returns (batches, rows in, seconds, error or None)."""
    def bursts():
        for _ in range(args.bursts):
            time.sleep(args.burst_every)
            producer.produce(args.burst_size)

    query = pipeline(spark, store_dir, checkpoint, args.max_per_trigger)
    query_started = time.monotonic()
    # The bursts start once the first batch is done (it also starts Spark's Python workers), so the lag
    # moves while the query runs.
    feeder = threading.Thread(target=bursts, name="producer", daemon=True)
    print(HEADER + "\n", end="", flush=True)
    printed: set = set()
    times: list[tuple[int, int]] = []  # (offsets read, ms) of each microbatch
    batches, rows_in, error = 0, 0, None
    deadline = time.monotonic() + args.timeout

    def print_new() -> None:
        nonlocal batches, rows_in
        for p in query.recentProgress:
            if p["batchId"] in printed or (p["numInputRows"] == 0 and offsets_read(p) == 0):
                continue
            printed.add(p["batchId"])
            batches += 1
            rows_in += p["numInputRows"]
            times.append((offsets_read(p), p["durationMs"].get("triggerExecution", 0)))
            print(progress_line(p, store, store_dir), flush=True)

    while True:
        time.sleep(0.25)
        if query.exception() is not None:
            error = query.exception()
            break
        print_new()
        if batches and feeder.ident is None:
            feeder.start()
        if feeder.ident is not None and not feeder.is_alive() and sum(lags(store, store_dir).values()) == 0:
            break
        if time.monotonic() > deadline:
            error = f"not caught up after {args.timeout:.0f} s"
            break
    query.stop()
    print_new()
    return batches, rows_in, time.monotonic() - query_started, error, times


def _batch_times(times: list[tuple[int, int]]) -> str:
    """What a microbatch costs: the first (it starts Spark's Python workers and compiles the query), the later
    ones' median and slowest, and the offsets a second they read (the query's pace is the producer's bursts)."""
    if not times:
        return "no microbatch"
    text = f"the first took {times[0][1] / 1000:.1f} s (it starts Spark's Python workers)"
    later = sorted(ms for _, ms in times[1:])
    if later:
        offsets, ms = sum(o for o, _ in times[1:]), sum(later)
        text += (f", the {len(later)} later ones {later[len(later) // 2]} ms median, {later[-1]} ms at most "
                 f"({offsets / max(ms, 1) * 1000:,.0f} offsets/s through the pipeline: read, enrich, write, commit)")
    return text


def _count_output(spark, store_dir: str):
    """A batch read of the output: rows, distinct source messages, rows tagged High."""
    from pyspark.sql import functions as F
    out = spark.read.format("rmq").option("topic", TARGET_TOPIC).load(store_dir)
    return out.agg(F.count("*").alias("rows"),
                   F.countDistinct(F.col("properties")["source_msg_id"]).alias("distinct"),
                   F.sum(F.when(F.col("tags") == "High", 1).otherwise(0)).alias("high")).first()


if __name__ == "__main__":
    sys.exit(main())
