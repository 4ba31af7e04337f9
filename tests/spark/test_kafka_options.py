"""What a Kafka user writes: Kafka's option names that mean the same here are read as ours, Kafka options with no
counterpart are refused saying what to use, endingTimestamp / endingOffsetsByTimestamp end batch reads, and a bad
option stops .load() naming the option in its documented spelling (through Spark's wrapping)."""
from __future__ import annotations

import logging
import time

import pytest
from pyspark.errors import AnalysisException
from store_fill import fill_store

from rmq_spark.errors import RmqOptionError
from rmq_spark.options import parse_options
from store import MessageStore


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "s"
    fill_store(path, 12, body=b"a%d", queues=2, queue_id=lambda i: i % 2)
    (path / ".rmq-spark").touch()
    return str(path)


def test_kafka_names_are_read_as_ours_with_a_log_line(store, caplog):
    with caplog.at_level(logging.INFO, logger="rmq_spark.options"):
        # Spark hands option names over lower-cased
        opts = parse_options({"path": store, "topic": "T", "maxoffsetspertrigger": "5", "minoffsetspertrigger": "2",
                              "kafka.group.id": "billing"})
    assert (opts.max_messages_per_trigger, opts.min_messages_per_trigger, opts.consumer_group) == (5, 2, "billing")
    assert "option 'maxOffsetsPerTrigger' (Kafka's name) is read as 'maxMessagesPerTrigger'" in caplog.text
    with pytest.raises(RmqOptionError, match="option 'maxOffsetsPerTrigger': Kafka's name for "
                                             "'maxMessagesPerTrigger', which is given too"):
        parse_options({"path": store, "topic": "T", "maxoffsetspertrigger": "5", "maxmessagespertrigger": "6"})


@pytest.mark.parametrize("option, hint", [
    ("kafka.bootstrap.servers", "give a store directory with .load(path), or RocketMQ name servers"),
    ("includeHeaders", "in the 'properties' column unless includeProperties is false"),
    ("groupIdPrefix", "consumerGroup"),
])
def test_kafka_only_options_are_refused_saying_what_to_use(store, option, hint):
    with pytest.raises(RmqOptionError) as e:
        parse_options({"path": store, "topic": "T", option.lower(): "x"})
    assert str(e.value).startswith(f"option '{option}': a Kafka source option with no rmq counterpart")
    assert hint in str(e.value)


def test_ending_timestamps_end_a_batch_read_before_the_first_message_at_the_time(spark, tmp_path):
    path = tmp_path / "s"
    with MessageStore(path) as s:
        s.create_topic("T", 2)
        s.put_batch("T", [b"early0", b"early1"], queue_id=[0, 1])
        time.sleep(0.05)
        cut = int(time.time() * 1000)
        time.sleep(0.05)
        s.put_batch("T", [b"late0", b"late1"], queue_id=[0, 1])
    (path / ".rmq-spark").touch()

    def bodies(**options):
        reader = spark.read.format("rmq").option("topic", "T")
        for k, v in options.items():
            reader = reader.option(k, v)
        return sorted(r.body.decode() for r in reader.load(str(path)).select("body").collect())
    assert bodies(endingTimestamp=str(cut)) == ["early0", "early1"]
    assert bodies(endingTimestamp=str(cut), endingOffsets='{"T": {"0": 2, "1": 2}}') == ["early0", "early1"]
    assert bodies(endingOffsetsByTimestamp=f'{{"T": {{"0": {cut}}}}}') == ["early0", "early1", "late1"]
    assert bodies(endingTimestamp="0") == []
    assert bodies(endingTimestamp=str(cut + 60_000)) == ["early0", "early1", "late0", "late1"]
    with pytest.raises(Exception, match="option 'endingTimestamp': only for batch reads"):
        spark.readStream.format("rmq").option("topic", "T").option("endingTimestamp", str(cut)) \
            .load(str(path)).writeStream.format("noop").option("checkpointLocation", str(tmp_path / "ck")) \
            .start().processAllAvailable()


def test_a_bad_stream_option_stops_load_naming_it(spark, store):
    with pytest.raises(AnalysisException) as e:
        spark.readStream.format("rmq").option("topic", "T").option("maxMessagesPerTrigger", "-5").load(store)
    assert "RmqOptionError: option 'maxMessagesPerTrigger'" in str(e.value)
    with pytest.raises(AnalysisException) as e:
        spark.readStream.format("rmq").option("topic", "T").option("kafka.bootstrap.servers", "h:9092").load(store)
    assert "option 'kafka.bootstrap.servers': a Kafka source option with no rmq counterpart" in str(e.value)


def test_a_stream_reads_with_kafkas_rate_limit_name(spark, store, tmp_path):
    df = spark.readStream.format("rmq").option("topic", "T").option("startingOffsets", "earliest") \
        .option("maxOffsetsPerTrigger", "4").load(store)
    sizes = []
    query = df.writeStream.trigger(availableNow=True).option("checkpointLocation", str(tmp_path / "ck")) \
        .foreachBatch(lambda batch, _: sizes.append(batch.count())).start()
    query.awaitTermination(120)
    assert sum(sizes) == 12 and max(sizes) <= 4
