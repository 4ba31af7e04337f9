"""A Spark stream through a stock 5.5.0 cluster's failover in controller mode: broker-a is a group of three brokers
(enableControllerMode, allAckInSyncStateSet) whose master the controller inside the name server elects. The master
is SIGKILLed mid-stream; the controller promotes a slave of the syncStateSet; the query goes on from the new master
without a restart, reading what was sent before the kill (at the offsets the old master gave them) and what is sent
to the new master after it; the Parquet output holds every message once. The pause (seconds from the kill until
rows flow again) is printed. Streams writing into the group go on to the promoted master when the master dies, and
every row lands once (exactly_once), at least once (at_least_once: its duplicates are printed)."""
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
BEFORE, AFTER = 200, 100  # messages per queue sent before the kill (to the first master) and after (to the new one)
NODES = 3


GUARANTEES = ("exactly_once", "at_least_once")


def _out_topic(guarantee: str) -> str:
    return f"ControllerOut-{guarantee}"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """broker-a: three brokers in controller mode, the controller in the name server, and the module's topics on
    every node (a slave copies the master's topic configs every 10 s: a node promoted before it has a topic would
    create it anew, with another number of queues, at the first send); stopped whatever happens."""
    with StockCluster(STOCK_5, tmp_path_factory.mktemp("controller-failover"), brokers=("broker-a",),
                      controller={"broker-a": NODES}) as c:
        topics = [TOPIC, *map(_out_topic, GUARANTEES)]
        with Admin(c.namesrv) as admin:
            for topic in topics:
                admin.create_topic(topic, QUEUES)
        _wait_in_sync(c)
        for node in c.names:
            for topic in topics:
                wait_until(lambda n=node, t=topic: max_offsets(c.addresses[n], t) == {i: 0 for i in range(QUEUES)},
                           60, f"topic {topic} on {node}")
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
    sent = _send(cluster.namesrv, 0, BEFORE)
    ends = {i: BEFORE for i in range(QUEUES)}
    for node in cluster.names:  # each send was acknowledged once every node of the syncStateSet held it
        wait_until(lambda n=node: max_offsets(cluster.addresses[n], TOPIC) == ends, 30, f"{node} holding them")

    out = str(tmp_path / "out")
    q = (spark.readStream.format("rmq").option("namesrvAddr", cluster.namesrv).option("topic", TOPIC)
         .option("consumerGroup", GROUP).option("startingOffsets", "earliest")
         .option("maxMessagesPerTrigger", "100").option("brokerTimeoutMs", "120000").load()
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
        # the new master holds what the old one acknowledged, at the same offsets (its consume queues are built
        # from its commitlog by a thread of their own: waited for, as the sends below)
        wait_until(lambda: max_offsets(cluster.addresses[new], TOPIC) == ends, 60, f"{new} at the acknowledged ends")
        wait_until(lambda: [p for p in seen() if at(p["timestamp"]) >= dead_at and p["numInputRows"] > 0], 120,
                   "rows of broker-a with its first master killed")
        first = next(p for p in seen() if at(p["timestamp"]) >= dead_at and p["numInputRows"] > 0)
        pause = at(first["timestamp"]) + first["durationMs"]["triggerExecution"] / 1000 - killed_at
        cluster.start(old, wait=False)  # back as a slave of the new master, for the next test
        sent |= _send(cluster.namesrv, BEFORE, AFTER)  # to the new master
        # SEND_OK is given once the commitlog holds a message; its consume queue unit follows (ReputMessageService)
        wait_until(lambda: max_offsets(cluster.addresses[new], TOPIC) == {i: BEFORE + AFTER for i in range(QUEUES)},
                   60, f"{new} holding the messages sent to it")
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


def test_streams_writing_into_the_group_go_on_to_the_promoted_master_and_land_every_row(spark, cluster, tmp_path):
    """Two streams from JSON files into topics of broker-a alone, one exactly_once, one at_least_once; broker-a's
    master SIGKILLed once both wrote their first batch: the next batches' sends wait for the promoted master and go
    there, without a failed query; every row is in its topic, once (exactly_once) or at least once."""
    per_file, files = 200, 4
    old = _wait_in_sync(cluster)
    queries = {}

    def add(guarantee: str, k: int) -> None:  # written aside, then renamed: the file source never sees half a file
        part = tmp_path / f"{guarantee}-part-{k}.tmp"
        part.write_text("".join(json.dumps({"body": f"row-{k}-{i}"}) + "\n" for i in range(per_file)))
        part.rename(tmp_path / guarantee / f"part-{k}.json")

    def written(guarantee: str) -> int:
        q = queries[guarantee]
        if q.exception() is not None:
            raise AssertionError(f"the {guarantee} query failed: {q.exception()}")
        return sum(p["numInputRows"] for p in q.recentProgress)

    try:
        for g in GUARANTEES:
            (tmp_path / g).mkdir()
            add(g, 0)
            queries[g] = (spark.readStream.schema("body string").option("maxFilesPerTrigger", 1)
                          .json(str(tmp_path / g)).writeStream.format("rmq")
                          .option("namesrvAddr", cluster.namesrv).option("topic", _out_topic(g))
                          .option("deliveryGuarantee", g).option("brokerTimeoutMs", "120000")
                          .option("checkpointLocation", str(tmp_path / f"cp-{g}"))
                          .trigger(processingTime="500 milliseconds").start())
        wait_until(lambda: all(written(g) >= per_file for g in GUARANTEES), 240, "the first file of each stream")
        killed_at = time.time()
        cluster.kill(old, signal.SIGKILL)
        for g in GUARANTEES:
            for k in range(1, files):
                add(g, k)
        took = {}
        while len(took) < len(GUARANTEES):
            wait_until(lambda: any(written(g) >= files * per_file for g in GUARANTEES if g not in took), 240,
                       "every file written through the failover")
            took.update({g: time.time() - killed_at for g in GUARANTEES
                         if g not in took and written(g) >= files * per_file})
    finally:
        for q in queries.values():
            q.stop()
    cluster.start(old, wait=False)  # back, as a slave of the new master
    new = cluster.master("broker-a")
    assert new not in (None, old)
    want = sorted(f"row-{k}-{i}" for k in range(files) for i in range(per_file))

    def bodies(g: str) -> list[str]:
        rows = (spark.read.format("rmq").option("namesrvAddr", cluster.namesrv).option("topic", _out_topic(g))
                .load().select("body").collect())
        return sorted(bytes(r.body).decode() for r in rows)
    found = {}
    for g in GUARANTEES:
        wait_until(lambda: len(bodies(g)) >= len(want), 120, f"every row of the {g} stream readable")
        got = bodies(g)
        found[g] = (len(got) - len(set(got)), len(set(want) - set(got)))
        print(f"\ncontroller failover, writing ({g}): the files after the kill written within {took[g]:.1f} s; "
              f"duplicates {found[g][0]}, lost {found[g][1]}")
        assert set(got) == set(want), f"{g}: lost {found[g][1]}"
    assert found["exactly_once"] == (0, 0), f"exactly_once: duplicates {found['exactly_once'][0]}"
