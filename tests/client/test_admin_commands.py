"""rmq create-topic, delete-topic, groups and reset-offsets: on a store directory, and with --namesrv through a
real `rmq serve` (an online group told to reset by its broker, an offline one's offsets committed directly)."""
from __future__ import annotations

import json
import os
import time

import pytest
from wire_cluster import WireCluster, wait_until

from rmq_cli.cli import main
from rmq_client import MessageQueue, Producer, PullConsumer
from store import MessageStore, OffsetStore


def rmq(capsys, *args) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_admin_commands_on_a_store(tmp_path, capsys):
    s = str(tmp_path / "store")
    assert rmq(capsys, "-s", s, "create-topic", "-t", "Orders", "-q", "3")[1] == "topic Orders: created with 3 queues\n"
    assert rmq(capsys, "-s", s, "create-topic", "-t", "Orders", "-q", "3")[0] == 0  # as it is: nothing to do
    code, _, err = rmq(capsys, "-s", s, "create-topic", "-t", "Orders", "-q", "4")
    assert code == 2 and "--queues 4: topic Orders exists with 3 queues" in err
    with MessageStore(s) as store:
        before = int(time.time() * 1000)
        for q in range(3):
            store.put_batch("Orders", [b"m"] * 4, queue_id=q)
        store.put("Other", b"x")
    offsets = OffsetStore(s, "billing")
    for q in range(3):
        offsets.update_offset(("Orders", q), 1)
    offsets.update_offset(("Other", 0), 1)
    offsets.persist_all()

    code, out, _ = rmq(capsys, "-s", s, "groups", "--json")
    assert json.loads(out) == [{"group": "billing", "topic": "Orders", "queues": 3, "committed": 3, "lag": 9},
                               {"group": "billing", "topic": "Other", "queues": 1, "committed": 1, "lag": 0}]
    assert "billing  Orders       3          3    9" in rmq(capsys, "-s", s, "groups")[1]

    code, out, _ = rmq(capsys, "-s", s, "reset-offsets", "-g", "billing", "-t", "Orders", "--to", "latest", "--json")
    assert json.loads(out)["queues"] == [{"queue_id": q, "old": 1, "new": 4} for q in range(3)]
    rmq(capsys, "-s", s, "reset-offsets", "-g", "billing", "-t", "Orders", "--to", "earliest")
    assert [OffsetStore(s, "billing").read_offset(("Orders", q)) for q in range(3)] == [0, 0, 0]
    future = str(before + 3_600_000)  # after every message: the end of each queue
    rmq(capsys, "-s", s, "reset-offsets", "-g", "billing", "-t", "Orders", "--to", future)
    assert [OffsetStore(s, "billing").read_offset(("Orders", q)) for q in range(3)] == [4, 4, 4]
    code, _, err = rmq(capsys, "-s", s, "reset-offsets", "-g", "billing", "-t", "Orders", "--to", "yesterday")
    assert code == 2 and "--to 'yesterday'" in err
    code, _, err = rmq(capsys, "-s", s, "reset-offsets", "-g", "bad group", "-t", "Orders", "--to", "latest")
    assert code == 2 and "--group" in err

    code, out, _ = rmq(capsys, "-s", s, "delete-topic", "-t", "Orders")
    assert code == 0 and "topic Orders: deleted (3 queues; offsets of billing)" in out
    code, _, err = rmq(capsys, "-s", s, "delete-topic", "-t", "Orders")
    assert code == 2 and "unknown topic 'Orders'" in err
    # opened for writing again (recovery re-dispatches what no consume queue points at): it stays deleted
    with MessageStore(s) as store:
        assert store.topics() == ["Other"]
    assert not os.path.exists(os.path.join(s, "consumequeue", "Orders"))
    assert OffsetStore(s, "billing").read_offset(("Orders", 0)) == -1
    assert OffsetStore(s, "billing").read_offset(("Other", 0)) == 1
    assert rmq(capsys, "-s", s, "check")[0] == 0
    # created again, it starts empty
    rmq(capsys, "-s", s, "create-topic", "-t", "Orders", "-q", "1")
    with MessageStore(s, read_only=True) as store:
        assert (store.min_offset("Orders", 0), store.max_offset("Orders", 0)) == (0, 0)


@pytest.fixture(scope="module")
def serve(tmp_path_factory):
    with WireCluster(tmp_path_factory.mktemp("admin-cli")) as cluster:
        yield cluster


def test_admin_commands_through_brokers(serve, capsys):
    ns = serve.namesrv
    code, out, _ = rmq(capsys, "create-topic", "--namesrv", ns, "-t", "Wire", "-q", "2")
    assert code == 0 and out == "topic Wire: 2 queues on broker-a\n"
    with Producer(ns) as p:
        for q in (0, 0, 0, 1):
            p.send("Wire", b"m", queue=MessageQueue("Wire", "broker-a", q))
    online = PullConsumer(ns, "live")
    try:
        online.register_group(["Wire"])
        for q in (0, 1):
            online.commit_offset(MessageQueue("Wire", "broker-a", q), 1)
        with PullConsumer(ns, "idle") as idle:
            idle.commit_offset(MessageQueue("Wire", "broker-a", 0), 3)
        code, out, _ = rmq(capsys, "groups", "--namesrv", ns, "--json")
        rows = {r["group"]: r for r in json.loads(out)}
        assert rows["live"] == {"group": "live", "topic": "Wire", "queues": 2, "committed": 2, "lag": 2, "online": 1}
        # a queue without a committed offset counts from 0, as RocketMQ's consume stats do
        assert rows["idle"] == {"group": "idle", "topic": "Wire", "queues": 2, "committed": 3, "lag": 1, "online": 0}

        # online: the broker tells the member, which commits where it was told
        code, out, err = rmq(capsys, "reset-offsets", "--namesrv", ns, "-g", "live", "-t", "Wire", "--to", "earliest")
        assert code == 0, err
        assert "broker-a:0    1    0" in out and "online members told by broker-a" in out
        wait_until(lambda: len(online.resets) == 2, 20, "the reset told to the consumer")
        assert online.take_reset(MessageQueue("Wire", "broker-a", 0)) == 0
        wait_until(lambda: online.query_offset(MessageQueue("Wire", "broker-a", 1)) == 0, 20, "the reset committed")
        # offline: committed directly
        code, out, _ = rmq(capsys, "reset-offsets", "--namesrv", ns, "-g", "idle", "-t", "Wire", "--to", "earliest",
                           "--json")
        assert json.loads(out)["queues"] == [{"broker_name": "broker-a", "queue_id": 0, "old": 3, "new": 0},
                                             {"broker_name": "broker-a", "queue_id": 1, "old": 0, "new": 0}]
    finally:
        online.close()

    code, out, _ = rmq(capsys, "delete-topic", "--namesrv", ns, "-t", "Wire")
    assert code == 0 and out == "topic Wire: deleted on broker-a and from the name server\n"
    code, _, err = rmq(capsys, "delete-topic", "--namesrv", ns, "-t", "Wire")
    assert code == 2 and "--topic Wire: no broker has it" in err
    assert not os.path.exists(os.path.join(serve.store("broker-a"), "consumequeue", "Wire"))
    code, _, err = rmq(capsys, "create-topic", "--namesrv", ns, "-t", "Wire", "-q", "1", "--cluster", "Nope")
    assert code == 2 and "--cluster Nope: no such cluster" in err
