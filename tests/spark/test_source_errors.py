"""Bad input fails when the query starts, through Spark, with a message naming the option."""
import os

import pytest
from source_testkit import fill
from store_fill import fill_store


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    return fill(tmp_path_factory.mktemp("errors") / "s", "T", n=4, queues=2)


@pytest.mark.parametrize("options,message", [
    ({"subscribe": "Missing"}, "option 'subscribe': unknown topic 'Missing'"),
    ({"topic": "T", "assign": '{"T": [0]}'}, "option 'assign': give exactly one of"),
    ({"topic": "T", "startingOffsets": '{"T": {"0": }'}, "option 'startingOffsets': '{\"T\": {\"0\": }' is not"),
    ({"assign": '{"T": [9]}'}, "queue 9 does not exist"),
])
def test_batch_read_fails_at_planning(spark, path, options, message):
    reader = spark.read.format("rmq")
    for k, v in options.items():
        reader = reader.option(k, v)
    with pytest.raises(Exception) as e:
        reader.load(path).collect()
    assert message in str(e.value)


def test_missing_path(spark):
    with pytest.raises(Exception, match="option 'path'"):
        spark.read.format("rmq").option("topic", "T").load().collect()


@pytest.mark.parametrize("options,message,at", [
    ({"topic": "T", "maxMessagesPerTriger": "5"}, "did you mean 'maxMessagesPerTrigger'", "load"),
    ({"topic": "T", "sql": "a = 'x"}, "option 'sql': invalid selector", "load"),
    ({"topic": "T", "endingOffsets": "latest"}, "option 'endingOffsets': only for batch reads", "start"),
    ({"subscribe": "Missing"}, "option 'subscribe': unknown topic 'Missing'", "start"),
])
def test_a_stream_with_a_bad_option_fails_before_any_batch(spark, path, tmp_path, options, message, at):
    """Option errors stop .load(); what only a stream refuses stops it when it starts, before any batch, with the
    option's error as the last line (not an error of pyspark's streaming source runner after it)."""
    reader = spark.readStream.format("rmq")
    for k, v in options.items():
        reader = reader.option(k, v)
    if at == "load":
        with pytest.raises(Exception) as e:
            reader.load(path)
        assert message in str(e.value)
        return
    q = (reader.load(path).writeStream.format("memory").queryName("never")
         .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    with pytest.raises(Exception) as e:
        q.awaitTermination()
    # the Python traceback's last line (the JVM's stack follows its SQLSTATE)
    last = str(e.value).split(" SQLSTATE:")[0].strip().splitlines()[-1]
    assert last.startswith("rmq_spark.errors.RmqOptionError: ") and message in last, str(e.value)
    assert q.recentProgress == []  # no batch ran


@pytest.mark.parametrize("fail", [True, False])
def test_a_missing_commitlog_file_is_data_loss(spark, tmp_path, fail):
    from store import MessageStore, StoreConfig
    with MessageStore(tmp_path / "s", StoreConfig(mappedFileSizeCommitLog=64 * 1024)) as s:
        fill_store(s, 1000, body=b"%04d" + b"x" * 200, queue_id=lambda i: i % 4)
        gone = [s.queue_offset_at("T", q, 131072) for q in range(4)], \
            [s.queue_offset_at("T", q, 196608) for q in range(4)]
    (tmp_path / "s" / "commitlog" / f"{131072:020d}").unlink()
    df = spark.read.format("rmq").option("topic", "T").option("failOnDataLoss", str(fail).lower()) \
        .load(str(tmp_path / "s"))
    if fail:
        with pytest.raises(Exception) as e:
            df.count()
        assert f"missing file {tmp_path}/s/commitlog/{131072:020d}" in str(e.value)
        assert "failOnDataLoss=false" in str(e.value)
    else:
        rows = df.select("queue_id", "queue_offset").collect()
        lost = sum(hi - lo for lo, hi in zip(*gone))
        assert len(rows) == 1000 - lost and 0 < lost < 1000
        assert not any(lo <= r.queue_offset < hi for r in rows for lo, hi in [(gone[0][r.queue_id],
                                                                                gone[1][r.queue_id])])


def test_a_consumer_group_with_a_trailing_newline_is_refused(spark, path):
    with pytest.raises(Exception, match="option 'consumerGroup'"):
        spark.read.format("rmq").option("topic", "T").option("consumerGroup", "g\n").load(path).collect()


def test_a_corrupt_topics_file_is_named(spark, tmp_path):
    p = fill(tmp_path / "s", "T", n=4, queues=1)
    for name in ("topics.json", "topics.json.bak"):
        (tmp_path / "s" / "config" / name).write_text("garbage{")
    with pytest.raises(Exception) as e:
        spark.read.format("rmq").option("topic", "T").load(p).collect()
    assert f"{p}/config/topics.json is not JSON" in str(e.value) and "rediscovered from consumequeue/" in str(e.value)


def test_a_short_consume_queue_file_fails_the_read_naming_it(spark, tmp_path):
    from store import StoreConfig
    fill_store(tmp_path / "s", 300, body=b"x", config=StoreConfig(mappedFileSizeConsumeQueue=2000))
    short = tmp_path / "s" / "consumequeue" / "T" / "0" / f"{2000:020d}"
    os.truncate(short, 1010)
    with pytest.raises(Exception) as e:
        spark.read.format("rmq").option("topic", "T").load(str(tmp_path / "s")).count()
    assert f"{short}" in str(e.value) and "shorter than mappedFileSizeConsumeQueue" in str(e.value)
