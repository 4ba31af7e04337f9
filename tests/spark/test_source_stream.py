"""spark.readStream.format("rmq"): availableNow, rate limits, group commits per batch, restart exactly once,
filters, retention."""
import json
import time

import pytest
from chispa import assert_df_equality
from source_testkit import (
    expected_df,
    fill,
    get_message_rows,
    group_offsets,
    ordered,
    small_files_config,
)

from filters import MessageFilter
from store import MessageStore


def _stream(spark, path, **options):
    reader = spark.readStream.format("rmq")
    for k, v in options.items():
        reader = reader.option(k, str(v))
    return reader.load(str(path))


def _sources(query):
    out = []
    for p in query.recentProgress:
        if p["sources"]:
            src = dict(p["sources"][0])
            for k in ("startOffset", "endOffset", "latestOffset"):
                if isinstance(src.get(k), str):
                    src[k] = json.loads(src[k])
            out.append(src)
    return out


def test_available_now_per_batch_limits_and_group_commits(spark, tmp_path):
    """One availableNow run with maxMessagesPerTrigger: every batch within the limit, all queues advancing
    together; consumerOffset.json during batch k holds the end of batch k-1 and, when the run ends, its last
    end; the whole output equals get_message."""
    path = fill(tmp_path / "s", "T", n=30, queues=3)
    batches = []

    def on_batch(df, batch_id):
        batches.append((batch_id, [tuple(r) for r in df.collect()], group_offsets(path, "G")))

    q = (_stream(spark, path, topic="T", startingOffsets="earliest", maxMessagesPerTrigger=10, consumerGroup="G")
         .writeStream.foreachBatch(on_batch).option("checkpointLocation", str(tmp_path / "ck"))
         .trigger(availableNow=True).start())
    q.awaitTermination()
    sources = [s for s in _sources(q) if s["numInputRows"] > 0]
    assert [s["numInputRows"] for s in sources] == [10, 10, 10]
    ends = [s["endOffset"] for s in sources]
    assert sorted(ends[0]["T"].values()) == [3, 3, 4]  # 10 shared by equal backlogs
    data = [b for b in batches if b[1]]
    assert data[0][2] == {"T": {"0": 0, "1": 0, "2": 0}}   # the start, committed when batch 0 was planned
    assert [b[2] for b in data[1:]] == ends[:-1]              # batch k sees the end of batch k-1
    assert group_offsets(path, "G") == ends[-1] == {"T": {"0": 10, "1": 10, "2": 10}}
    got = spark.createDataFrame([r for b in data for r in b[1]], spark.read.format("rmq").option("topic", "T")
                                .load(path).schema)
    expected = expected_df(spark, [r for qid in range(3) for r in get_message_rows(path, "T", qid)])
    assert_df_equality(ordered(got), expected)


def test_restart_from_checkpoint_gives_every_message_exactly_once(spark, tmp_path):
    """Stop a running query after some batches, append, add a topic its pattern matches, restart from the
    checkpoint: the parquet output holds every message once."""
    path = fill(tmp_path / "s", "Orders", n=40, queues=2)
    out, ck = str(tmp_path / "out"), str(tmp_path / "ck")

    def start(trigger):
        return (_stream(spark, path, subscribePattern="Orders.*", startingOffsets="earliest",
                        maxMessagesPerTrigger=8)
                .select("topic", "queue_id", "queue_offset", "body")
                .writeStream.format("parquet").option("path", out).option("checkpointLocation", ck)
                .trigger(**trigger).start())

    q = start({"processingTime": "100 milliseconds"})
    deadline = time.time() + 120
    while len([p for p in q.recentProgress if p["numInputRows"] > 0]) < 2 and time.time() < deadline:
        time.sleep(0.1)
    q.stop()
    done_first = spark.read.parquet(out).count()
    assert 0 < done_first < 40
    fill(path, "Orders", n=10, queues=2, start=40)
    fill(path, "OrdersEU", n=6, queues=1)  # a new topic the pattern matches: read from its earliest
    q = start({"availableNow": True})
    q.awaitTermination()
    rows = spark.read.parquet(out).collect()
    keys = [(r.topic, r.queue_id, r.queue_offset) for r in rows]
    assert len(keys) == len(set(keys)) == 56
    assert sorted(r.body for r in rows if r.topic == "Orders") == sorted(f"body-Orders-{i}".encode()
                                                                         for i in range(50))


def test_a_checkpoint_names_a_directorys_queues_by_id_and_a_stream_restores_from_that_text(spark, tmp_path):
    """The offsets a store directory's stream checkpoints name its queues by queue id ({"T": {"0": 20}}), and a
    checkpoint whose last offsets are that text, written here, restores the stream exactly there."""
    path = fill(tmp_path / "s", "T", n=40, queues=2)
    ck = tmp_path / "ck"
    seen: list = []

    def run():
        (_stream(spark, path, topic="T", startingOffsets="earliest")
         .writeStream.foreachBatch(lambda df, _: seen.extend(
             (r.queue_id, r.queue_offset) for r in df.select("queue_id", "queue_offset").collect()))
         .option("checkpointLocation", str(ck)).trigger(availableNow=True).start().awaitTermination())

    run()
    assert len(seen) == 40
    offsets = ck / "offsets" / "0"
    head, last = offsets.read_text().rsplit("\n", 1)
    assert json.loads(last) == {"T": {"0": 20, "1": 20}}
    offsets.write_text(head + "\n" + '{"T": {"0": 5, "1": 7}}')  # batch 0 as done up to there
    for crc in (ck / "offsets").glob(".0.crc"):
        crc.unlink()  # the checksum of the text replaced
    fill(path, "T", n=4, queues=2, start=40)
    seen.clear()
    run()
    assert sorted(seen) == [(0, o) for o in range(5, 22)] + [(1, o) for o in range(7, 22)]
    assert json.loads((ck / "offsets" / "1").read_text().rsplit("\n", 1)[1]) == {"T": {"0": 22, "1": 22}}


@pytest.mark.parametrize("option,selector,build", [
    ("tags", "Aa", MessageFilter.by_tags),          # "BB" shares its hash code: must not be delivered
    ("sql", "TAGS IN ('BB', 'TagD') AND a BETWEEN 5 AND 30", MessageFilter.by_sql),
])
def test_filtered_stream_delivers_exactly_the_matching_messages(spark, tmp_path, option, selector, build):
    path = fill(tmp_path / "s", "T", n=40, queues=2)
    name = f"filtered_{option}"
    q = (_stream(spark, path, topic="T", startingOffsets="earliest", **{option: selector})
         .writeStream.format("memory").queryName(name).option("checkpointLocation", str(tmp_path / "ck"))
         .trigger(availableNow=True).start())
    q.awaitTermination()
    expected = [r for qid in range(2) for r in get_message_rows(path, "T", qid, message_filter=build(selector))]
    assert expected
    assert_df_equality(ordered(spark.table(name)), expected_df(spark, expected))
    # filtered-out offsets are progress, not data loss: the stream's end is the queues' end
    assert _sources(q)[-1]["endOffset"] == {"T": {"0": 20, "1": 20}}


@pytest.mark.parametrize("fail", [True, False])
def test_retention_under_a_running_query(spark, tmp_path, fail):
    """Retention deletes unread files between batch 0 and batch 1: failOnDataLoss=true stops the query with
    the topic, queue and offsets; false continues at the new minimum."""
    config = small_files_config()
    path = fill(tmp_path / "s", "T", n=80, queues=1, config=config)
    seen, mins = [], []

    def on_batch(df, batch_id):
        seen.extend(r.queue_offset for r in df.select("queue_offset").collect())
        if not mins:
            with MessageStore(path, config=config) as s:
                s.clean_expired(now=time.time() + 365 * 86400)
                mins.append(s.min_offset("T", 0))

    q = (_stream(spark, path, topic="T", startingOffsets="earliest", maxMessagesPerTrigger=5,
                 failOnDataLoss=str(fail).lower())
         .writeStream.foreachBatch(on_batch).option("checkpointLocation", str(tmp_path / "ck"))
         .trigger(availableNow=True).start())
    mn = None
    if fail:
        with pytest.raises(Exception) as e:
            q.awaitTermination()
        mn = mins[0]
        assert f"topic 'T' queue 0: wanted offset 5 but the earliest available is {mn}" in str(e.value)
        assert seen == [0, 1, 2, 3, 4]
    else:
        q.awaitTermination()
        mn = mins[0]
        assert seen == [0, 1, 2, 3, 4] + list(range(mn, 80))
    assert mn > 5


def test_data_loss_without_failing_is_logged_once_per_queue(tmp_path, caplog):
    """failOnDataLoss=false: the trigger that finds messages deleted before they were read logs it once per queue
    (latestOffset), and planning that batch does not log it again."""
    import logging

    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from rmq_spark.options import parse_options
    from rmq_spark.stream_reader import RmqStreamReader
    config = small_files_config()
    path = fill(tmp_path / "s", "T", n=80, queues=2, config=config)
    reader = RmqStreamReader(parse_options({"path": path, "topic": "T", "startingOffsets": "earliest",
                                            "failOnDataLoss": "false"}), None)
    start = reader.initialOffset()
    with MessageStore(path, config=config) as s:
        s.clean_expired(now=time.time() + 365 * 86400)
    with caplog.at_level(logging.WARNING, logger="rmq_spark"):
        end = reader.latestOffset(start, ReadAllAvailable())
        reader.partitions(start, end)
    lost = [r.getMessage() for r in caplog.records if "were deleted (retention) before they were read" in r.message]
    assert sorted(m.split(":")[0] for m in lost) == ["topic 'T' queue 0", "topic 'T' queue 1"]
    reader.stop()
