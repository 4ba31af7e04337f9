"""A Spark stream through a stock 4.9.7 cluster's failover: broker-a is a master and a slave (brokerId 1,
slaveReadEnable=true), broker-b a master alone. broker-a's master is SIGKILLed mid-stream: rows keep arriving, from
broker-a's slave and from broker-b, without a restart of the query; the master is started again; the Parquet output
holds every message once and the group's offsets on the master reach the queue ends (commits made while it was away
are sent when it is back). The pause (seconds from the kill until broker-a's rows flow again) is printed, and
beside it the pause of a stock Java push consumer reading the same topic in the same run. A stream
writing into the cluster goes on to broker-b when broker-a's master dies, and every row lands once."""
from __future__ import annotations

import base64
import collections
import json
import signal
import threading
import time

import pytest
from failover_checks import at, group_offsets, max_offsets, read_from, written
from stock_peers import STOCK_4, StockClients, StockCluster, slave_of
from wire_cluster import wait_until

from rmq_client import MessageQueue, Producer, PullConsumer
from rmq_client.admin import Admin

TOPIC = "Failover"
GROUP = "failover-g"
QUEUES = 2
PER_QUEUE = 600  # messages in each queue of each broker
BROKERS = ("broker-a", "broker-b")
PACE_MS = 20  # the stock Java consumer's time per message: 2,400 messages take it ~50 s


@pytest.fixture(scope="module", params=["ASYNC_MASTER", "SYNC_MASTER"])
def cluster(request, tmp_path_factory):
    """broker-a: a master of the given role and its slave; broker-b: a master; stopped whatever happens."""
    root = tmp_path_factory.mktemp(f"failover-{request.param}")
    with StockCluster(STOCK_4, root, brokers=BROKERS, slaves={"broker-a": request.param}) as c:
        with Admin(c.namesrv) as admin:
            admin.create_topic("FailoverProbe", 1)
        _wait_replicating(c)
        yield c


def _wait_replicating(cluster: StockCluster) -> None:
    """A SYNC_MASTER answers sends SLAVE_NOT_AVAILABLE until its slave has connected for replication (at the
    cluster's start, and again after each restart of the master): returns once a probe topic's send to broker-a
    is answered SUCCESS."""
    with Producer(cluster.namesrv) as p:
        wait_until(lambda: p.send_batch("FailoverProbe", [b"probe"],
                                        queue=MessageQueue("FailoverProbe", "broker-a", 0)),
                   180, "broker-a's master replicating to its slave")


def _max_offsets(addr: str, topic: str = TOPIC) -> dict[int, int]:
    return max_offsets(addr, topic)


def _group_offsets(addr: str, group: str = GROUP) -> dict[int, int]:
    return group_offsets(addr, TOPIC, group, QUEUES)


def _send(namesrv: str) -> set[bytes]:
    sent: set[bytes] = set()
    with Producer(namesrv) as p:
        for broker in BROKERS:
            for q in range(QUEUES):
                bodies = [f"{broker}/{q}/{i}".encode() for i in range(PER_QUEUE)]
                for k in range(0, PER_QUEUE, 100):
                    p.send_batch(TOPIC, bodies[k:k + 100], queue=MessageQueue(TOPIC, broker, q))
                sent.update(bodies)
    return sent


class PacedJavaConsumer:
    """A stock DefaultMQPushConsumer of a group of its own, consuming PACE_MS a message with few messages cached,
    so that it is still pulling when a master dies; what it receives is read as it comes."""

    def __init__(self, cluster: StockCluster, group: str):
        self.proc = cluster.java().start("StockPushConsumer", cluster.namesrv, TOPIC, "900",
                                         f"{group}:tag:{10 ** 9}:first:*", env={"STOCK_CONSUMER_PACE_MS": str(PACE_MS)})
        self.got: list[tuple[float, str, bytes]] = []  # (received at, broker, body)
        self.errors: collections.deque[str] = collections.deque(maxlen=40)
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=lambda: self.errors.extend(self.proc.stderr), daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            if line.startswith("{") and '"receivedAt"' in line:
                m = json.loads(line)
                self.got.append((m["receivedAt"] / 1000, m["broker"], base64.b64decode(m["bodyBase64"])))

    def bodies(self) -> set[bytes]:
        if self.proc.poll() is not None:
            raise AssertionError(f"the stock Java consumer exited with {self.proc.returncode}: "
                                 f"{''.join(self.errors)[-2000:]}")
        return {body for _, _, body in list(self.got)}

    def received(self, broker: str) -> list[float]:
        return sorted(t for t, b, _ in list(self.got) if b == broker)

    def pause(self, broker: str, since: float) -> float:
        """Seconds from `since` to the first message of `broker` after the longest gap between its receipts
        from `since` on (the messages it had cached come first)."""
        points = [since] + [t for t in self.received(broker) if t >= since]
        gaps = [b - a for a, b in zip(points, points[1:])]
        return points[gaps.index(max(gaps)) + 1] - since

    def stop(self) -> None:
        StockClients.stop(self.proc)


def test_a_stream_reads_on_from_the_slave_while_the_master_is_killed_and_ends_with_every_message_once(
        spark, cluster, tmp_path):
    master, slave = cluster.addresses["broker-a"], cluster.addresses[slave_of("broker-a")]
    with Admin(cluster.namesrv) as admin:
        admin.create_topic(TOPIC, QUEUES)
    sent = _send(cluster.namesrv)
    ends = {i: PER_QUEUE for i in range(QUEUES)}
    # a send is answered once its record is in the commitlog; the consume queues are written just after
    wait_until(lambda: _max_offsets(master) == ends, 60, "broker-a's consume queues holding every message sent")
    wait_until(lambda: _max_offsets(slave) == ends, 180, "broker-a's slave holding every message of its master")

    out = str(tmp_path / "out")
    q = (spark.readStream.format("rmq").option("namesrvAddr", cluster.namesrv).option("topic", TOPIC)
         .option("consumerGroup", GROUP).option("startingOffsets", "earliest")
         .option("maxMessagesPerTrigger", "120").option("brokerTimeoutMs", "240000").load()
         .writeStream.format("parquet").option("path", out)
         .option("checkpointLocation", str(tmp_path / "cp")).trigger(processingTime="500 milliseconds").start())
    batches: dict[int, dict] = {}

    def seen() -> list[dict]:
        for p in q.recentProgress:
            batches[p["batchId"]] = p
        return [batches[b] for b in sorted(batches)]

    java = None
    try:
        wait_until(lambda: any(p["numInputRows"] > 0 for p in seen()), 240, "the stream's first rows")
        java = PacedJavaConsumer(cluster, GROUP + "-java")  # beside it: the stock consumer's pause in the same run
        wait_until(lambda: len(java.bodies()) and len(java.received("broker-a")) >= 16, 180,
                   "the stock Java consumer's first messages of broker-a")
        killed_at = time.time()
        cluster.kill("broker-a", signal.SIGKILL)
        dead_at = time.time()

        def planned_since_death(broker: str) -> list[dict]:
            """Batches planned with the master dead that read queues of `broker`."""
            return [p for p in seen() if at(p["timestamp"]) >= dead_at and read_from(p, TOPIC, broker) > 0]

        # both brokers' queues advance while the master is dead: broker-a's from its slave
        wait_until(lambda: planned_since_death("broker-a") and planned_since_death("broker-b"), 240,
                   "rows of broker-a (from its slave) and of broker-b with broker-a's master killed")
        assert q.exception() is None
        first = planned_since_death("broker-a")[0]
        pause = at(first["timestamp"]) + first["durationMs"]["triggerExecution"] / 1000 - killed_at
        print(f"\nfailover pause ({cluster.slaves['broker-a']}): {pause:.1f} s from the SIGKILL of broker-a's master "
              f"until a batch with its rows (from the slave) was written")

        cluster.start("broker-a")
        wait_until(lambda: sum(p["numInputRows"] for p in seen()) >= len(sent), 300, "every message read")
        wait_until(lambda: written(spark, q, out) >= len(sent), 120, "every message in the Parquet output")
        # the commits made while the master was away reach it: the group ends at the queue ends there
        wait_until(lambda: _group_offsets(master) == ends, 180, "the group's offsets at the queue ends on the master")
        wait_until(lambda: _group_offsets(cluster.addresses["broker-b"]) == {i: PER_QUEUE for i in range(QUEUES)},
                   60, "the group's offsets at the queue ends on broker-b")
        assert q.exception() is None
        wait_until(lambda: java.bodies() >= sent, 300, "every message at the stock Java consumer")
        print(f"stock Java push consumer's pause ({cluster.slaves['broker-a']}, same run): "
              f"{java.pause('broker-a', killed_at):.1f} s from the SIGKILL until broker-a's messages came again "
              "(its cached messages consumed first)")
    finally:
        q.stop()
        if java is not None:
            java.stop()
    bodies = [bytes(r.body) for r in spark.read.parquet(out).collect()]
    duplicates = len(bodies) - len(set(bodies))
    lost = len(sent - set(bodies))
    assert (duplicates, lost) == (0, 0), f"duplicates {duplicates}, lost {lost}"
    assert set(bodies) == sent


def test_starting_offsets_group_with_the_master_away_starts_at_the_slaves_copy_and_commits_reach_the_master(
        spark, cluster, tmp_path):
    """A group at the queue ends on the master; more messages arrive, the slave copies them and the group's
    offsets; the master is killed; a query of the group with startingOffsets=group starts where the slave's copy
    says and reads only the new messages; its commits wait for the master and reach it once it is back."""
    group = "failover-start-g"
    master, slave = cluster.addresses["broker-a"], cluster.addresses[slave_of("broker-a")]
    cluster.ensure_running("broker-a")
    with Admin(cluster.namesrv) as admin:
        admin.create_topic(TOPIC, QUEUES)
    with PullConsumer(cluster.namesrv, group) as c:
        wait_until(lambda: len(c.queues(TOPIC)) == 2 * QUEUES, 60, "the topic's queues on both brokers")
        for mq in c.queues(TOPIC):
            c.commit_offset(mq, c.max_offset(mq))
    before = _max_offsets(master)
    assert _group_offsets(master, group) == before
    new: set[bytes] = set()
    with Producer(cluster.namesrv) as p:
        for q in range(QUEUES):
            bodies = [f"broker-a/{q}/more-{i}".encode() for i in range(50)]
            p.send_batch(TOPIC, bodies, queue=MessageQueue(TOPIC, "broker-a", q))
            new.update(bodies)
    ends = {q: before[q] + 50 for q in range(QUEUES)}  # the consume queues are written just after a send's answer
    wait_until(lambda: _max_offsets(master) == ends, 60, "the master's consume queues holding the new messages")
    wait_until(lambda: _max_offsets(slave) == ends, 180, "the slave holding the new messages")
    wait_until(lambda: _group_offsets(slave, group) == before, 180, "the slave's copy of the group's offsets")
    cluster.kill("broker-a", signal.SIGKILL)

    out = str(tmp_path / "out")
    q = (spark.readStream.format("rmq").option("namesrvAddr", cluster.namesrv).option("topic", TOPIC)
         .option("consumerGroup", group).option("startingOffsets", "group").option("brokerTimeoutMs", "240000")
         .load().writeStream.format("parquet").option("path", out)
         .option("checkpointLocation", str(tmp_path / "cp")).trigger(processingTime="500 milliseconds").start())
    try:
        wait_until(lambda: written(spark, q, out) >= len(new), 240, "the new messages, from the slave")
        assert _group_offsets(slave, group) == before  # a slave never takes the query's commits
        cluster.start("broker-a")
        wait_until(lambda: _group_offsets(master, group) == ends, 180,
                   "the query's commits on the master once it is back")
        assert q.exception() is None
    finally:
        q.stop()
    bodies = [bytes(r.body) for r in spark.read.parquet(out).collect()]
    assert sorted(bodies) == sorted(new), "only the new messages, each once"


def test_a_stream_writing_into_the_cluster_goes_on_to_broker_b_when_broker_a_master_dies_and_lands_every_row_once(
        spark, cluster, tmp_path):
    """A stream from JSON files into the cluster (at_least_once with the ASYNC_MASTER cluster, exactly_once with
    the SYNC_MASTER one); broker-a's master SIGKILLed after the first batch: the next batches' sends move to
    broker-b without a failed query; once the master is back, the topic holds every row once."""
    topic, per_file, files = "FailoverOut", 200, 4
    guarantee = "at_least_once" if cluster.slaves["broker-a"] == "ASYNC_MASTER" else "exactly_once"
    cluster.ensure_running("broker-a")
    _wait_replicating(cluster)  # the tests before this one restarted broker-a's master
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
         .option("deliveryGuarantee", guarantee).option("brokerTimeoutMs", "240000")
         .option("checkpointLocation", str(tmp_path / "cp")).trigger(processingTime="500 milliseconds").start())
    try:
        wait_until(lambda: written() >= per_file, 240, "the first file written into the cluster")
        cluster.kill("broker-a", signal.SIGKILL)
        for k in range(1, files):
            add(k)
        wait_until(lambda: written() >= files * per_file, 240, "every file written with broker-a's master dead")
        assert q.exception() is None
    finally:
        q.stop()
    cluster.start("broker-a")
    want = sorted(f"row-{k}-{i}" for k in range(files) for i in range(per_file))

    def bodies() -> list[str]:
        rows = (spark.read.format("rmq").option("namesrvAddr", cluster.namesrv).option("topic", topic)
                .load().select("body").collect())
        return sorted(bytes(r.body).decode() for r in rows)
    wait_until(lambda: len(bodies()) >= len(want), 180, "every row readable once broker-a's master is back")
    got = bodies()
    duplicates, lost = len(got) - len(set(got)), len(set(want) - set(got))
    assert (duplicates, lost) == (0, 0), f"{guarantee}: duplicates {duplicates}, lost {lost}"
    assert got == want


@pytest.mark.parametrize("cluster", ["SYNC_MASTER"], indirect=True)
def test_writes_with_broker_a_slave_away_commit_only_what_the_sync_master_replicated(spark, cluster, tmp_path):
    """broker-a's slave SIGKILLed: its SYNC_MASTER then stores sends without replicating them (SLAVE_NOT_AVAILABLE).
    An at_least_once write takes the master's answer as sent, as the Java producer does: every row once, broker-a's
    on broker-a. An exactly_once write rolls back the halves broker-a could not replicate and sends them to
    broker-b: every row once, none on broker-a. A row with a queue_id on broker-a cannot move: exactly_once fails
    it after brokerTimeoutMs, naming SLAVE_NOT_AVAILABLE."""
    cluster.ensure_running("broker-a")
    _wait_replicating(cluster)  # the tests before this one restarted broker-a's master
    rows = 300
    # at_least_once first: exactly_once's refused sends leave broker-a out of the Python workers' sends for 30 s
    topics = {"at_least_once": "NoSlaveAtLeast", "exactly_once": "NoSlaveExactly"}
    with Admin(cluster.namesrv) as admin:
        for topic in topics.values():
            admin.create_topic(topic, QUEUES)
    master = cluster.addresses["broker-a"]
    df = spark.range(rows).selectExpr("cast(concat('row-', id) as binary) as body").repartition(2)

    def write(frame, topic: str, guarantee: str, timeout_ms: int = 240000) -> None:
        (frame.write.format("rmq").option("namesrvAddr", cluster.namesrv).option("topic", topic)
         .option("deliveryGuarantee", guarantee).option("brokerTimeoutMs", str(timeout_ms)).mode("append").save())

    cluster.kill(slave_of("broker-a"), signal.SIGKILL)
    try:
        for guarantee, topic in topics.items():
            write(df, topic, guarantee)
            got = sorted(bytes(r.body).decode() for r in spark.read.format("rmq")
                         .option("namesrvAddr", cluster.namesrv).option("topic", topic).load().select("body").collect())
            assert got == sorted(f"row-{i}" for i in range(rows)), f"{guarantee}: every row once"
            on_a = sum(_max_offsets(master, topic).values())
            if guarantee == "exactly_once":
                assert on_a == 0, f"{on_a} of broker-a's unreplicated halves committed"
            else:
                assert on_a > 0, "at_least_once: broker-a took no row though it stores and answers"
        fixed = df.limit(5).selectExpr("body", "0 as queue_id")  # queue 0 numbered across brokers: broker-a's
        with pytest.raises(Exception, match="SLAVE_NOT_AVAILABLE"):
            write(fixed, topics["exactly_once"], "exactly_once", timeout_ms=4000)
    finally:
        cluster.start(slave_of("broker-a"))
    _wait_replicating(cluster)
