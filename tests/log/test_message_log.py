"""The same MessageLog requests on a store directory and on a real broker (`rmq serve`, named broker-a as a store's
queues are): the same answers where the two keep the same things, and a broker's silence as Refused."""
from __future__ import annotations

import socket

import pytest
from wire_cluster import WireCluster

from rmq_log import FOREVER, Consume, MessageLog, QueueKey, Refused, Sent, open_log


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    root = tmp_path_factory.mktemp("logs")
    with WireCluster(root / "cluster", brokers=("broker-a",)) as cluster:
        yield {"store": open_log(store=str(root / "store")), "cluster": open_log(namesrv=cluster.namesrv)}


@pytest.mark.parametrize("kind", ["store", "cluster"])
def test_sent_messages_are_in_the_queue_stats_and_read_back_in_order(logs, kind):
    log: MessageLog = logs[kind]
    log.create_topic("Pair", 2, None)
    sent: list[Sent] = []
    log.send("Pair", [b"a", b"b", b"c"], "TagA", "k1 k2", {"region": "EU"}, None, (None, 1), sent.append)
    assert [(s.topic, s.queue, s.queue_offset) for s in sent] == [("Pair", QueueKey("broker-a", 1), i)
                                                                  for i in range(3)]
    stats = {s.queue: (s.min_offset, s.max_offset) for s in log.queue_stats("Pair", None)}
    assert stats == {QueueKey("broker-a", 0): (0, 0), QueueKey("broker-a", 1): (0, 3)}

    got: list[tuple] = []
    log.consume(Consume("Pair", 1, ("offset", 1), None, "TagA", None, "pair-g", True, False),
                lambda m, q: got.append((q, m.queue_offset, m.body, m.tags, list(m.keys), m.properties["region"])))
    assert got == [(QueueKey("broker-a", 1), i, body, "TagA", ["k1", "k2"], "EU") for i, body in ((1, b"b"),
                                                                                                   (2, b"c"))]
    committed = {s.queue: (s.committed, s.lag) for s in log.queue_stats("Pair", "pair-g")}
    assert committed[QueueKey("broker-a", 1)] == (3, 0)
    assert sorted(m.body for m in log.find_by_key("Pair", "k2", 10, 0, FOREVER)) == [b"a", b"b", b"c"]


def test_a_cluster_that_does_not_answer_is_refused():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    with pytest.raises(Refused):
        open_log(namesrv=f"127.0.0.1:{port}").topics()
