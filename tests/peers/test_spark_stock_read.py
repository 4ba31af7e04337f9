"""format("rmq") reading stock Apache RocketMQ brokers (one stock name server, two stock brokers, each fetched
version) with the stock brokers' default pull caps (32 messages / 256 KiB a pull): batch reads with tags, sql or
both return exactly the rows a stock Java push consumer with the same selector receives, every column equal; a
stream with consumerGroup leaves the group at the queue ends for the stock admin, and startingOffsets=group starts
where a stock Java consumer of the group stopped."""
from __future__ import annotations

import pytest
from rmq_reads import read_rmq
from stock_data import differences, expected_rows, message, messages, spark_rows
from stock_peers import STOCK_5
from wire_cluster import wait_until

TOPIC = "SparkRead"
N = 1000


def _tag(i: int):
    return "abc"[i % 3] if i % 10 != 9 else None


# (Spark options, the stock consumer's selector for the same messages, how many match)
SELECTORS = {
    "all": ({}, ("tag", "*"), N),
    "tags": ({"tags": "a || b"}, ("tag", "a || b"), sum(_tag(i) in ("a", "b") for i in range(N))),
    "sql": ({"sql": "n < 600 AND color = 'red'"}, ("sql", "n < 600 AND color = 'red'"),
            sum(i < 600 and i % 4 == 0 for i in range(N))),
    "both": ({"tags": "a || b", "sql": "n < 600"}, ("sql", "(TAGS = 'a' OR TAGS = 'b') AND n < 600"),
             sum(i < 600 and _tag(i) in ("a", "b") for i in range(N))),
}


@pytest.fixture(scope="module")
def loaded(stock_cluster, stock_java):
    """The topic on both stock brokers (2 queues each), N messages sent by the stock producer (singles, one
    compressed, then batches), and what stock push consumers with each selector received."""
    stock_java.create_topic(TOPIC, 2)
    stock_java.produce(messages(TOPIC, 0, N))
    specs = [(f"oracle-{name}", sel, expr, count) for name, (_, (sel, expr), count) in SELECTORS.items()]
    got = stock_java.consume_many(TOPIC, specs, timeout=120)
    return {name: got[f"oracle-{name}"] for name in SELECTORS}


def _read(spark, cluster, **options):
    return read_rmq(spark, namesrv=cluster.namesrv, topic=TOPIC, **options)


@pytest.mark.parametrize("name", list(SELECTORS))
def test_a_batch_read_equals_what_a_stock_consumer_with_the_same_selector_receives(spark, stock_cluster, loaded,
                                                                                   name):
    options, _, count = SELECTORS[name]
    want = expected_rows(loaded[name])
    assert len(want) == count, f"the stock consumer received {len(want)} of {count}"
    got = spark_rows(_read(spark, stock_cluster, **options))
    assert differences(got, want) == []
    if name == "all":  # the producer compressed the big single send; the row holds it as the consumer saw it
        assert any(len(r["body"]) > 4096 for r in got.values())
        assert {r["store_host"] for r in got.values()} == set(stock_cluster.addresses.values())


def test_a_stream_leaves_its_group_at_the_queue_ends_and_group_offsets_resume_a_stock_consumer(
        spark, stock_cluster, stock_java, loaded, tmp_path):
    def stream(group, checkpoint, starting):
        q = (spark.readStream.format("rmq").option("namesrvAddr", stock_cluster.namesrv).option("topic", TOPIC)
             .option("consumerGroup", group).option("startingOffsets", starting)
             .option("maxMessagesPerTrigger", "400").load()
             .writeStream.format("parquet").option("path", str(tmp_path / checkpoint / "out"))
             .option("checkpointLocation", str(tmp_path / checkpoint / "cp")).trigger(availableNow=True).start())
        q.awaitTermination(300)
        assert q.exception() is None
        return {bytes(r.body) for r in spark.read.parquet(str(tmp_path / checkpoint / "out")).collect()}

    assert len(stream("spark-stream", "s1", "earliest")) == N
    stats = stock_java.consume_stats("spark-stream")
    assert {(s["broker"], s["queueId"]) for s in stats} == {(b, q) for b in stock_cluster.addresses for q in (0, 1)}
    assert sum(s["brokerOffset"] for s in stats) == N
    assert [s["consumerOffset"] for s in stats] == [s["brokerOffset"] for s in stats], "lag left"

    # a stock consumer of a group reads everything there is and stops; then more arrives: the group's stream
    # starts where the stock consumer stopped
    assert len(stock_java.consume(TOPIC, N, "java-then-spark")) == N
    # the helper commits the consumer's offsets with an answer awaited before it shuts down (shutdown's own commit
    # is oneway): the group is at the queue ends before more arrives
    def committed() -> bool:
        stats = stock_java.consume_stats("java-then-spark", TOPIC)
        return len(stats) == 4 and all(s["consumerOffset"] == s["brokerOffset"] for s in stats)
    wait_until(committed, 30, "the stock consumer's offsets at the queue ends on the brokers")
    stock_java.produce(messages(TOPIC, N, 200, singles=0))
    new = stream("java-then-spark", "s2", "group")
    assert new == {f"message {i} ".encode() + b"x" * (i % 50) for i in range(N, N + 200)}


# 5.x only: a 4.9.x broker's SIGKILL mid-stream is tested by test_stock_failover.py (a master killed, read on from
# its slave, then restarted).
@pytest.mark.stock_versions(STOCK_5)
def test_a_stock_broker_sigkilled_and_restarted_mid_stream_gives_every_message_once(
        spark, stock_cluster, stock_java, tmp_path):
    topic = "SparkKill"
    stock_java.create_topic(topic, 2)

    def send(start, n, broker=None):
        msgs = [{**m, "queue": {"broker": broker, "id": 0}} if broker else m
                for m in (message(topic, i) for i in range(start, start + n))]
        stock_java.produce([{"batch": msgs[k:k + 50]} for k in range(0, n, 50)] if not broker else msgs)
        return {f"message {i} ".encode() + b"x" * (i % 50) for i in range(start, start + n)}

    sent = send(0, 400)
    out = str(tmp_path / "out")
    q = (spark.readStream.format("rmq").option("namesrvAddr", stock_cluster.namesrv).option("topic", topic)
         .option("startingOffsets", "earliest").option("brokerTimeoutMs", "240000")
         .option("maxMessagesPerTrigger", "100").load()
         .writeStream.format("parquet").option("path", out)
         .option("checkpointLocation", str(tmp_path / "cp")).trigger(processingTime="500 milliseconds").start())
    try:
        wait_until(lambda: q.lastProgress is not None and q.lastProgress["numInputRows"] > 0, 180, "first batch")
        stock_cluster.kill("broker-b")
        sent |= send(400, 20, "broker-a")
        stock_cluster.start("broker-b")
        sent |= send(420, 20, "broker-b")
        wait_until(lambda: spark.read.parquet(out).count() >= len(sent), 240, "every message")
        assert q.exception() is None
    finally:
        q.stop()
        stock_cluster.ensure_running("broker-b")
    bodies = [bytes(r.body) for r in spark.read.parquet(out).collect()]
    assert len(bodies) == len(set(bodies)), "duplicates"
    assert set(bodies) == sent, "lost"
