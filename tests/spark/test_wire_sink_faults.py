"""The wire sink's exactly-once under faults, with the Spark driver in a child process of its own: the driver
SIGKILLed between its tasks' sends and the commit, and inside the commit (some END_TRANSACTIONs sent); a broker
SIGKILLed before and after END_TRANSACTION. After restarts the topic holds every input message exactly once, and
no half message is left undecided."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from test_wire_sink import undecided_halves
from wire_cluster import PULL_LIMITS, ROOT, WireCluster, wait_until

from rmq_client import MessageQueue, Producer, PullConsumer

HERE = os.path.dirname(os.path.abspath(__file__))
BROKERS = ("broker-a", "broker-b")
N = 2000  # 4 microbatches of 500
# A check window (1 s + 30 x 1 s) longer than a driver's restart: a restarted query finds its decided halves
# still undecided on the brokers, or committed by the checks its checker answered, and never rolled back.
CONF = PULL_LIMITS + "transactionTimeOut = 1000\ntransactionCheckInterval = 1000\ntransactionCheckMax = 30\n"


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


def _driver(cluster, topic: str, checkpoint: str, pause: str = "", log=None) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=ROOT, PYSPARK_PYTHON=sys.executable, RMQ_WIRE_SINK_TEST_PAUSE=pause)
    return subprocess.Popen([sys.executable, os.path.join(HERE, "wire_sink_child.py"), cluster.src, cluster.namesrv,
                             topic, checkpoint], env=env, stdout=subprocess.PIPE, stderr=log or subprocess.DEVNULL,
                            text=True, start_new_session=True)


def _kill_driver(proc: subprocess.Popen) -> None:
    """SIGKILL the driver with everything it started (its JVM and Python workers)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(30)


def _run(cluster, topic: str, checkpoint: str, pause: str = "", on_pause=None, marker: str = "") -> None:
    proc = _driver(cluster, topic, checkpoint, pause)
    try:
        if on_pause is not None:
            wait_until(lambda: os.path.exists(os.path.join(checkpoint, "rmq-wire-sink", marker)), 120,
                       f"the commit pausing at {marker}")
            on_pause(proc)
        out, _ = proc.communicate(timeout=300)
        if on_pause is None or proc.returncode != -signal.SIGKILL:
            assert proc.returncode == 0, out
    finally:
        if proc.poll() is None:
            _kill_driver(proc)


def _topic_bodies(namesrv: str, topic: str) -> list[bytes]:
    out: list[bytes] = []
    with PullConsumer(namesrv, "fault-check") as c:
        for mq, (lo, hi) in c.queue_bounds(topic).items():
            for rb in c.read_range(mq, lo, hi):
                out.extend(rb.column("body").to_pylist())
    return out


def _exactly_once(cluster, topic: str) -> dict:
    bodies = _topic_bodies(cluster.namesrv, topic)
    want = {b"in-%d-%d" % (q, i) for q in (0, 1) for i in range(N // 2)}
    return {"rows": len(bodies), "duplicates": len(bodies) - len(set(bodies)), "lost": len(want - set(bodies))}


@pytest.mark.parametrize("point", ["before_decision", "inside_commit"])
def test_a_driver_killed_before_or_inside_the_commit_resumes_exactly_once(cluster, tmp_path, point):
    topic = f"Killed-{point.replace('_', '-')}"
    with Producer(cluster.namesrv) as p:
        p.create_topic(topic, 2)
    cp = str(tmp_path / "cp")
    _run(cluster, topic, cp, pause=f"{point}@1:120", on_pause=_kill_driver, marker=f"paused-{point}-1")
    seen = _exactly_once(cluster, topic)
    assert seen["duplicates"] == 0 and seen["rows"] in (500, 750 if point == "inside_commit" else 500, 1000)
    _run(cluster, topic, cp)  # restarted from the checkpoint: batch 1 is replayed
    assert _exactly_once(cluster, topic) == {"rows": N, "duplicates": 0, "lost": 0}
    wait_until(lambda: all(undecided_halves(cluster.namesrv, b) == 0 for b in BROKERS), 60, "no undecided half")


def test_a_broker_killed_before_and_after_end_transaction_loses_and_duplicates_nothing(cluster, tmp_path):
    topic = "BrokerKilled"
    with Producer(cluster.namesrv) as p:
        p.create_topic(topic, 2)
    cp = str(tmp_path / "cp")
    kills = []

    def kill_and_restart(name: str):
        def act(proc):
            cluster.kill(name)  # SIGKILL
            kills.append(name)
            cluster.start(name)
        return act

    # batch 1: broker-b killed after the tasks' sends, before the decision and END_TRANSACTION;
    # batch 2: broker-a killed after every END_TRANSACTION of the batch was answered
    proc = _driver(cluster, topic, cp, pause="before_decision@1:6,after_commit@2:6")
    try:
        for marker, name in (("paused-before_decision-1", "broker-b"), ("paused-after_commit-2", "broker-a")):
            wait_until(lambda: os.path.exists(os.path.join(cp, "rmq-wire-sink", marker)), 120, marker)
            kill_and_restart(name)(proc)
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, out
    finally:
        if proc.poll() is None:
            _kill_driver(proc)
    assert kills == ["broker-b", "broker-a"]
    assert _exactly_once(cluster, topic) == {"rows": N, "duplicates": 0, "lost": 0}
    wait_until(lambda: all(undecided_halves(cluster.namesrv, b) == 0 for b in BROKERS), 60, "no undecided half")
    with PullConsumer(cluster.namesrv, "fault-check") as c:
        assert {mq.broker_name for mq in c.queue_bounds(topic)} == set(BROKERS)
        assert MessageQueue  # both brokers hold the topic's queues
