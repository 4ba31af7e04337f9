"""A broker that stops while Spark reads through the cluster: the group's offsets are a report (a failed commit is
logged once and sent again, never the end of the query), the stream goes on with the other brokers and keeps the
stopped broker's queues, and fails after brokerTimeoutMs naming the broker if it stays away."""
from __future__ import annotations

import logging
import signal

import pytest
from wire_cluster import WireCluster, wait_until

from rmq_client import MessageQueue, Producer, PullConsumer
from rmq_log import QueueKey
from rmq_spark.read_policy import POLICY
from rmq_spark.schema import FULL

BROKERS = ("broker-a", "broker-b")


def _send(namesrv: str, topic: str, broker: str, base: int, n: int = 20, create: bool = False) -> set:
    bodies = [f"{broker}/{base + i}".encode() for i in range(n)]
    with Producer(namesrv) as p:
        if create:
            p.create_topic(topic, 1)
        wait_until(lambda: p.send_batch(topic, bodies, queue=MessageQueue(topic, broker, 0)) is not None, 30,
                   f"a send to {broker}")
    return set(bodies)


def _group_offsets(namesrv: str, group: str, topic: str) -> dict:
    with PullConsumer(namesrv, group) as pc:
        return {mq.key(): pc.query_offset(mq) for mq in pc.queues(topic)}


def test_a_commit_to_a_stopped_broker_is_logged_once_with_its_lag_and_sent_when_it_is_back(tmp_path, caplog):
    from rmq_log.cluster_reads import ClusterOffsetCommitter, ClusterReads
    from rmq_log.reads import ReadSettings

    caplog.set_level(logging.WARNING, logger="rmq_log.cluster_reads")
    with WireCluster(tmp_path, brokers=BROKERS) as c:
        for b in BROKERS:
            _send(c.namesrv, "Rep", b, 0, create=True)
        store = ClusterReads(c.namesrv, None, 1500, ReadSettings("rep-g", POLICY))
        qa, qb = ("Rep", QueueKey("broker-a", 0)), ("Rep", QueueKey("broker-b", 0))
        committer = ClusterOffsetCommitter("rep-g")
        committer.commit({qa: 5, qb: 5}, store)
        c.kill("broker-b", signal.SIGTERM)
        committer.commit({qa: 10, qb: 12}, store)  # no exception: the query goes on
        committer.commit({qa: 15, qb: 18}, store)
        failed = [r.getMessage() for r in caplog.records if "failed" in r.getMessage()]
        assert len(failed) == 1, failed  # once per broker and failure spell
        assert "broker 'broker-b'" in failed[0] and "7 message(s) behind the query" in failed[0]
        assert _group_offsets(c.namesrv, "rep-g", "Rep")["broker-a:0"] == 15
        c.start("broker-b")
        committer.commit({qa: 16, qb: 18}, store)
        assert any("work again" in r.getMessage() for r in caplog.records)
        assert _group_offsets(c.namesrv, "rep-g", "Rep") == {"broker-a:0": 16, "broker-b:0": 18}


def _stream(spark, c, tmp_path, timeout_ms: int):
    return (spark.readStream.format("rmq").option("namesrvAddr", c.namesrv).option("topic", "Away")
            .option("startingOffsets", "earliest").option("consumerGroup", "away-g")
            .option("brokerTimeoutMs", str(timeout_ms)).load()
            .writeStream.format("parquet").option("path", str(tmp_path / "out"))
            .option("checkpointLocation", str(tmp_path / "cp")).trigger(processingTime="200 milliseconds").start())


def _bodies(spark, tmp_path) -> list:
    return [r.body for r in spark.read.parquet(str(tmp_path / "out")).collect()]


def test_a_stream_goes_on_while_a_broker_is_stopped_and_its_output_is_complete_when_it_returns(spark, tmp_path):
    with WireCluster(tmp_path / "c", brokers=BROKERS) as c:
        sent = _send(c.namesrv, "Away", "broker-a", 0, create=True) | _send(c.namesrv, "Away", "broker-b", 0)
        q = _stream(spark, c, tmp_path, 60_000)
        try:
            wait_until(lambda: set(_bodies(spark, tmp_path)) == sent, 240, "the first messages")
            c.kill("broker-b", signal.SIGTERM)
            more = _send(c.namesrv, "Away", "broker-a", 100)
            sent |= more
            # broker-a's messages are read, and its offsets committed, while broker-b is away
            wait_until(lambda: more <= set(_bodies(spark, tmp_path)), 30, "broker-a's messages with broker-b away")
            wait_until(lambda: _group_offsets(c.namesrv, "away-g", "Away")["broker-a:0"] == 40, 30,
                       "broker-a's group offset")
            assert q.exception() is None
            c.start("broker-b")
            sent |= _send(c.namesrv, "Away", "broker-b", 200)
            wait_until(lambda: len(_bodies(spark, tmp_path)) >= len(sent), 60, "every message")
            wait_until(lambda: _group_offsets(c.namesrv, "away-g", "Away") == {"broker-a:0": 40, "broker-b:0": 40},
                       30, "both group offsets")
            assert q.exception() is None
        finally:
            q.stop()
        bodies = _bodies(spark, tmp_path)
        assert len(bodies) == len(set(bodies)), "duplicates"
        assert set(bodies) == sent, "lost"


def _fails_naming_broker_b(q) -> None:
    try:
        with pytest.raises(Exception, match=r"broker 'broker-b'.*brokerTimeoutMs=4000"):
            q.awaitTermination(60)
            raise AssertionError("the query did not stop")
    finally:
        q.stop()


def test_a_stream_whose_broker_stays_away_fails_naming_it_after_broker_timeout_also_when_restarted(spark, tmp_path):
    with WireCluster(tmp_path / "c", brokers=BROKERS) as c:
        sent = _send(c.namesrv, "Away", "broker-a", 0, create=True) | _send(c.namesrv, "Away", "broker-b", 0)
        q = _stream(spark, c, tmp_path, 4000)
        try:
            wait_until(lambda: set(_bodies(spark, tmp_path)) == sent, 240, "the first messages")
        except BaseException:
            q.stop()
            raise
        c.kill("broker-b", signal.SIGTERM)
        _fails_naming_broker_b(q)
        # restarted from its checkpoint while broker-b is still out of the route: the checkpoint's broker-b queue
        # is waited for as in a running query, never carried along unread
        sent |= _send(c.namesrv, "Away", "broker-a", 100)
        _fails_naming_broker_b(_stream(spark, c, tmp_path, 4000))
        c.start("broker-b")
        sent |= _send(c.namesrv, "Away", "broker-b", 200)
        q = _stream(spark, c, tmp_path, 4000)
        try:
            wait_until(lambda: len(_bodies(spark, tmp_path)) >= len(sent), 120, "every message")
            assert q.exception() is None
        finally:
            q.stop()
        bodies = _bodies(spark, tmp_path)
        assert len(bodies) == len(set(bodies)), "duplicates"
        assert set(bodies) == sent, "lost"


def test_a_batch_read_says_which_brokers_the_route_lists(tmp_path, caplog):
    from rmq_spark.batch_reader import RmqBatchReader
    from rmq_spark.options import parse_options

    caplog.set_level(logging.WARNING, logger="rmq_log.cluster_reads")
    with WireCluster(tmp_path, brokers=BROKERS) as c:
        for b in BROKERS:
            _send(c.namesrv, "Half", b, 0, create=True)
        c.kill("broker-b", signal.SIGTERM)
        reader = RmqBatchReader(parse_options({"namesrvAddr": c.namesrv, "topic": "Half"}), None)
        wait_until(lambda: len(reader.partitions()) == 1, 40, "broker-b out of the route")
        said = caplog.records[-1].getMessage()
        assert "broker-a (1 queue(s))" in said and "broker-b" not in said and "stopped broker" in said


def test_retries_are_logged_compactly_not_once_per_attempt(caplog):
    from rmq_client import MQClientError
    from rmq_log.broker_calls import with_retry
    from rmq_log.broker_wait import BrokerUnavailableError

    def no_answer():
        raise MQClientError(-1, "TimeoutError: no answer", "127.0.0.1:1", "route of topic 'T'", unreachable=True)

    caplog.set_level(logging.WARNING, logger="rmq_log.broker_wait")
    with pytest.raises(BrokerUnavailableError, match="brokerTimeoutMs=3000"):
        with_retry(no_answer, 3000, "route of topic 'T'", POLICY)
    assert len(caplog.records) == 1, [r.getMessage() for r in caplog.records]  # ~6 attempts, one line


@pytest.mark.parametrize("conf, warned", [
    ("maxTransferCountOnMessageInMemory = 32\n", True), ("", False),
    # consume-queue files of 300 units: the pull at offset 256 stops at the first file's end with 44, then 256
    ("mappedFileSizeConsumeQueue = 6000\n", False)])
def test_pulls_capped_far_below_pull_batch_size_are_logged_once_naming_the_broker_keys(tmp_path, caplog, conf,
                                                                                        warned):
    from rmq_client import Subscription
    from rmq_log import cluster_reads as wire

    caplog.set_level(logging.WARNING, logger="rmq_log.cluster_reads")
    wire._CAPPED.clear()
    with WireCluster(tmp_path, conf=conf) as c:
        _send(c.namesrv, "Capped", "broker-a", 0, n=600, create=True)
        part = wire.ClusterRange(c.namesrv, "capped-g", "Capped", QueueKey("broker-a", 0), 0, 600,
                                 Subscription(), None, None, fail_on_data_loss=True, pull_batch_size=256, in_flight=2,
                                 timeout_ms=5000, selection=FULL, policy=POLICY)
        for _ in range(2):
            assert sum(b.num_rows for b in part.read()) == 600
    said = [r.getMessage() for r in caplog.records if "far below pullBatchSize" in r.getMessage()]
    assert len(said) == (1 if warned else 0), said
    if warned:
        assert "broker 'broker-a'" in said[0] and "maxTransferCountOnMessageInMemory" in said[0] \
            and "maxTransferBytesOnMessageInMemory" in said[0]
        # the client-side choice beside the broker's settings
        assert "pullBatchSize=256" in said[0] and "raise pullsInFlight (now 2" in said[0]


_CAPPED_READER = """
import logging, pickle, sys
logging.basicConfig(level=logging.WARNING)
part = pickle.loads(bytes.fromhex(sys.argv[1]))
assert sum(b.num_rows for b in part.read()) == 600
"""


def test_capped_pulls_are_logged_once_per_query_across_the_python_workers(tmp_path):
    """Every Python worker reading a query's partitions from a capping broker: one warning for the query, not one
    per worker; another query (another reader's key) warns again."""
    import os
    import pickle
    import subprocess
    import sys
    import uuid

    from wire_cluster import ROOT

    from rmq_client import Subscription
    from rmq_log import cluster_reads as wire

    def worker(part) -> str:
        p = subprocess.run([sys.executable, "-c", _CAPPED_READER, pickle.dumps(part).hex()], capture_output=True,
                           text=True, timeout=120, env=dict(os.environ, PYTHONPATH=ROOT))
        assert p.returncode == 0, p.stderr
        return p.stderr

    with WireCluster(tmp_path, conf="maxTransferCountOnMessageInMemory = 32\n") as c:
        _send(c.namesrv, "Capped", "broker-a", 0, n=600, create=True)
        said = []
        for query in (uuid.uuid4().hex, uuid.uuid4().hex):
            part = wire.ClusterRange(c.namesrv, "capped-g", "Capped", QueueKey("broker-a", 0), 0, 600,
                                     Subscription(), None, None, fail_on_data_loss=True, pull_batch_size=256,
                                     in_flight=2, timeout_ms=5000, selection=FULL, policy=POLICY, query_key=query)
            said.append(sum(worker(part).count("far below pullBatchSize") for _ in range(3)))
        assert said == [1, 1]


def test_capped_pull_marks_older_than_a_week_are_removed_when_a_query_marks_its_first(tmp_path, monkeypatch):
    """The once-per-query marks live in the temporary directory: a new mark clears those older than
    CAPPED_MARK_DAYS, and a recent one keeps a restarted query from warning again."""
    import os
    import time
    import uuid

    from rmq_log import cluster_reads as wire

    monkeypatch.setattr(wire, "CAPPED_MARKS", str(tmp_path / "marks"))
    wire._CAPPED.clear()
    old_query, recent_query = uuid.uuid4().hex, uuid.uuid4().hex
    assert wire._first_capped_note(old_query, "broker-a") and wire._first_capped_note(recent_query, "broker-a")
    old = sorted(os.listdir(tmp_path / "marks"))
    week_ago = time.time() - (wire.CAPPED_MARK_DAYS + 1) * 86400
    for name in old:
        os.utime(tmp_path / "marks" / name, (week_ago, week_ago))
    recent_mark = max(old, key=lambda n: n == wire.hashlib.sha1(f"{recent_query}/broker-a".encode()).hexdigest()[:20])
    os.utime(tmp_path / "marks" / recent_mark, None)
    wire._CAPPED.clear()  # other Python workers: only the marks remember
    assert not wire._first_capped_note(recent_query, "broker-a")  # a restarted query stays quiet
    assert wire._first_capped_note(uuid.uuid4().hex, "broker-b")
    left = set(os.listdir(tmp_path / "marks"))
    assert recent_mark in left and len(left) == 2, left  # the week-old mark is gone
