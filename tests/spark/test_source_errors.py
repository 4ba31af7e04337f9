"""Bad input fails when the query starts, through Spark, with a message naming the option."""
import pytest

from source_testkit import fill


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


@pytest.mark.parametrize("options,message", [
    ({"topic": "T", "maxMessagesPerTriger": "5"}, "did you mean 'maxMessagesPerTrigger'"),
    ({"topic": "T", "sql": "a = 'x"}, "option 'sql': invalid selector"),
    ({"topic": "T", "endingOffsets": "latest"}, "option 'endingOffsets': only for batch reads"),
])
def test_stream_fails_when_it_starts_before_any_batch(spark, path, tmp_path, options, message):
    reader = spark.readStream.format("rmq")
    for k, v in options.items():
        reader = reader.option(k, v)
    q = (reader.load(path).writeStream.format("memory").queryName("never")
         .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    with pytest.raises(Exception) as e:
        q.awaitTermination()
    assert message in str(e.value)
    assert q.recentProgress == []  # no batch ran
