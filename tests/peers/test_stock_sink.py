"""Spark writes to stock Apache RocketMQ brokers (a name server and two brokers of each stock version).

Both guarantees: every row arrives once at a stock Java push consumer with its tags, keys and properties.
exactly_once (the default) sends a half message per row, as RocketMQ's TransactionMQProducer does: a stock broker
refuses a transactional batch (MESSAGE_ILLEGAL, checked here against the real broker). Nothing of a write is
visible to a stock consumer before its commit, and no half is left undecided after it."""
from __future__ import annotations

import asyncio
import base64

import pyarrow as pa
import pyspark.sql.functions as F
import pytest
from stock_transactions import half_count, undecided_halves
from wire_cluster import wait_until

from rmq_client import MessageQueue, MQClientAPI, MQClientError
from rmq_client.message_batch import encode_message_batch, properties_text
from rmq_client.transaction_producer import AsyncTransactionProducer

ROWS = 300


@pytest.fixture(scope="module")
def topics(stock_java):
    stock_java.create_topic("SparkOut,Refused,ExactlyOnce,Failing", 2)  # on both brokers: 4 write queues each
    return stock_java


def _stored(namesrv: str, topic: str) -> tuple[int, int]:
    """(the topic's queues on the stock brokers, the messages they hold): GET_MAX_OFFSET of each."""
    async def count() -> tuple[int, int]:
        api = MQClientAPI(namesrv)
        try:
            queues = await api.queues(topic)
            return len(queues), sum([await api.max_offset(q) for q in queues])
        finally:
            await api.close()
    return asyncio.run(count())


def _rows(spark, n):
    return spark.range(n).select(
        F.format_string("row-%d", "id").alias("body"),
        F.when(F.col("id") % 3 == 0, "TagA").otherwise("TagB").alias("tags"),
        F.array(F.format_string("k%d", "id"), F.lit("all")).alias("keys"),
        F.create_map(F.lit("n"), F.col("id").cast("string"), F.lit("text"), F.lit("a b=c")).alias("properties"))


def _check_columns(got: list[dict]) -> None:
    assert len(got) == ROWS
    assert {m["broker"] for m in got} == {"broker-a", "broker-b"}  # spread over both brokers' queues
    seen = sorted((m["bodyBase64"], m["tags"], m["keys"], m["properties"]["n"], m["properties"]["text"])
                  for m in got)
    want = sorted((base64.b64encode(f"row-{i}".encode()).decode(), "TagA" if i % 3 == 0 else "TagB",
                   f"k{i} all", str(i), "a b=c") for i in range(ROWS))
    assert seen == want


def test_at_least_once_rows_arrive_at_a_stock_consumer_with_their_columns(spark, stock_cluster, topics):
    (_rows(spark, ROWS).write.format("rmq").option("namesrvAddr", stock_cluster.namesrv)
     .option("topic", "SparkOut").option("deliveryGuarantee", "at_least_once").mode("append").save())
    _check_columns(topics.consume("SparkOut", ROWS, "spark-out-check", timeout=90))


def test_the_default_exactly_once_write_lands_every_row_once_and_ends_every_half(spark, stock_cluster, topics):
    """df.write with no delivery option: a half message per row, committed by the driver once the job's tasks are
    done; a stock consumer gets every row once, and every half the write sent is ended on both brokers."""
    _rows(spark, ROWS).write.format("rmq").option("namesrvAddr", stock_cluster.namesrv) \
        .option("topic", "ExactlyOnce").mode("append").save()
    assert _stored(stock_cluster.namesrv, "ExactlyOnce") == (4, ROWS)
    _check_columns(topics.consume("ExactlyOnce", ROWS, "exactly-once-check", timeout=90))
    for name in ("broker-a", "broker-b"):
        assert half_count(stock_cluster.store(name)) >= ROWS // 4  # a half per row, spread over both brokers
        wait_until(lambda: undecided_halves(stock_cluster.store(name)) == {}, 30, f"every half ended on {name}")


def test_a_failed_exactly_once_write_leaves_nothing_visible(spark, stock_cluster, topics):
    """A job whose tasks sent their halves fails before the commit (a row that fails inside a later task, every
    attempt): its halves are rolled back (the failed attempts' by the tasks, the rest by the job's abort), and a
    stock consumer sees nothing of it."""
    def boom(rows):
        for r in rows:
            if r.body == "row-250":
                raise ValueError("the row that fails the job")
            yield r
    df = _rows(spark, ROWS).repartition(3)
    failing = spark.createDataFrame(df.rdd.mapPartitions(boom), df.schema)
    with pytest.raises(Exception, match="the row that fails the job"):
        failing.write.format("rmq").option("namesrvAddr", stock_cluster.namesrv).option("topic", "Failing") \
            .mode("append").save()
    assert _stored(stock_cluster.namesrv, "Failing") == (4, 0)
    wait_until(lambda: all(undecided_halves(stock_cluster.store(n)) == {} for n in ("broker-a", "broker-b")),
               60, "every half of the failed write rolled back")
    assert _stored(stock_cluster.namesrv, "Failing") == (4, 0)


def test_a_stock_broker_refuses_transactional_half_batches(stock_cluster, topics):
    """Why exactly_once sends a stock broker a half per row: it answers a SEND_BATCH_MESSAGE with the prepared flag
    MESSAGE_ILLEGAL (CommitLog.asyncPutMessages refuses a transactional batch) and stores nothing."""
    async def send() -> None:
        producer = AsyncTransactionProducer(stock_cluster.namesrv, "half-probe")
        try:
            body = encode_message_batch(pa.array([b"h1", b"h2"]), properties_text(
                pa.array([None, None], pa.map_(pa.string(), pa.string())), 2,
                {"TRAN_MSG": "true", "PGROUP": "half-probe"}))
            await producer.send_halves(MessageQueue("Refused", "broker-a", 0), body, 2, "probe")
        finally:
            await producer.api.close()
    with pytest.raises(MQClientError) as e:
        asyncio.run(send())
    assert e.value.code == 13  # MESSAGE_ILLEGAL
    assert _stored(stock_cluster.namesrv, "Refused") == (4, 0)
