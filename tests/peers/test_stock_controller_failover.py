"""A Spark stream through a stock 5.5.0 cluster's failover in controller mode: broker-a is a group of three brokers
(enableControllerMode, allAckInSyncStateSet) whose master the controller inside the name server elects. The master
is SIGKILLed mid-stream; the controller promotes a slave of the syncStateSet; the query goes on from the new master
without a restart, reading what was sent before the kill (at the offsets the old master gave them) and what is sent
to the new master after it; the Parquet output holds every message once. The pause (seconds from the kill until
rows flow again) is printed. A stream writing into the group goes on to the promoted master when the master dies,
and every row lands once (exactly_once), at least once (at_least_once: its duplicates are printed)."""
from __future__ import annotations

import json
import signal
import time

import pytest
from failover_checks import at, group_offsets, max_offsets, offsets, written
from stock_peers import STOCK_5, StockCluster
from wire_cluster import wait_until

from rmq_client import MessageQueue, Producer
from rmq_client.admin import Admin

TOPIC = "ControllerFailover"
GROUP = "controller-failover-g"
QUEUES = 2
BEFORE, AFTER = 300, 100  # messages per queue sent before the kill (to the first master) and after (to the new one)
NODES = 3


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """broker-a: three brokers in controller mode, the controller in the name server; stopped whatever happens."""
    with StockCluster(STOCK_5, tmp_path_factory.mktemp("controller-failover"), brokers=("broker-a",),
                      controller={"broker-a": NODES}) as c:
        _wait_in_sync(c)
        yield c


def _wait_in_sync(cluster: StockCluster) -> str:
    """Every node running and in broker-a's syncStateSet (the controller elects a new master among those only): the
    master's node name."""
    for node in cluster.names:
        cluster.ensure_running(node)
    wait_until(lambda: len(cluster.replica_info("broker-a")[1]) == NODES and cluster.master("broker-a"), 180,
               "every node of broker-a in its syncStateSet")
    master = cluster.master("broker-a")
    assert master is not None
    return master


def _promoted(cluster: StockCluster, killed: str) -> str:
    """Waits until the name server lists a node other than `killed` as broker-a's master: that node."""
    wait_until(lambda: cluster.master("broker-a") not in (None, killed), 120, "a new master of broker-a")
    master = cluster.master("broker-a")
    assert master is not None
    return master


def _send(namesrv: str, first: int, count: int) -> set[bytes]:
    """Messages broker-a/<queue>/<i> for i in [first, first + count) to each queue of broker-a, in order."""
    sent: set[bytes] = set()
    with Producer(namesrv) as p:
        for q in range(QUEUES):
            bodies = [f"broker-a/{q}/{i}".encode() for i in range(first, first + count)]
            for k in range(0, count, 100):
                p.send_batch(TOPIC, bodies[k:k + 100], queue=MessageQueue(TOPIC, "broker-a", q))
            sent.update(bodies)
    return sent


def test_a_stream_reads_on_from_the_promoted_master_and_ends_with_every_message_once(spark, cluster, tmp_path):
    old = _wait_in_sync(cluster)
    with Admin(cluster.namesrv) as admin:
        admin.create_topic(TOPIC, QUEUES)
    sent = _send(cluster.namesrv, 0, BEFORE)
    ends = {i: BEFORE for i in range(QUEUES)}
    assert max_offsets(cluster.addresses[old], TOPIC) == ends
    for node in cluster.names:  # the topic's config (copied every 10 s) and its messages on every node
        wait_until(lambda n=node: max_offsets(cluster.addresses[n], TOPIC) == ends, 120,
                   f"{node} holding every message")

    out = str(tmp_path / "out")
    q = (spark.readStream.format("rmq").option("namesrvAddr", cluster.namesrv).option("topic", TOPIC)
         .option("consumerGroup", GROUP).option("startingOffsets", "earliest")
         .option("maxMessagesPerTrigger", "60").option("brokerTimeoutMs", "120000").load()
         .writeStream.format("parquet").option("path", out)
         .option("checkpointLocation", str(tmp_path / "cp")).trigger(processingTime="500 milliseconds").start())
    batches: dict[int, dict] = {}

    def seen() -> list[dict]:
        for p in q.recentProgress:
            batches[p["batchId"]] = p
        return [batches[b] for b in sorted(batches)]

    try:
        wait_until(lambda: any(p["numInputRows"] > 0 for p in seen()), 240, "the stream's first rows")
        killed_at = time.time()
        cluster.kill(old, signal.SIGKILL)
        dead_at = time.time()
        new = _promoted(cluster, old)
        promoted_in = time.time() - killed_at
        # the new master holds what the old one acknowledged, at the same offsets
        assert max_offsets(cluster.addresses[new], TOPIC) == ends
        wait_until(lambda: [p for p in seen() if at(p["timestamp"]) >= dead_at and p["numInputRows"] > 0], 120,
                   "rows of broker-a with its first master killed")
        first = next(p for p in seen() if at(p["timestamp"]) >= dead_at and p["numInputRows"] > 0)
        pause = at(first["timestamp"]) + first["durationMs"]["triggerExecution"] / 1000 - killed_at
        sent |= _send(cluster.namesrv, BEFORE, AFTER)  # to the new master
        assert max_offsets(cluster.addresses[new], TOPIC) == {i: BEFORE + AFTER for i in range(QUEUES)}
        wait_until(lambda: written(spark, q, out) >= len(sent), 240, "every message in the Parquet output")
        read_after = sum(p["numInputRows"] for p in seen() if at(p["timestamp"]) >= dead_at)
        print(f"\ncontroller failover: {promoted_in:.1f} s from the SIGKILL of broker-a's master until the name server "
              f"listed the promoted one; {pause:.1f} s until a batch with broker-a's rows was written; "
              f"{read_after} of {len(sent)} rows read after the kill")
        ends_now = {f"broker-a:{i}": BEFORE + AFTER for i in range(QUEUES)}
        wait_until(lambda: offsets(seen()[-1], TOPIC, "endOffset") == ends_now, 60, "the stream at the queue ends")
        # the group's commits go to the new master
        wait_until(lambda: group_offsets(cluster.addresses[new], TOPIC, GROUP, QUEUES) == {
            i: BEFORE + AFTER for i in range(QUEUES)}, 60, "the group's offsets at the queue ends on the new master")
        assert q.exception() is None
    finally:
        q.stop()
    rows = spark.read.parquet(out).select("queue_id", "queue_offset", "body").collect()
    bodies = [bytes(r.body) for r in rows]
    duplicates, lost = len(bodies) - len(set(bodies)), len(sent - set(bodies))
    assert (duplicates, lost) == (0, 0), f"duplicates {duplicates}, lost {lost}"
    # each message at the offset it was sent to: broker-a/<queue>/<i> at offset i, before the kill and after
    moved = [(r.queue_id, r.queue_offset, bytes(r.body)) for r in rows
             if bytes(r.body) != f"broker-a/{r.queue_id}/{r.queue_offset}".encode()]
    assert not moved, f"messages not at the offset they were sent to: {moved[:5]}"


@pytest.mark.parametrize("guarantee", ["exactly_once", "at_least_once"])
def test_a_stream_writing_into_the_group_goes_on_to_the_promoted_master_and_lands_every_row(
        spark, cluster, tmp_path, guarantee):
    """A stream from JSON files into a topic of broker-a alone; its master SIGKILLed after the first batch: the
    next batches' sends wait for the promoted master and go there, without a failed query."""
    topic, per_file, files = f"ControllerOut-{guarantee}", 200, 4
    old = _wait_in_sync(cluster)
    with Admin(cluster.namesrv) as admin:
        admin.create_topic(topic, QUEUES)
    src = tmp_path / "in"
    src.mkdir()

    def add(k: int) -> None:  # written aside, then renamed: the file source never sees half a file
        part = tmp_path / f"part-{k}.tmp"
        part.write_text("".join(json.dumps({"body": f"row-{k}-{i}"}) + "\n" for i in range(per_file)))
        part.rename(src / f"part-{k}.json")

    def written() -> int:
        if q.exception() is not None:
            raise AssertionError(f"the query failed: {q.exception()}")
        return sum(p["numInputRows"] for p in q.recentProgress)

    add(0)
    q = (spark.readStream.schema("body string").option("maxFilesPerTrigger", 1).json(str(src))
         .writeStream.format("rmq").option("namesrvAddr", cluster.namesrv).option("topic", topic)
         .option("deliveryGuarantee", guarantee).option("brokerTimeoutMs", "120000")
         .option("checkpointLocation", str(tmp_path / "cp")).trigger(processingTime="500 milliseconds").start())
    try:
        wait_until(lambda: written() >= per_file, 240, "the first file written into the cluster")
        killed_at = time.time()
        cluster.kill(old, signal.SIGKILL)
        for k in range(1, files):
            add(k)
        wait_until(lambda: written() >= files * per_file, 240, "every file written through the failover")
        took = time.time() - killed_at
        assert q.exception() is None
    finally:
        q.stop()
    new = cluster.master("broker-a")
    assert new not in (None, old)
    want = sorted(f"row-{k}-{i}" for k in range(files) for i in range(per_file))

    def bodies() -> list[str]:
        rows = (spark.read.format("rmq").option("namesrvAddr", cluster.namesrv).option("topic", topic)
                .load().select("body").collect())
        return sorted(bytes(r.body).decode() for r in rows)
    wait_until(lambda: len(bodies()) >= len(want), 120, "every row readable from the promoted master")
    got = bodies()
    duplicates, lost = len(got) - len(set(got)), len(set(want) - set(got))
    print(f"\ncontroller failover, writing ({guarantee}): the files after the kill written within {took:.1f} s; "
          f"duplicates {duplicates}, lost {lost}")
    assert lost == 0, f"{guarantee}: lost {lost}"
    if guarantee == "exactly_once":
        assert got == want, f"duplicates {duplicates}"
