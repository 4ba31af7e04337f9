"""The wire sink's exactly-once under faults, with the Spark driver in a child process of its own: the driver
SIGKILLed between its tasks' sends and the commit, and inside the commit (some END_TRANSACTIONs sent); a broker
SIGKILLed before and after END_TRANSACTION. After restarts the topic holds every input message exactly once, and
no half message is left undecided."""
from __future__ import annotations

import contextlib
import os

import pytest
from sink_driver import finish, input_bodies, kill_driver, resume, run_driver, start_driver, tally, wait_paused
from test_wire_sink import undecided_halves
from wire_cluster import PULL_LIMITS, WireCluster, wait_until

from rmq_client import Producer, PullConsumer

BROKERS = ("broker-a", "broker-b")
N = 2000  # 4 microbatches of 500
# A check window (1 s + 300 x 1 s) longer than a driver's restart on a loaded machine: a restarted query finds its
# decided halves still undecided on the brokers, or committed by the checks its checker answered, and never rolled
# back (a loaded 2-core run took more than 91 s from the kill inside a commit to the restarted driver's commit, and
# the sink then refused the partly rolled-back batch, as it should).
CONF = PULL_LIMITS + "transactionTimeOut = 1000\ntransactionCheckInterval = 1000\ntransactionCheckMax = 300\n"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from store import MessageStore

    root = tmp_path_factory.mktemp("wire-sink-faults")
    with WireCluster(root / "cluster", brokers=BROKERS, conf=CONF) as c:
        c.src = str(root / "in")
        with MessageStore(c.src) as s:
            s.create_topic("In", 2)
            for q in (0, 1):
                s.put_batch("In", [b"in-%d-%d" % (q, i) for i in range(N // 2)], queue_id=q, tags="T")
        yield c


@contextlib.contextmanager
def sink_checker(namesrv: str, checkpoint: str, topic: str):
    """The producer a run of the stream with this checkpoint answers the brokers' checks with (registered by
    heartbeat, answering from the checkpoint's decisions), connected while the block runs."""
    from rmq_client.event_loop import run_blocking
    from rmq_log.cluster_writes import _PRODUCERS, _checker
    from rmq_log.transaction_log import TransactionLog
    from rmq_spark.sink.sink_options import parse_sink_options

    # the query's own write options (wire_sink_child.py's), its producer group among them
    options = parse_sink_options({"namesrvAddr": namesrv, "topic": topic, "checkpointLocation": checkpoint},
                                 stream=True)
    producer = _checker(options, TransactionLog(checkpoint), [topic])
    try:
        yield producer
    finally:
        for key in [k for k, p in _PRODUCERS.items() if p is producer]:
            del _PRODUCERS[key]
        run_blocking(producer.close)


def _run(cluster, topic: str, checkpoint: str, pause: str = "", on_pause=None, marker: str = "") -> None:
    run_driver(cluster.src, cluster.namesrv, topic, checkpoint, pause, on_pause, marker)


def _exactly_once(cluster, topic: str) -> dict:
    return tally(cluster.namesrv, topic, input_bodies(N))


def test_driver_and_broker_kills_at_each_commit_step_lose_and_duplicate_nothing(cluster, tmp_path):
    """One query over 4 microbatches, started three times from one checkpoint: its driver SIGKILLed before the
    decision of batch 1; restarted, SIGKILLed inside the commit of batch 1 or 2 (half of the END_TRANSACTIONs
    sent); restarted again, with broker-b SIGKILLed before the decision and END_TRANSACTIONs of a batch and
    broker-a after all of them, each restarted while the commit waits."""
    topic = "Killed"
    with Producer(cluster.namesrv) as p:
        p.create_topic(topic, 2)
    cp = str(tmp_path / "cp")
    decisions = os.path.join(cp, "rmq-wire-sink")
    # the driver kills itself at the step: killed from here, it lives on for a moment, and its checker may
    # answer the brokers' checks meanwhile (transactionTimeOut is 1 s)
    _run(cluster, topic, cp, pause="before_decision@1:kill", on_pause=kill_driver, marker="paused-before_decision-1")
    first = _exactly_once(cluster, topic)
    assert first == {"rows": 500, "duplicates": 0, "lost": N - 500}, first  # batch 0 only: 1 was never decided
    assert sorted(f for f in os.listdir(decisions) if f.endswith(".json")) == ["0.json"]

    # batch 1 replayed with new halves and decided; killed after half of its ENDs
    _run(cluster, topic, cp, pause="inside_commit@1:kill", on_pause=kill_driver, marker="paused-inside_commit-1")
    second = _exactly_once(cluster, topic)
    assert second["duplicates"] == 0 and 500 < second["rows"] < 1000, second  # part of batch 1 is visible

    kills: list[str] = []
    # the commit waits at each step (60 s at most) until the broker is killed and started again
    proc = start_driver(cluster.src, cluster.namesrv, topic, cp, pause="before_decision@2:60,after_commit@2:60")
    try:
        for marker, name in (("paused-before_decision-2", "broker-b"), ("paused-after_commit-2", "broker-a")):
            wait_paused(proc, cp, marker)
            cluster.kill(name)  # SIGKILL, while the commit waits
            kills.append(name)
            cluster.start(name)
            resume(cp, marker)
        finish(proc)
    finally:
        if proc.poll() is None:
            kill_driver(proc)
    assert kills == ["broker-b", "broker-a"]
    # the replay of batch 1 ended its decided halves again and rolled back its own
    assert _exactly_once(cluster, topic) == {"rows": N, "duplicates": 0, "lost": 0}
    assert sorted(f for f in os.listdir(decisions) if f.endswith(".json")) == ["0.json", "1.json", "2.json",
                                                                                "3.json"]
    # Halves of an attempt that never reached a decision (the first run's batch 1) are rolled back by the brokers'
    # checks, which a producer of the sink's group answers from the checkpoint. The last run's driver may end
    # before a broker it saw restarted checks them (its check interval is 1 s): the query's next run would answer
    # them; its checker stands in for it here.
    with sink_checker(cluster.namesrv, cp, topic):
        wait_until(lambda: all(undecided_halves(cluster.namesrv, b) == 0 for b in BROKERS), 120,
                   "no undecided half")
    with PullConsumer(cluster.namesrv, "fault-check") as c:
        assert {mq.broker_name for mq in c.queue_bounds(topic)} == set(BROKERS)  # both brokers hold rows
