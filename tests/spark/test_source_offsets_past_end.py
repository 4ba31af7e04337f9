"""Offsets past a queue's end (Kafka's rule): batch reads refuse them naming the queue and its range; streams
refuse them unless failOnDataLoss=false, which starts at the end; no group offset is committed past the end."""
import pytest
from source_testkit import fill

from rmq_log import QueueKey
from rmq_log.queue_key import STORE_BROKER_NAME
from rmq_log.store_reads import OffsetCommitter
from rmq_spark.errors import DataLossError
from rmq_spark.read_policy import POLICY
from store import MessageStore, OffsetStore


@pytest.fixture
def path(tmp_path):
    return fill(tmp_path / "s", "T", n=10, queues=1)


def _batch(spark, path, **options):
    r = spark.read.format("rmq").option("topic", "T")
    for k, v in options.items():
        r = r.option(k, v)
    return r.load(path)


@pytest.mark.parametrize("options, message", [
    ({"startingOffsets": '{"T": {"0": 100000}}'},
     "option 'startingOffsets': topic 'T' queue 0: offset 100000 is past the end of the queue, which holds "
     "offsets 0..9 (the next message gets 10)"),
    ({"endingOffsets": '{"T": {"0": 11}}'}, "option 'endingOffsets': topic 'T' queue 0: offset 11 is past the end"),
    ({"startingOffsets": '{"T": {"0": 5}}', "endingOffsets": '{"T": {"0": 3}}'},
     "option 'endingOffsets': topic 'T' queue 0: ending offset 3 is below the starting offset 5"),
])
def test_batch_reads_refuse_offsets_past_the_end(spark, path, options, message):
    with pytest.raises(Exception) as e:
        _batch(spark, path, **options).collect()
    assert message in str(e.value)


def test_batch_reads_at_the_end_are_empty_not_errors(spark, path):
    assert _batch(spark, path, startingOffsets='{"T": {"0": 10}}').count() == 0
    assert _batch(spark, path, startingOffsets='{"T": {"0": 4}}', endingOffsets='{"T": {"0": 4}}').count() == 0


def _stream(spark, path, tmp_path, rows=None, **options):
    r = spark.readStream.format("rmq").option("topic", "T").option("consumerGroup", "g")
    for k, v in options.items():
        r = r.option(k, v)
    sink = rows if rows is not None else []
    q = (r.load(path).writeStream
         .foreachBatch(lambda df, _: sink.extend(x.queue_offset for x in df.select("queue_offset").collect()))
         .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    return q


def test_a_stream_refuses_a_start_past_the_end(spark, path, tmp_path):
    q = _stream(spark, path, tmp_path, startingOffsets='{"T": {"0": 100000}}')
    with pytest.raises(Exception) as e:
        q.awaitTermination()
    assert "offset 100000 is past the end of the queue" in str(e.value) and "failOnDataLoss=false" in str(e.value)
    assert OffsetStore(path, "g").read_offset(("T", 0)) in (None, -1)


def test_a_lenient_stream_starts_at_the_end_and_reads_what_comes_later(spark, path, tmp_path):
    rows = []
    _stream(spark, path, tmp_path, rows, startingOffsets='{"T": {"0": 100000}}', failOnDataLoss="false") \
        .awaitTermination()
    assert rows == []
    assert OffsetStore(path, "g").read_offset(("T", 0)) in (None, -1, 10)  # never past the end
    fill(path, "T", n=20, queues=1, start=10)
    _stream(spark, path, tmp_path, rows, startingOffsets='{"T": {"0": 100000}}', failOnDataLoss="false") \
        .awaitTermination()
    assert sorted(rows) == list(range(10, 30))
    assert OffsetStore(path, "g").read_offset(("T", 0)) == 30


def _queue(queue_id: int) -> QueueKey:
    """A store directory's queue as the readers (and their committer) hold it."""
    return QueueKey(STORE_BROKER_NAME, queue_id)


def test_a_group_offset_past_the_end_is_never_committed(path):
    with pytest.raises(DataLossError, match="refusing to commit offset 100000 of group 'g' for topic 'T' queue 0"):
        OffsetCommitter(path, "g", POLICY).commit({("T", _queue(0)): 100000})
    with MessageStore(path, read_only=True):
        assert OffsetStore(path, "g").read_offset(("T", 0)) in (None, -1)


def test_an_offset_past_an_empty_queue_is_refused_as_past_a_non_empty_one(tmp_path):
    path = str(tmp_path / "e")
    with MessageStore(path) as s:
        s.create_topic("E", 2)
        s.put("E", b"a", queue_id=1)
    with pytest.raises(DataLossError, match="offset 99999 of group 'g' for topic 'E' queue 0: the queue ends at 0"):
        OffsetCommitter(path, "g", POLICY).commit({("E", _queue(0)): 99999})
    with pytest.raises(DataLossError, match="offset 99999 of group 'g' for topic 'E' queue 1: the queue ends at 1"):
        OffsetCommitter(path, "g", POLICY).commit({("E", _queue(1)): 99999})
    OffsetCommitter(path, "g", POLICY).commit({("E", _queue(0)): 0, ("E", _queue(1)): 1})
    assert OffsetStore(path, "g").read_offset(("E", 0)) == 0
