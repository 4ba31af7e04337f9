"""MessageLog.reads, what a reader of ranges (the Spark source) asks, on a store directory and on a real broker
(`rmq serve`, named broker-a): the same queues (QueueKeys in both), offsets, committed group offsets and messages
read back by a pickled range reader, each place naming its queues its own way (a queue id; brokerName:queueId)."""
from __future__ import annotations

import pickle
import socket

import pyarrow as pa
import pytest
from wire_cluster import WireCluster

from rmq_log import MessageLog, QueueKey, open_log
from rmq_log.reads import LogReads, RangeRuns, ReadSettings


class Refusal(Exception):
    """What the test's policy raises, naming the setting or the loss."""


class Policy:
    """A caller's policy: data loss fails when asked to, else is noted."""

    def __init__(self):
        self.noted: list[str] = []

    def report_data_loss(self, text, fail, instead, then):
        if fail:
            raise Refusal(f"lost: {text}")
        self.noted.append(text)

    def lost(self, text):
        return Refusal(f"lost: {text}")

    def setting_error(self, setting, text):
        return Refusal(f"{setting}: {text}")


class Columns:
    """A selection of columns as a caller gives it (rmq_spark.schema.Selection's two methods)."""

    def __init__(self, *columns: str):
        self.columns = columns

    def scan_columns(self, *needed: str) -> list:
        return list(dict.fromkeys((*self.columns, *needed)))

    def to_spark_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        return pa.RecordBatch.from_arrays([batch.column(c) for c in self.columns], names=list(self.columns))


# a store directory's queues carry the fixed STORE_BROKER_NAME, which is broker-a like `rmq serve`'s default
QUEUES = {kind: [QueueKey("broker-a", 0), QueueKey("broker-a", 1)] for kind in ("store", "cluster")}
NAMES = {"store": ["0", "1"], "cluster": ["broker-a:0", "broker-a:1"]}  # in offsets JSON and messages


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    root = tmp_path_factory.mktemp("reads")
    with WireCluster(root / "cluster", brokers=("broker-a",)) as cluster:
        logs = {"store": open_log(store=str(root / "store")), "cluster": open_log(namesrv=cluster.namesrv)}
        for log in logs.values():
            log.create_topic("R", 2, None)
            log.send("R", [b"a", b"b", b"c"], "TagA", "k1", None, None, (None, 1), lambda sent: None)
        yield logs


def _read(reader) -> list:
    return [(r["queue_offset"], r["body"]) for batch in reader.read() for r in batch.to_pylist()]


@pytest.mark.parametrize("kind", ["store", "cluster"])
def test_a_reader_sees_the_topics_queues_and_offsets_of_what_was_sent(logs, kind):
    log: MessageLog = logs[kind]
    with log.reads(ReadSettings("reads-g", Policy())) as reads:
        assert isinstance(reads, LogReads)
        q0, q1 = QUEUES[kind]
        assert [reads.queue_name(q0), reads.queue_name(q1)] == NAMES[kind]
        assert [reads.parse_queue(name) for name in NAMES[kind]] == [q0, q1]
        assert "R" in reads.topics() and reads.queues("R") == [q0, q1]
        assert reads.assigned("R", [1]) == [q1]
        assert reads.queue_bounds([("R", q0), ("R", q1)]) == {("R", q0): (0, 0), ("R", q1): (0, 3)}
        assert (reads.min_offset("R", q1), reads.max_offset("R", q1)) == (0, 3)
        tracker = reads.bounds_tracker([("R", q0), ("R", q1)])
        tracker.update()
        assert tracker.mins.tolist() == [0, 0] and tracker.maxs.tolist() == [0, 3]
        assert reads.offset_for_timestamp("R", q1, 0) == 0
        assert reads.keep_checkpointed({}) is False
        # a directory's topic table has a version; the brokers' routes have none (asked again each time)
        assert (reads.topics_version() is None) == (kind == "cluster")


@pytest.mark.parametrize("kind", ["store", "cluster"])
def test_a_range_reader_pickled_to_another_process_reads_its_messages_in_order(logs, kind):
    with logs[kind].reads(ReadSettings("reads-g", Policy())) as reads:
        q1 = QUEUES[kind][1]
        (reader,) = reads.range_readers([("R", q1, 1, 3)], None, None, None, Columns("queue_offset", "body"), True)
        assert reader.key() == ("R", 1 if kind == "store" else "broker-a:1", 1, 3)
        assert _read(pickle.loads(pickle.dumps(reader))) == [(1, b"b"), (2, b"c")]
        first, last = reads.range_readers([("R", q1, 0, 1), ("R", q1, 2, 3)], None, None, None,
                                          Columns("queue_offset", "body"), True)
        assert _read(RangeRuns([first, last])) == [(0, b"a"), (2, b"c")]


@pytest.mark.parametrize("kind", ["store", "cluster"])
def test_the_groups_committed_offsets_are_those_its_committer_wrote_and_the_commands_see_them(logs, kind):
    log: MessageLog = logs[kind]
    group = f"commit-{kind}"
    with log.reads(ReadSettings(group, Policy())) as reads:
        q0, q1 = QUEUES[kind]
        before = reads.committed_offsets([("R", q1)])[("R", q1)]
        # none in a directory; a broker answers a group without one with the queue's first offset when that is 0
        # (RocketMQ's ConsumerManageProcessor)
        assert (before is None or before < 0) if kind == "store" else before == 0
        committer = reads.committer()
        committer.commit({("R", q0): 0, ("R", q1): 2}, reads)
        assert not committer.pending
        assert reads.committed_offsets([("R", q0), ("R", q1)]) == {("R", q0): 0, ("R", q1): 2}
    assert {s.queue.queue_id: s.committed for s in log.queue_stats("R", group)} == {0: 0, 1: 2}


def test_a_store_refuses_to_commit_an_offset_past_a_queues_end_with_the_policys_error(logs):
    with logs["store"].reads(ReadSettings("past-g", Policy())) as reads:
        with pytest.raises(Refusal, match="lost: refusing to commit offset 9 of group 'past-g' for topic 'R' queue 1"):
            reads.committer().commit({("R", QUEUES["store"][1]): 9}, reads)


@pytest.mark.parametrize("kind", ["store", "cluster"])
def test_a_key_is_found_through_a_stores_index_and_a_cluster_has_none_to_ask(logs, kind):
    with logs[kind].reads(ReadSettings("reads-g", Policy())) as reads:
        q1 = QUEUES[kind][1]
        runs = reads.index_runs([("R", q1, 0, 3)], "k1", None, None)
        assert runs == ([("R", q1, 0, 3)] if kind == "store" else None)
        if kind == "store":
            assert reads.index_runs([("R", q1, 0, 3)], "no-such-key", None, None) == []


def test_the_place_is_chosen_once_from_a_path_or_name_servers(tmp_path, logs):
    store = logs["store"].where()["store"]
    with open_log(store=store, timeout_ms=1000).reads(ReadSettings("g", Policy())) as reads:
        assert reads.queue_name(QueueKey("broker-a", 3)) == "3" and reads.describe() == f"the store at {store}"
    namesrv = logs["cluster"].where()["namesrv"]
    with open_log(store="", namesrv=namesrv, timeout_ms=1000).reads(ReadSettings("g", Policy())) as reads:
        assert reads.queue_name(QueueKey("broker-a", 3)) == "broker-a:3"
        assert reads.describe() == f"the cluster of name server(s) {namesrv}"
        assert reads.queues("R") == QUEUES["cluster"]


def test_name_servers_that_refuse_the_first_lookup_are_the_policys_error_naming_them():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    with open_log(namesrv=f"127.0.0.1:{port}", timeout_ms=5000).reads(ReadSettings("g", Policy())) as reads:
        with pytest.raises(Refusal, match=rf"namesrv: no name server listens at 127.0.0.1:{port}"):
            reads.topics()


def test_each_place_refuses_a_queue_named_the_other_places_way_saying_how_it_names_them(logs):
    with logs["store"].reads(ReadSettings("g", Policy())) as reads:
        assert reads.describe_queues(QUEUES["store"]) == "0..1"
        with pytest.raises(ValueError, match=r"^broker-a:1 names a broker's queue; that needs namesrvAddr \(a store "
                                             r"directory's queues are plain ids\)$"):
            reads.parse_queue("broker-a:1")
    with logs["cluster"].reads(ReadSettings("g", Policy())) as reads:
        assert reads.describe_queues(QUEUES["cluster"]) == "broker-a:0, broker-a:1"
        with pytest.raises(ValueError, match=r'^over the wire, name a queue as brokerName:queueId \(e\.g\. '
                                             r'"broker-a:1"\), not 1$'):
            reads.parse_queue("1")
