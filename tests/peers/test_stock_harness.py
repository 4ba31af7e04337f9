"""The stock peers themselves: a stock cluster of each version starts, registers both brokers, and the stock Java
producer, push consumers (tag and SQL92 selectors) and admin work against it."""
import base64
import os
import time

from stock_peers import STOCK_5


def _messages(topic: str, n: int) -> list[dict]:
    return [{"topic": topic, "tags": "TagA" if i % 2 == 0 else "TagB", "keys": f"k{i} key{i}",
             "props": {"i": str(i), "color": "red" if i % 3 == 0 else "blue"}, "body": f"body-{i}"} for i in range(n)]


def test_a_stock_cluster_serves_the_stock_clients(stock_cluster, stock_java):
    assert set(stock_cluster.addresses) == {"broker-a", "broker-b"}
    created = stock_java.create_topic("HarnessTopic", 4)
    assert {c["broker"] for c in created} == {"broker-a", "broker-b"}
    msgs = _messages("HarnessTopic", 40)
    sent = stock_java.produce(msgs[:20] + [{"batch": msgs[20:30]}, {"batch": msgs[30:]}])
    assert all(r["status"] == "SEND_OK" for r in sent)

    # both consumers in one JVM
    got = stock_java.consume_many("HarnessTopic", [("harness-tag", "tag", "TagA || TagB", 40),
                                                   ("harness-sql", "sql", "color = 'red'", 14)])
    tagged = got["harness-tag"]
    assert sorted(int(m["properties"]["i"]) for m in tagged) == list(range(40))
    for m in tagged:
        i = int(m["properties"]["i"])
        assert (m["tags"], m["keys"], base64.b64decode(m["bodyBase64"]).decode()) == (msgs[i]["tags"],
                                                                                        f"k{i} key{i}", f"body-{i}")
        assert m["properties"]["color"] == msgs[i]["props"]["color"]

    sql = got["harness-sql"]
    assert sorted(int(m["properties"]["i"]) for m in sql) == list(range(0, 40, 3))

    # every message consumed: the group's offsets reach the queue ends (the client persists them at shutdown, with
    # oneway UPDATE_CONSUMER_OFFSETs a loaded broker may apply after the client has exited)
    for _ in range(10):
        stats = stock_java.consume_stats("harness-tag")
        if [s["consumerOffset"] for s in stats] == [s["brokerOffset"] for s in stats]:
            break
        time.sleep(2)
    assert {(s["broker"], s["queueId"]) for s in stats} == {(b, q) for b in ("broker-a", "broker-b") for q in range(4)}
    assert sum(s["brokerOffset"] for s in stats) == 40
    assert [s["consumerOffset"] for s in stats] == [s["brokerOffset"] for s in stats]

    # the JVMs' temporary files go to the cluster's folder, not the machine's /tmp (5.x's broker unpacks RocksDB's
    # 13 MB library at every start and never removes it)
    if stock_cluster.version == STOCK_5:
        unpacked = os.listdir(os.path.join(stock_cluster.root, "broker-a", "tmp"))
        assert any(f.startswith("librocksdbjni") for f in unpacked), unpacked


def test_a_stock_cluster_on_a_disk_too_full_for_stock_brokers_is_refused_with_the_reason(tmp_path):
    """A stock broker on a fuller disk than its limit refuses every send as SERVICE_NOT_AVAILABLE ("the broker's
    disk is full"): the cluster says so before it starts anything."""
    import subprocess

    import pytest
    from stock_peers import STOCK_4, STOCK_5, StockCluster

    mnt = tmp_path / "mnt"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)], check=True)
    try:
        (mnt / "filler").write_bytes(bytes(int(4 * 1024 * 1024 * 0.93)))  # 93 %: over 5.x's 90 %, under 99 %
        with pytest.raises(RuntimeError, match=r"is 9\d\.\d% used: a stock .* refuses every write above 90%"):
            StockCluster(STOCK_5, mnt / "five").__enter__()
        assert StockCluster(STOCK_4, mnt / "four").disk_limit() == 0.99  # the properties: 4.9 takes them
        (mnt / "filler2").write_bytes(bytes(int(4 * 1024 * 1024 * 0.065)))
        with pytest.raises(RuntimeError, match="above 99%"):
            StockCluster(STOCK_4, mnt / "four").__enter__()
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=True)
