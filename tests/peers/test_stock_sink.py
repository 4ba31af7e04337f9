"""Spark writes to stock Apache RocketMQ brokers (a name server and two brokers of each stock version).

at_least_once: every row arrives at a stock Java push consumer with its tags, keys and properties. exactly_once:
the sink's transactional half batches are refused by a stock broker (MESSAGE_ILLEGAL, checked here against the real
broker), so the sink refuses the query when it starts, naming deliveryGuarantee, before anything is sent."""
from __future__ import annotations

import asyncio
import base64

import pyarrow as pa
import pyspark.sql.functions as F
import pytest

from rmq_client import MessageQueue, MQClientAPI, MQClientError
from rmq_client.message_batch import encode_message_batch, properties_text
from rmq_client.transaction_producer import AsyncTransactionProducer

ROWS = 300


@pytest.fixture(scope="module")
def topics(stock_java):
    for topic in ("SparkOut", "Refused"):
        stock_java.create_topic(topic, 2)  # on both brokers: 4 write queues
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


def test_at_least_once_rows_arrive_at_a_stock_consumer_with_their_columns(spark, stock_cluster, topics):
    (_rows(spark, ROWS).write.format("rmq").option("namesrvAddr", stock_cluster.namesrv)
     .option("topic", "SparkOut").option("deliveryGuarantee", "at_least_once").mode("append").save())
    got = topics.consume("SparkOut", ROWS, "spark-out-check", timeout=90)
    assert len(got) == ROWS
    assert {m["broker"] for m in got} == {"broker-a", "broker-b"}  # spread over both brokers' queues
    seen = sorted((m["bodyBase64"], m["tags"], m["keys"], m["properties"]["n"], m["properties"]["text"])
                  for m in got)
    want = sorted((base64.b64encode(f"row-{i}".encode()).decode(), "TagA" if i % 3 == 0 else "TagB",
                   f"k{i} all", str(i), "a b=c") for i in range(ROWS))
    assert seen == want


def test_a_stock_broker_refuses_transactional_half_batches(stock_cluster, topics):
    """Why exactly_once is refused: a stock broker answers a SEND_BATCH_MESSAGE with the prepared flag
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


def test_exactly_once_is_refused_at_the_start_naming_delivery_guarantee(spark, stock_cluster, topics, tmp_path):
    df = _rows(spark, 10)
    with pytest.raises(Exception, match="deliveryGuarantee") as e:
        df.write.format("rmq").option("namesrvAddr", stock_cluster.namesrv).option("topic", "Refused") \
            .mode("append").save()
    assert "Apache RocketMQ" in str(e.value) and "at_least_once" in str(e.value)
    stream = spark.readStream.format("rate").option("rowsPerSecond", 5).load() \
        .select(F.col("value").cast("string").alias("body"))
    with pytest.raises(Exception, match="deliveryGuarantee"):
        q = stream.writeStream.format("rmq").option("namesrvAddr", stock_cluster.namesrv) \
            .option("topic", "Refused").option("checkpointLocation", str(tmp_path / "ckpt")).start()
        try:
            q.awaitTermination(60)
        finally:
            q.stop()
    assert _stored(stock_cluster.namesrv, "Refused") == (4, 0)  # nothing was sent
