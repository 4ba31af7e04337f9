"""The default exactly_once stream into stock Apache RocketMQ brokers, through kills, with the Spark driver in a child
process of its own: the driver SIGKILLed before the decision of a microbatch and inside its commit (some halves
committed), a stock broker SIGKILLed between a microbatch's halves and their END_TRANSACTIONs. After the restarts
a stock Java consumer gets every input message exactly once, nothing of a microbatch is visible before its
commit, and the brokers' checks, answered by the running query, leave no half undecided.

Run against the 5.x line only (STOCK_VERSIONS): each run restarts a Spark driver three times and takes 2-3 minutes
of a 2-core machine; the sink's halves, ENDs and checks against 4.9.x are tested by test_stock_sink.py."""
from __future__ import annotations

import os

import pytest
from sink_driver import finish, input_bodies, kill_driver, resume, run_driver, start_driver, tally, wait_paused
from stock_peers import STOCK_5
from stock_transactions import half_count, undecided_halves
from wire_cluster import wait_until

BROKERS = ("broker-a", "broker-b")
N = 2000  # 4 microbatches of 500
STOCK_VERSIONS = [STOCK_5]


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> str:
    from store import MessageStore

    src = str(tmp_path_factory.mktemp("stock-sink-faults") / "in")
    with MessageStore(src) as s:
        s.create_topic("In", 2)
        for q in (0, 1):
            s.put_batch("In", [b"in-%d-%d" % (q, i) for i in range(N // 2)], queue_id=q, tags="T")
    return src


def _tally(namesrv: str, topic: str) -> dict:
    return tally(namesrv, topic, input_bodies(N))


def _undecided(cluster) -> dict:
    return {name: undecided_halves(cluster.store(name)) for name in BROKERS}


def test_driver_and_stock_broker_kills_lose_and_duplicate_nothing(stock_cluster, stock_java, source, tmp_path):
    topic = "StockKilled"
    stock_java.create_topic(topic, 2)
    namesrv = stock_cluster.namesrv
    cp = str(tmp_path / "cp")
    decisions = os.path.join(cp, "rmq-wire-sink")
    try:
        # killed before the decision of batch 1: its halves were sent, none is visible
        run_driver(source, namesrv, topic, cp, pause="before_decision@1:kill", on_pause=kill_driver,
                   marker="paused-before_decision-1")
        assert _tally(namesrv, topic) == {"rows": 500, "duplicates": 0, "lost": N - 500}
        assert sorted(f for f in os.listdir(decisions) if f.endswith(".json")) == ["0.json"]

        # batch 1 replayed with new halves and decided; killed after some of its halves were committed
        run_driver(source, namesrv, topic, cp, pause="inside_commit@1:kill", on_pause=kill_driver,
                   marker="paused-inside_commit-1")
        second = _tally(namesrv, topic)
        assert second["duplicates"] == 0 and 500 < second["rows"] < 1000, second

        # the replay of batch 1 commits the decided halves the killed commit had not ended (looked for first: a
        # stock broker would commit a half twice), then batch 2: broker-b SIGKILLed between its halves and the
        # decision, started again while the commit waits
        proc = start_driver(source, namesrv, topic, cp,
                            pause="before_decision@2:120,after_commit@2:120,after_commit@3:120")
        try:
            wait_paused(proc, cp, "paused-before_decision-2")
            assert _tally(namesrv, topic) == {"rows": 1000, "duplicates": 0, "lost": N - 1000}  # none of batch 2
            stock_cluster.kill("broker-b")
            stock_cluster.start("broker-b")
            resume(cp, "paused-before_decision-2")
            wait_paused(proc, cp, "paused-after_commit-2")
            assert _tally(namesrv, topic) == {"rows": 1500, "duplicates": 0, "lost": N - 1500}  # all of batch 2
            resume(cp, "paused-after_commit-2")
            # while the query still runs (its checker registered): the brokers' checks of the halves the killed
            # drivers left are answered, and nothing stays undecided
            wait_paused(proc, cp, "paused-after_commit-3")
            assert sum(half_count(stock_cluster.store(name)) for name in BROKERS) >= N  # a half per row at least
            wait_until(lambda: _undecided(stock_cluster) == {"broker-a": {}, "broker-b": {}}, 120,
                       "every half ended")
            resume(cp, "paused-after_commit-3")
            finish(proc)
        finally:
            if proc.poll() is None:
                kill_driver(proc)
        assert _tally(namesrv, topic) == {"rows": N, "duplicates": 0, "lost": 0}
        got = stock_java.consume(topic, N, "stock-fault-consumer", timeout=120)
        bodies = sorted(m["bodyBase64"] for m in got)
        assert len(bodies) == N and len(set(bodies)) == N
        assert {m["broker"] for m in got} == set(BROKERS)
        assert all(m["tags"] == "T" for m in got)
    finally:
        for name in BROKERS:
            stock_cluster.ensure_running(name)
