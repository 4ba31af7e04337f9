"""The stock Java client (Apache RocketMQ 4.9.7's DefaultMQProducer and DefaultMQPushConsumer) against `rmq serve`:
single sends and a batch send(Collection<Message>) (SEND_BATCH_MESSAGE with the V2 header, as the Java client sends
every batch) land where the SendResults say, and a push consumer with a tag selector receives every matching
message with its tags, keys, properties and ids."""
import base64

import pytest
from conftest import stock_clients
from stock_peers import STOCK_4
from wire_cluster import WireCluster

from rmq_client import Producer

TOPIC = "JavaWire"


def _message(i: int) -> dict:
    return {"topic": TOPIC, "tags": "TagA" if i % 3 else "TagB", "keys": f"order-{i} customer-{i % 5}",
            "props": {"i": str(i), "region": "eu" if i % 2 else "us", "note": f"caf\u00e9 {i}"}, "body": f"body {i}"}


@pytest.fixture(scope="module")
def serve(tmp_path_factory):
    root = tmp_path_factory.mktemp("java-wire")
    with WireCluster(root, brokers=("broker-a", "broker-b")) as cluster:
        with Producer(cluster.namesrv) as p:
            p.create_topic(TOPIC, 2)
        cluster.java = stock_clients(STOCK_4, cluster.namesrv, root)
        yield cluster


def test_the_java_producer_sends_singles_and_batches_and_a_tag_consumer_receives_them(serve):
    msgs = [_message(i) for i in range(60)]
    # 20 single sends, then batches of 20 and 10 and 10 (send(Collection) goes to one queue per batch)
    items = msgs[:20] + [{"batch": msgs[20:40]}, {"batch": msgs[40:50]}, {"batch": msgs[50:]}]
    results = serve.java.produce(items, group="java-wire-producer")
    assert [r["status"] for r in results] == ["SEND_OK"] * len(items)
    # every message's place, as the producer was told: (broker, queue, offset) by the message's unique id
    placed = {}
    for item, r in zip(items, results):
        ids = r["msgId"].split(",")
        assert len(ids) == len(item.get("batch", [item]))
        for k, (uid, m) in enumerate(zip(ids, item.get("batch", [item]))):
            placed[uid] = (int(m["props"]["i"]), r["broker"], r["queueId"], r["queueOffset"] + k)
    assert len(placed) == 60
    assert {b for _, b, _, _ in placed.values()} == {"broker-a", "broker-b"}

    tag_a = [m for m in msgs if m["tags"] == "TagA"]
    got = serve.java.consume(TOPIC, len(tag_a), "java-wire-tag", "tag", "TagA", timeout=60)
    assert sorted(int(g["properties"]["i"]) for g in got) == sorted(int(m["props"]["i"]) for m in tag_a)
    for g in got:
        i = int(g["properties"]["i"])
        m = msgs[i]
        assert (g["topic"], g["tags"], g["keys"]) == (TOPIC, "TagA", m["keys"])
        assert base64.b64decode(g["bodyBase64"]).decode() == m["body"]
        assert {k: g["properties"][k] for k in m["props"]} == m["props"]
        assert g["properties"]["UNIQ_KEY"] == g["msgId"]
        assert placed[g["msgId"]] == (i, g["broker"], g["queueId"], g["queueOffset"])
        assert g["storeHost"] == serve.addresses[g["broker"]]
        assert g["reconsumeTimes"] == 0
