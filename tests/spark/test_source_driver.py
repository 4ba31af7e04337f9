"""The driver-side and executor-side pieces of the source, run in-process (no Spark job): rate limits, starting
offsets, long polling, data loss, partition reads and their counters (a small microbatch's packing on a store
directory and through `rmq serve` alike), option parsing."""
import json
import threading
import time

import numpy as np
import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxBytes, ReadMaxRows, ReadMinRows
from read_places import PLACES, read_place
from source_testkit import fill, get_message_rows, group_offsets, small_files_config

from filters import MessageFilter
from rmq_log.reads import RangeReader, RangeRuns
from rmq_log.store_reads import StoreRange
from rmq_spark.errors import DataLossError
from rmq_spark.options import RmqOptionError, parse_options
from rmq_spark.partition import LogPartition, pack_small_ranges, split_ranges
from rmq_spark.rate_limit import split_by_backlog
from rmq_spark.read_policy import POLICY
from rmq_spark.schema import ARROW_SCHEMA, FULL, SCHEMA
from rmq_spark.source import RmqDataSource
from rmq_spark.stream_reader import RmqStreamReader
from store import MessageStore


def stream_reader(path, **options) -> RmqStreamReader:
    opts = {"path": str(path), "topic": "T"}
    opts.update({k: str(v) for k, v in options.items()})
    opts = {k: v for k, v in opts.items() if v != "None"}
    return RmqDataSource(opts).streamReader(SCHEMA)


def ranges_of(parts) -> list:
    """The queue ranges of a plan, those packed into one partition included."""
    return [r for p in parts for r in (p.reader.ranges if isinstance(p.reader, RangeRuns) else [p])]


# -- rate limits ---------------------------------------------------------------------------------------------


def test_split_by_backlog_is_proportional_with_at_least_one_each():
    assert split_by_backlog(np.array([100, 100, 0]), 10).tolist() == [5, 5, 0]
    assert split_by_backlog(np.array([900, 90, 10]), 100).tolist() == [90, 9, 1]
    assert split_by_backlog(np.array([1000, 1, 1]), 10).tolist() == [8, 1, 1]
    assert split_by_backlog(np.array([3, 2]), 100).tolist() == [3, 2]
    assert split_by_backlog(np.array([50, 50, 50]), 2).tolist() == [1, 1, 1]  # at least one each wins
    take = split_by_backlog(np.array([7, 13, 29, 1]), 20)
    assert take.sum() == 20 and (take >= 1).all() and (take <= [7, 13, 29, 1]).all()


def test_latest_offset_honours_max_messages_and_readallavailable(tmp_path):
    fill(tmp_path / "s", "T", n=30, queues=3)
    r = stream_reader(tmp_path / "s", startingOffsets="earliest", maxMessagesPerTrigger=10)
    assert r.getDefaultReadLimit() == ReadMaxRows(10)
    start = r.initialOffset()
    assert start == {"T": {"0": 0, "1": 0, "2": 0}}
    end = r.latestOffset(start, r.getDefaultReadLimit())
    assert sum(end["T"].values()) == 10 and all(v >= 3 for v in end["T"].values())
    assert r.latestOffset(start, ReadAllAvailable()) == {"T": {"0": 10, "1": 10, "2": 10}}


def test_a_stream_continues_from_offsets_named_as_its_checkpoint_names_a_directorys_queues(tmp_path):
    fill(tmp_path / "s", "T", n=40, queues=2)
    r = stream_reader(tmp_path / "s", startingOffsets="earliest")
    start = json.loads('{"T": {"0": 5, "1": 7}}')  # a checkpoint's text: queues by id
    end = r.latestOffset(start, ReadAllAvailable())
    assert json.dumps(end) == '{"T": {"0": 20, "1": 20}}'
    assert sorted((p.topic, p.queue_id, p.start, p.end) for p in ranges_of(r.partitions(start, end))) == [
        ("T", 0, 5, 20), ("T", 1, 7, 20)]
    r.stop()


def test_max_bytes_per_trigger_uses_record_sizes(tmp_path):
    path = fill(tmp_path / "s", "T", n=20, queues=1)
    with MessageStore(path, read_only=True) as s:
        size = int(s.consume_queue("T", 0).units(0, 1)["size"][0])
    r = stream_reader(path, startingOffsets="earliest", maxBytesPerTrigger=size * 5 + 1)
    assert r.getDefaultReadLimit() == ReadMaxBytes(size * 5 + 1)
    assert r.latestOffset({"T": {"0": 0}}, r.getDefaultReadLimit()) == {"T": {"0": 5}}
    r = stream_reader(path, startingOffsets="earliest", maxBytesPerTrigger=1)
    assert r.latestOffset({"T": {"0": 0}}, r.getDefaultReadLimit()) == {"T": {"0": 1}}  # never stuck


def test_min_messages_waits_until_max_trigger_delay(tmp_path):
    path = fill(tmp_path / "s", "T", n=3, queues=1)
    r = stream_reader(path, startingOffsets="earliest", minMessagesPerTrigger=5, maxTriggerDelay="300ms")
    limit = r.getDefaultReadLimit()
    assert limit == ReadMinRows(5)
    start = {"T": {"0": 0}}
    r._last_trigger_ms = time.time() * 1000  # a batch just ran
    assert r.latestOffset(start, limit) == start  # 3 < 5: no batch yet
    time.sleep(0.35)
    assert r.latestOffset(start, limit) == {"T": {"0": 3}}  # the delay has passed
    fill(path, "T", n=5, queues=1, start=3)
    assert r.latestOffset({"T": {"0": 3}}, limit) == {"T": {"0": 8}}  # enough now


def test_available_now_target_is_fixed_at_start(tmp_path):
    path = fill(tmp_path / "s", "T", n=10, queues=2)
    r = stream_reader(path, startingOffsets="earliest", maxMessagesPerTrigger=4)
    r.prepareForTriggerAvailableNow()
    fill(path, "T", n=10, queues=2, start=10)  # arrives after the query started: not part of this run
    offset, ends = r.initialOffset(), []
    while True:
        nxt = r.latestOffset(offset, r.getDefaultReadLimit())
        if nxt == offset:
            break
        ends.append(nxt)
        offset = nxt
    assert ends[-1] == {"T": {"0": 5, "1": 5}} and len(ends) == 3


def test_default_start_is_latest_for_streams_and_group_resumes(tmp_path):
    path = fill(tmp_path / "s", "T", n=10, queues=2)
    assert stream_reader(path).initialOffset() == {"T": {"0": 5, "1": 5}}
    r = stream_reader(path, startingOffsets="earliest", consumerGroup="G1")
    r.commit({"T": {"0": 3, "1": 4}})
    assert group_offsets(path, "G1") == {"T": {"0": 3, "1": 4}}
    assert stream_reader(path, startingOffsets="group", consumerGroup="G1").initialOffset() == \
        {"T": {"0": 3, "1": 4}}
    # a group with no offsets starts at earliest
    assert stream_reader(path, startingOffsets="group", consumerGroup="G2").initialOffset() == \
        {"T": {"0": 0, "1": 0}}


def test_latest_offset_commits_its_start(tmp_path):
    path = fill(tmp_path / "s", "T", n=4, queues=1)
    r = stream_reader(path, startingOffsets="earliest", consumerGroup="G")
    r.latestOffset({"T": {"0": 4}}, ReadAllAvailable())  # Spark's last call of an availableNow run
    assert group_offsets(path, "G") == {"T": {"0": 4}}


def test_read_only_stores_commit_nothing_unless_asked(tmp_path):
    path = fill(tmp_path / "s", "T", n=4, queues=1)
    stream_reader(path, consumerGroup="G", readOnly="true").commit({"T": {"0": 4}})
    assert group_offsets(path, "G") == {}
    stream_reader(path, consumerGroup="G", readOnly="true", commitOffsets="true").commit({"T": {"0": 4}})
    assert group_offsets(path, "G") == {"T": {"0": 4}}


def test_poll_timeout_returns_as_soon_as_a_message_arrives(tmp_path):
    path = fill(tmp_path / "s", "T", n=2, queues=1)
    r = stream_reader(path, startingOffsets="latest", pollTimeoutMs=5000)
    start = r.initialOffset()
    threading.Timer(0.3, lambda: fill(path, "T", n=1, queues=1, start=2)).start()
    t0 = time.monotonic()
    end = r.latestOffset(start, ReadAllAvailable())
    waited = time.monotonic() - t0
    assert end == {"T": {"0": 3}}
    assert 0.25 < waited < 3
    r2 = stream_reader(path, startingOffsets="latest", pollTimeoutMs=200)
    t0 = time.monotonic()
    assert r2.latestOffset(r2.initialOffset(), ReadAllAvailable()) == {"T": {"0": 3}}
    assert time.monotonic() - t0 >= 0.2


# -- data loss (retention) -------------------------------------------------------------------------------


def _expire(path):
    with MessageStore(path, config=small_files_config()) as s:
        s.clean_expired(now=time.time() + 365 * 86400)
        return s.min_offset("T", 0)


def test_data_loss_fails_or_skips_ahead(tmp_path):
    path = fill(tmp_path / "s", "T", n=60, queues=1, config=small_files_config())
    mn = _expire(path)
    assert 0 < mn < 60
    r = stream_reader(path, startingOffsets="earliest")
    with pytest.raises(DataLossError, match=rf"topic 'T' queue 0: wanted offset 0 but the earliest available is {mn}"):
        r.latestOffset({"T": {"0": 0}}, ReadAllAvailable())
    lenient = stream_reader(path, failOnDataLoss="false")
    assert lenient.latestOffset({"T": {"0": 0}}, ReadAllAvailable()) == {"T": {"0": 60}}
    parts = lenient.partitions({"T": {"0": 0}}, {"T": {"0": 60}})
    assert [(p.start, p.end) for p in parts] == [(mn, 60)]
    # executors check again (retention may run between planning and reading)
    with pytest.raises(DataLossError):
        list(StoreRange(path, "T", 0, 0, 60, FULL, POLICY, fail_on_data_loss=True).read())


# -- executor side -----------------------------------------------------------------------------------------


def test_read_partition_yields_spark_arrow_batches_and_prunes_by_tag_code(tmp_path):
    path = fill(tmp_path / "s", "T", n=50, queues=1)
    metrics = tmp_path / "metrics"
    p = StoreRange(path, "T", 0, 0, 50, FULL, POLICY, MessageFilter.by_tags("Aa"), metrics_path=str(metrics))
    batches = list(p.read())
    assert all(b.schema.equals(ARROW_SCHEMA) for b in batches)
    rows = [r for b in batches for r in b.to_pylist()]
    assert [r["tags"] for r in rows] == ["Aa"] * 10
    assert [r["queue_offset"] for r in rows] == [r[2] for r in get_message_rows(path, "T", 0, message_filter=
                                                                                  MessageFilter.by_tags("Aa"))]
    (line,) = [json.loads(x) for f in metrics.iterdir() for x in f.read_text().splitlines()]
    assert line["consume_queue_units_scanned"] == 50
    assert line["commit_log_records_read"] == 20  # "Aa" and its hash twin "BB"; the other 30 never read
    assert line["rows"] == 10


def test_min_partitions_splits_keep_queue_order():
    ranges = split_ranges([("T", 0, 0, 100), ("T", 1, 10, 20)], 5)
    assert len(ranges) >= 5
    for q in (0, 1):
        pieces = [(s, e) for t, qid, s, e in ranges if qid == q]
        assert pieces[0][0] == (0 if q == 0 else 10) and pieces[-1][1] == (100 if q == 0 else 20)
        assert all(a[1] == b[0] for a, b in zip(pieces, pieces[1:]))


class _Range(RangeReader):
    def __init__(self, queue_id, start, end):
        self.topic, self.queue_id, self.start, self.end = "T", queue_id, start, end

    def key(self) -> tuple:
        return "T", self.queue_id, self.start, self.end

    def read(self):
        return iter(())


def test_small_ranges_are_packed_into_partitions_of_at_least_min_offsets_in_plan_order():
    parts = [LogPartition(_Range(q, 0, n)) for q, n in enumerate([1500, 1500, 1500, 1500, 9000, 100])]
    packed = pack_small_ranges(parts, 8192)
    assert packed[0] is parts[4]  # as large as the bound: a partition of its own
    (runs,) = packed[1:]
    assert isinstance(runs.reader, RangeRuns) and runs.reader.ranges == [parts[i].reader for i in (0, 1, 2, 3, 5)]
    assert runs.value == tuple(parts[i].value for i in (0, 1, 2, 3, 5))
    eight = [LogPartition(_Range(q, 0, 1500)) for q in range(8)] + [LogPartition(_Range(8, 0, 4500))]  # 16,500
    halves = pack_small_ranges(eight, 8192)  # offsets: two shares
    assert [[r.queue_id for r in p.reader.ranges] for p in halves] == [[0, 1, 2, 3, 4, 5], [6, 7, 8]]
    assert pack_small_ranges(parts, 0) == parts  # minOffsetsPerPartition=0: one partition per range
    assert pack_small_ranges(parts[:1] + parts[4:5], 8192) == parts[:1] + parts[4:5]  # nothing to pack with


@pytest.mark.parametrize("place", PLACES)
def test_a_small_microbatch_is_one_partition_with_the_rows_of_the_unpacked_plan(tmp_path, place):
    path = fill(tmp_path / "s", "T", n=400, queues=4)
    metrics = tmp_path / "metrics"  # a store directory's scan counters
    counted = {"metricsPath": str(metrics)} if place == "directory" else {}
    queues = list(range(4)) if place == "directory" else [f"broker-a:{q}" for q in range(4)]

    with read_place(place, path) as where:
        def plan(**options):
            ds = RmqDataSource({**where, "topic": "T", "startingOffsets": "earliest", "maxMessagesPerTrigger": "300",
                                "commitOffsets": "false", **counted, **options})
            r = ds.streamReader(SCHEMA)
            start = r.initialOffset()
            return r, r.partitions(start, r.latestOffset(start, r.getDefaultReadLimit()))

        reader, parts = plan()
        assert len(parts) == 1 and isinstance(parts[0].reader, RangeRuns)
        assert [r.key()[1:] for r in parts[0].reader.ranges] == [(q, 0, 75) for q in queues]
        rows = [row for b in reader.read(parts[0]) for row in b.to_pylist()]
        per_queue = {"logOrder": "false"} if place == "directory" else {}  # not windows of the log across queues
        unpacked_reader, unpacked = plan(minOffsetsPerPartition="0", **per_queue)
        assert [p.key()[1:] for p in unpacked] == [(q, 0, 75) for q in queues]
        assert rows == [row for p in unpacked for b in unpacked_reader.read(p) for row in b.to_pylist()]
        assert len(rows) == 300
        _, split = plan(minPartitions="8")  # a count of partitions asked for is kept
        assert len(split) >= 8 and not any(isinstance(p.reader, RangeRuns) for p in split)
    if place == "directory":  # each range of the packed partition is read and counted as its own partition would be
        lines = [json.loads(x) for f in metrics.iterdir() for x in f.read_text().splitlines()]
        assert sorted((m["queue_id"], m["rows"]) for m in lines) == sorted([(q, 75) for q in range(4)] * 2)


# -- options ---------------------------------------------------------------------------------------------------


@pytest.fixture
def store_path(tmp_path):
    return fill(tmp_path / "s", "T", n=4, queues=2)


@pytest.mark.parametrize("options,option,fragment", [
    ({"path": "/nonexistent/store"}, "path", "does not exist"),
    ({"_nopath": True, "topic": "T"}, "path", "required"),
    ({"topic": "T", "subscribePattern": "T.*"}, "subscribePattern", "exactly one"),
    ({}, "subscribe", "say which queues"),
    ({"subscribe": "Nope"}, "subscribe", "unknown topic 'Nope'"),
    ({"assign": '{"T": [0, 7]}'}, "assign", "queue 7 does not exist"),
    ({"assign": "{T: [0]}"}, "assign", "malformed JSON"),
    ({"topic": "T", "startingOffsets": '{"T": {"0": 1'}, "startingOffsets", "JSON"),
    ({"topic": "T", "startingOffsets": '{"T": {"5": 1}}'}, "startingOffsets", "queue 5 does not exist"),
    ({"topic": "T", "endingOffsets": '{"T": {"9": 1}}'}, "endingOffsets",
     "topic 'T' has queues 0..1; queue 9 does not exist"),
    ({"topic": "T", "startingOffsets": '{"T": {"broker-a:0": 1}}'}, "startingOffsets",
     "topic 'T': broker-a:0 names a broker's queue; that needs namesrvAddr (a store directory's queues are plain "
     "ids)"),
    ({"topic": "T", "startingOffsetsByTimestamp": '{"T": {"broker-a:1": 1}}'}, "startingOffsetsByTimestamp",
     "topic 'T': broker-a:1 names a broker's queue"),
    ({"topic": "T", "startingOffsets": "newest"}, "startingOffsets", "earliest | latest | group"),
    ({"topic": "T", "endingOffsets": '{"T": {"0": -2}}'}, "endingOffsets", ">= -1"),
    ({"topic": "T", "sql": "a = 1 b"}, "sql", "^"),
    ({"topic": "T", "expressionType": "SQL92", "subExpression": "a >"}, "subExpression", "invalid selector"),
    ({"topic": "T", "expressionType": "REGEX", "subExpression": "x"}, "expressionType", "TAG or SQL92"),
    ({"topic": "T", "maxMessagesPerTriger": "5"}, "maxMessagesPerTriger", "did you mean 'maxMessagesPerTrigger'"),
    ({"topic": "T", "maxMessagesPerTrigger": "0"}, "maxMessagesPerTrigger", ">= 1"),
    ({"topic": "T", "failOnDataLoss": "maybe"}, "failOnDataLoss", "true or false"),
    ({"topic": "T", "maxTriggerDelay": "5 parsecs", "minMessagesPerTrigger": "2"}, "maxTriggerDelay", "duration"),
    ({"topic": "T", "consumerGroup": "a/b"}, "consumerGroup", "must match"),
    ({"subscribePattern": "(["}, "subscribePattern", "regular expression"),
])
def test_bad_options_name_the_option(store_path, options, option, fragment):
    opts = dict(options)
    if not opts.pop("_nopath", False):
        opts.setdefault("path", store_path)
    with pytest.raises(RmqOptionError) as e:
        RmqDataSource(opts).reader(SCHEMA)
    assert str(e.value).startswith(f"option '{option}'")
    assert fragment in str(e.value)


def test_sub_expression_alone_is_a_tag_expression_as_rocketmq_subscribe_takes_it(store_path):
    alone = parse_options({"path": store_path, "topic": "T", "subExpression": "Aa || TagC"})
    assert (alone.tags, alone.sql) == ("Aa || TagC", None)
    with pytest.raises(RmqOptionError, match="option 'subExpression'.* same as 'tags'"):
        parse_options({"path": store_path, "topic": "T", "subExpression": "Aa", "tags": "TagC"})


def test_default_consumer_group_is_stable_and_depends_on_the_subscription(store_path):
    a = parse_options({"path": store_path, "topic": "T"}).consumer_group
    assert a == parse_options({"path": store_path, "subscribe": "T"}).consumer_group
    assert a.startswith("rmq-spark-") and len(a) == len("rmq-spark-") + 12
    assert a != parse_options({"path": store_path, "topic": "T", "tags": "Aa"}).consumer_group
    assert parse_options({"path": store_path, "topic": "T", "consumerGroup": "mine"}).consumer_group == "mine"


def test_patterns_skip_rocketmq_system_topics(tmp_path):
    path = fill(tmp_path / "s", "Orders", n=2, queues=1)
    fill(path, "RMQ_SYS_SINK_COMMIT", n=1, queues=1)
    fill(path, "SCHEDULE_TOPIC_XXXX", n=1, queues=1)
    r = stream_reader(path, topic=None, subscribePattern=".*", startingOffsets="earliest")
    assert r.initialOffset() == {"Orders": {"0": 0}}
    named = stream_reader(path, topic="RMQ_SYS_SINK_COMMIT", startingOffsets="earliest")
    assert named.initialOffset() == {"RMQ_SYS_SINK_COMMIT": {"0": 0}}


# -- many queues: what a trigger keeps between calls --------------------------------------------------------


def _other_process(code: str, path) -> None:
    import subprocess
    import sys
    root = str(__import__("pathlib").Path(__file__).resolve().parents[2])
    subprocess.run([sys.executable, "-c", "import sys; from store import MessageStore\n" + code, str(path)],
                   check=True, env={**__import__("os").environ, "PYTHONPATH": root}, timeout=120)


def test_pattern_stream_picks_up_topics_and_queues_another_process_creates(tmp_path):
    """The subscribed queue list is kept between triggers while the topic table stays: a topic another process
    creates still reaches the next trigger, in to_offset_dict's key order; commits write what moved."""
    path = fill(tmp_path / "s", "P-a", n=4, queues=2)
    r = stream_reader(path, topic=None, subscribePattern="P-.*", startingOffsets="earliest", consumerGroup="G")
    start = r.initialOffset()
    end = r.latestOffset(start, ReadAllAvailable())
    assert end == {"P-a": {"0": 2, "1": 2}}
    assert r.latestOffset(end, ReadAllAvailable()) is end  # nothing new: the same dict back
    _other_process("with MessageStore(sys.argv[1]) as s:\n    s.create_topic('P-0', 3)\n"
                   "    s.put_batch('P-0', [b'x'] * 3, queue_id=[0, 1, 2])", path)
    nxt = r.latestOffset(end, ReadAllAvailable())
    assert nxt == {"P-0": {"0": 1, "1": 1, "2": 1}, "P-a": {"0": 2, "1": 2}}
    assert list(nxt) == ["P-0", "P-a"]  # sorted in, as to_offset_dict orders it
    assert {(p.topic, p.queue_id, p.start, p.end) for p in ranges_of(r.partitions(end, nxt))} == \
        {("P-0", q, 0, 1) for q in range(3)}
    fill(path, "P-a", n=2, queues=2, start=4)
    given = json.loads(json.dumps(nxt))  # Spark's JSON round trip
    again = r.latestOffset(given, ReadAllAvailable())
    assert again == {"P-0": {"0": 1, "1": 1, "2": 1}, "P-a": {"0": 3, "1": 3}}
    assert again["P-0"] is given["P-0"]  # an unchanged topic's dict is shared, not rebuilt
    assert nxt == {"P-0": {"0": 1, "1": 1, "2": 1}, "P-a": {"0": 2, "1": 2}}  # the dict returned before is kept
    r.commit(again)
    assert group_offsets(path, "G") == {"P-0": {"0": 1, "1": 1, "2": 1}, "P-a": {"0": 3, "1": 3}}
    fill(path, "P-0", n=3, queues=3, start=3)
    last = r.latestOffset(again, ReadAllAvailable())
    r.commit(last)  # only P-0's queues moved
    assert group_offsets(path, "G") == {"P-0": {"0": 2, "1": 2, "2": 2}, "P-a": {"0": 3, "1": 3}}
    r.stop()


def test_offsets_of_queues_no_longer_subscribed_are_carried_and_read_nowhere(tmp_path):
    """A checkpoint naming a topic the subscription does not match (any more) keeps its entry unchanged."""
    path = fill(tmp_path / "s", "T", n=4, queues=2)
    fill(path, "Old", n=2, queues=1)
    r = stream_reader(path, startingOffsets="earliest")
    start = {"Old": {"0": 1}, "T": {"0": 0, "1": 0}}
    end = r.latestOffset(start, ReadAllAvailable())
    assert end == {"Old": {"0": 1}, "T": {"0": 2, "1": 2}}
    assert {(p.topic, p.queue_id, p.start, p.end) for p in ranges_of(r.partitions(start, end))} == \
        {("T", 0, 0, 2), ("T", 1, 0, 2)}
    assert r.reportLatestOffset() == {"T": {"0": 2, "1": 2}}
