"""Our store opened by a stock Apache RocketMQ 4.9 broker, and a stock broker's store read by ours.

A store written by MessageStore (plain puts, batches, an atomic batch, several topics and queues, keys, properties,
file roll-overs, delayed messages, a group's offsets, a writer killed in the middle of a batch) is copied twice: as
our own recovery left it after a reopen (no abort file: the stock broker recovers "normally") and as the killed
writer left it (abort file present, the last batch not dispatched: the stock broker recovers "abnormally"). Stock
brokers open both copies; the stock Java client is the oracle. The other way, a store a third stock broker wrote
is read by format("rmq").option("path", ...) and `rmq check`."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from stock_peers import STOCK_4, StockCluster
from wire_cluster import WireCluster

from rmq_broker.schedule_message_service import ScheduleMessageService
from rmq_client import Producer
from store import MessageStore, OffsetStore, StoreConfig

# Small files, so the store spans several commitlog and consume-queue files as a busy broker's does; one level
# long enough to tell "delivered when due" from "delivered at the broker's start" (the brokers boot well within it,
# which the test checks: 3-14 s after the store is written, on a loaded 2-core machine), and no longer than the
# module's other tests take, which run while it comes due.
LATE_S = 45
LEVELS = f"1s 2s {LATE_S}s"
# Small index files too (RocketMQ's default file is 420 MB), the same for our stores and the stock brokers.
SIZES = dict(mappedFileSizeCommitLog=64 * 1024, mappedFileSizeConsumeQueue=20 * 100, maxHashSlotNum=1000,
             maxIndexNum=4000)
CFG = StoreConfig(**SIZES, messageDelayLevel=LEVELS)
BROKER_CONF = {**{k: str(v) for k, v in SIZES.items()}, "messageDelayLevel": LEVELS}
GROUP = "resume-group"
GROUP_OFFSETS = {0: 10, 1: 25, 2: 0, 3: 40}  # the group's progress on topic Plain, as our OffsetStore keeps it
OUR_TOPICS = ("Plain", "Batch", "Big", "Later", "Tail")
CLEAN, CRASH, STOCK = "ours-clean", "ours-crash", "stock"

# A writer killed between a batch's commitlog bytes and its consume-queue units: the batch is complete in the log
# but nobody acknowledged it or dispatched it.
DIE_IN_DISPATCH = """
import os, sys
import store.consume_queue
from store import MessageStore, StoreConfig
s = MessageStore(sys.argv[1], StoreConfig(**json.loads(sys.argv[2])))
s.put_batch("Tail", [b"acked-%d" % i for i in range(20)], tags="t", keys=["tail"] * 20)
def dying(writes, units):
    os._exit(9)
store.consume_queue.write_units = dying
s.put_batch("Tail", [b"unacked-%d" % i for i in range(7)], tags="u")
"""


def _write_our_store(path: str) -> dict:
    """Everything a user's MessageStore puts; returns what the test needs to know (the delayed messages)."""
    with MessageStore(path, CFG) as s:
        s.create_topic("Plain", 4)
        for i in range(240):
            s.put("Plain", f"plain-{i}".encode(), tags="odd" if i % 2 else "even", keys=[f"k{i}", "all"],
                  properties={"n": str(i), "text": "a b=c"}, queue_id=i % 4)
        s.create_topic("Batch", 3)
        s.put_batch("Batch", [b"batch-%d" % i for i in range(300)], tags=["x", "y", None] * 100,
                    keys=[[f"b{i}"] for i in range(300)], properties=[{"i": str(i)} for i in range(300)])
        s.put_batch("Batch", [b"atomic-%d" % i for i in range(30)], tags="atomic", atomic=True)
        s.create_topic("Big", 2)
        for i in range(12):  # 20 KB bodies: three to a 64 KiB file, the rest of each file a blank record
            s.put("Big", bytes([i]) * 20_000, tags="big", properties={"i": str(i)})
        offsets = OffsetStore(path, GROUP)
        for q, off in GROUP_OFFSETS.items():
            offsets.update_offset(("Plain", q), off)
        offsets.persist_all()
        s.create_topic("Later", 1)
        schedule = ScheduleMessageService(s, LEVELS)
        schedule.schedule("Later", 0, b"due-soon", {"which": "soon"}, 1)
        schedule.schedule("Later", 0, b"due-late", {"which": "late"}, 3)
        # our schedule service delivers the first one (its store time + 1 s has passed by then) and records
        # the level's progress in config/delayOffset.json: a stock broker must not deliver it again
        time.sleep(1.2)
        assert schedule.deliver_due(1) == 1
        schedule.persist()
        late = s.get_message("t", "SCHEDULE_TOPIC_XXXX", 2, 0).messages[0]
    return {"late_store_ts": late.store_timestamp}


def _our_messages(path: str, topics=OUR_TOPICS) -> list[dict]:
    """Every message of the topics as our store reads it, in the stock client's field names."""
    out = []
    with MessageStore(path, CFG, read_only=True) as s:
        for topic in topics:
            for q in s.queues(topic):
                offset = 0
                while offset < s.max_offset(topic, q):  # a get answers at most 32 messages, as a broker's pull
                    got = s.get_message("t", topic, q, offset, 32)
                    out += [_fields(m) for m in got.messages]
                    offset = got.next_begin_offset
    return out


def _fields(m) -> dict:
    return {"topic": m.topic, "queueId": m.queue_id, "queueOffset": m.queue_offset,
            "commitLogOffset": m.commit_log_offset, "offsetMsgId": m.msg_id, "tags": m.tags,
            "keys": " ".join(m.keys) if m.keys else None, "properties": dict(m.properties), "body": m.body,
            "bornTimestamp": m.born_timestamp, "storeTimestamp": m.store_timestamp, "bornHost": m.born_host,
            "storeHost": m.store_host, "sysFlag": m.sys_flag, "reconsumeTimes": m.reconsume_times,
            "bodyCRC": m.body_crc, "preparedTransactionOffset": m.prepared_transaction_offset}


def _java_fields(j: dict) -> dict:
    """A stock client's message in _fields' shape (the broker adds MIN_OFFSET and MAX_OFFSET to what it serves)."""
    import base64
    props = {k: v for k, v in j["properties"].items() if k not in ("MIN_OFFSET", "MAX_OFFSET")}
    return {"topic": j["topic"], "queueId": j["queueId"], "queueOffset": j["queueOffset"],
            "commitLogOffset": j["commitLogOffset"], "offsetMsgId": j["offsetMsgId"], "tags": j.get("tags"),
            "keys": j.get("keys"), "properties": props, "body": base64.b64decode(j["bodyBase64"]),
            "bornTimestamp": j["bornTimestamp"], "storeTimestamp": j["storeTimestamp"], "bornHost": j["bornHost"],
            "storeHost": j["storeHost"], "sysFlag": j["sysFlag"], "reconsumeTimes": j["reconsumeTimes"],
            "bodyCRC": j["bodyCRC"], "preparedTransactionOffset": j["preparedTransactionOffset"]}


def _key(m: dict) -> tuple:
    return m["topic"], m["queueId"], m["queueOffset"]


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("our-store")
    live = str(root / "store")
    info = _write_our_store(live)
    code = "import json\n" + DIE_IN_DISPATCH
    done = subprocess.run([sys.executable, "-c", code, live, json.dumps(SIZES | {"messageDelayLevel": LEVELS})],
                          capture_output=True, timeout=120)
    assert done.returncode == 9, done.stderr.decode()
    crash = str(root / "crash")
    shutil.copytree(live, crash)  # as the killed writer left it: abort file, undispatched batch
    assert os.path.exists(os.path.join(crash, "abort"))
    with MessageStore(live, CFG):
        pass  # our recovery dispatches the killed writer's complete batch; the close removes the abort file
    assert not os.path.exists(os.path.join(live, "abort"))
    expected = _our_messages(live)
    tail = [m["body"] for m in expected if m["topic"] == "Tail"]
    assert sorted(tail) == sorted([b"acked-%d" % i for i in range(20)] + [b"unacked-%d" % i for i in range(7)])
    return {"clean": live, "crash": crash, "expected": expected, **info}


@pytest.fixture(scope="module")
def cluster(stores, tmp_path_factory):
    c = StockCluster(STOCK_4, tmp_path_factory.mktemp("stock-store"), brokers=(CLEAN, CRASH, STOCK), conf=BROKER_CONF)
    shutil.copytree(stores["clean"], c.store(CLEAN))
    shutil.copytree(stores["crash"], c.store(CRASH))
    with c:  # the three brokers boot together
        yield c


def _broker_log(c: StockCluster, name: str) -> str:
    with open(os.path.join(c.root, name, "broker.log"), errors="replace") as f:
        return f.read()


def _pull(c: StockCluster, topics, broker: str) -> list[dict]:
    rows = c.java().run("StockStoreClient", "pull", c.namesrv, ",".join(topics), timeout=180)
    return [r for r in rows if r["broker"] == broker]


@pytest.fixture(scope="module")
def served(cluster) -> list[dict]:
    """What the stock Java client pulls of our topics from both brokers that opened our store (one run)."""
    topics = [t for t in OUR_TOPICS if t != "Later"]  # Later grows when the stock broker delivers (below)
    return cluster.java().run("StockStoreClient", "pull", cluster.namesrv, ",".join(topics), timeout=180)


@pytest.mark.parametrize("broker,recovery", [(CLEAN, "normally"), (CRASH, "abnormally")])
def test_a_stock_broker_serves_every_message_of_our_store_with_equal_fields(stores, cluster, served, broker,
                                                                            recovery):
    assert f"last shutdown {recovery}" in _broker_log(cluster, broker)
    got = sorted((_java_fields(j) for j in served if j["broker"] == broker), key=_key)
    want = sorted((m for m in stores["expected"] if m["topic"] != "Later"), key=_key)
    assert len(got) == len(want) == 240 + 330 + 12 + 27
    for g, w in zip(got, want):
        assert g == w, (g, w)


def test_a_group_resumes_at_the_offsets_our_store_kept(cluster):
    offsets = cluster.java().run("StockStoreClient", "offsets", cluster.namesrv, GROUP, "Plain")
    assert {(o["queueId"], o["offset"]) for o in offsets if o["max"] == 60} == set(GROUP_OFFSETS.items())
    remaining = 2 * sum(60 - off for off in GROUP_OFFSETS.values())  # on both brokers that opened our store
    got = cluster.java().consume("Plain", remaining, GROUP, timeout=90)
    assert sorted((m["broker"], m["queueId"], m["queueOffset"]) for m in got) == sorted(
        (b, q, off) for b in (CLEAN, CRASH) for q, start in GROUP_OFFSETS.items() for off in range(start, 60))


def _mqadmin(c: StockCluster, *args: str) -> list[tuple[str, int, int]]:
    """rocketmq-tools' mqadmin (MQAdminStartup) as a process; the (msgId, queue id, queue offset) rows it prints."""
    from stock_peers import _logback_home
    _logback_home(STOCK_4, "tools")  # MQAdminStartup reads $ROCKETMQ_HOME/conf/logback_tools.xml
    cmd = c.java().command("org.apache.rocketmq.tools.command.MQAdminStartup", *args, "-n", c.namesrv)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, start_new_session=True)
    assert done.returncode == 0 and "#Message ID" in done.stdout, done.stdout + done.stderr[-2000:]
    rows = [line.split() for line in done.stdout.splitlines()[done.stdout.splitlines().index(
        next(x for x in done.stdout.splitlines() if x.startswith("#Message ID"))) + 1:] if line.strip()]
    return [(r[0], int(r[1]), int(r[2])) for r in rows]


def test_a_stock_broker_answers_query_msg_by_key_from_the_index_we_wrote(stores, cluster):
    """Two brokers opened copies of our store: the clean one recovers normally and keeps our index as it is (the
    crashed one drops index files newer than the checkpoint's indexMsgTimestamp, as RocketMQ's abnormal start
    does, and indexes only what it re-dispatches). mqadmin queryMsgByKey finds a put's key, a batch's key and the
    killed writer's acknowledged batch."""
    uniq = {m["body"]: m["properties"]["UNIQ_KEY"] for m in stores["expected"]}
    rows = _mqadmin(cluster, "queryMsgByKey", "-t", "Plain", "-k", "k7")
    assert set(rows) == {(uniq[b"plain-7"], 3, 1)}
    rows = _mqadmin(cluster, "queryMsgByKey", "-t", "Batch", "-k", "b123")
    assert {r[0] for r in rows} == {uniq[b"batch-123"]}
    rows = _mqadmin(cluster, "queryMsgByKey", "-t", "Tail", "-k", "tail")
    assert {r[0] for r in rows} == {uniq[b"acked-%d" % i] for i in range(20)}


def test_a_store_a_stock_broker_wrote_is_read_by_ours(spark, cluster, tmp_path):
    java = cluster.java()
    java.run("StockStoreClient", "topic", cluster.namesrv, STOCK, "FromStock", "2")  # on that broker alone
    messages = [{"topic": "FromStock", "tags": f"t{i % 3}", "keys": f"s{i} common", "props": {"i": str(i)},
                 "body": f"single-{i}", "queue": {"broker": STOCK, "id": i % 2}} for i in range(40)]
    messages.append({"batch": [{"topic": "FromStock", "tags": "batch", "keys": f"b{i}", "props": {"j": str(i)},
                                "body": f"batch-{i}"} for i in range(25)]})
    sent = java.produce(messages)
    java.run("StockStoreClient", "delayed", cluster.namesrv, "stock-delayed", timeout=120, input_lines=[
        {"topic": "FromStock", "tags": "later", "body": "delayed-1", "level": 1, "props": {"d": "1"}}])
    deadline = time.time() + 60
    while True:
        oracle = _pull(cluster, ["FromStock"], STOCK)
        if len(oracle) == 66 or time.time() > deadline:
            break
        time.sleep(2)
    assert len(oracle) == 66
    _same_answers_from_rmq_serve_and_the_stock_broker(cluster, messages, sent, tmp_path)
    cluster.kill(STOCK, signal.SIGTERM)  # a clean stop: the broker flushes its files and removes its abort file
    path = cluster.store(STOCK)
    assert os.path.isdir(os.path.join(path, "index")) and os.path.exists(os.path.join(path, "config", "topics.json"))
    rows = spark.read.format("rmq").option("path", path).option("topic", "FromStock").load().collect()
    got = sorted(({"topic": r.topic, "queueId": r.queue_id, "queueOffset": r.queue_offset,
                   "commitLogOffset": r.commit_log_offset, "offsetMsgId": r.msg_id, "tags": r.tags,
                   "keys": " ".join(r["keys"]) if r["keys"] else None, "properties": dict(r.properties),
                   "body": bytes(r.body), "bornTimestamp": _ms(r.born_timestamp),
                   "storeTimestamp": _ms(r.store_timestamp), "bornHost": r.born_host, "storeHost": r.store_host,
                   "sysFlag": r.sys_flag, "reconsumeTimes": r.reconsume_times} for r in rows), key=_key)
    want = sorted(({k: v for k, v in _java_fields(j).items() if k not in ("bodyCRC", "preparedTransactionOffset")}
                   for j in oracle), key=_key)
    assert len(got) == len(want) == 66
    for g, w in zip(got, want):
        assert g == w, (g, w)
    with MessageStore(path, CFG, read_only=True) as s:  # the stock broker's index, queried by ours
        assert [m.body for m in s.query_message("FromStock", "s7")] == [b"single-7"]
        assert len(s.query_message("FromStock", "common")) == 40
        assert [m.body for m in s.query_message("FromStock", "b3")] == [b"batch-3"]
        assert s.query_message_by_unique_key("FromStock", sent[5]["msgId"]).body == b"single-5"
        assert s.view_message_by_offset_id(sent[6]["offsetMsgId"]).body == b"single-6"
    conf = tmp_path / "store.conf"  # the broker's geometry: its index files are read with it
    conf.write_text("".join(f"{k}={v}\n" for k, v in SIZES.items()))
    found = subprocess.run([sys.executable, "-m", "rmq_cli", "--store", path, "--config", str(conf), "query",
                            "--topic", "FromStock", "--key", "s7", "--json"], capture_output=True, text=True,
                           timeout=120)  # mqadmin queryMsgByKey's question, answered by ours
    assert found.returncode == 0 and [json.loads(x)["body"] for x in found.stdout.splitlines()] == ["single-7"], \
        found.stdout + found.stderr
    check = subprocess.run([sys.executable, "-m", "rmq_cli", "--store", path, "check", "--json"],
                           capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr


def _same_answers_from_rmq_serve_and_the_stock_broker(cluster, messages, sent, tmp_path) -> None:
    """The stock admin client's queryMessage and viewMessage (by client msgId and by offset msgId) against the stock
    broker and against `rmq serve` given the same messages by the stock producer, all in one JVM."""
    with WireCluster(tmp_path / "serve", brokers=("broker-a",)) as serve:
        with Producer(serve.namesrv) as p:
            p.create_topic("FromStock", 2)
            # a message whose UNIQ_KEY our store generated: the Java client searches from the time in it
            ours = p.send("FromStock", b"from-python", keys=["py"])
            from rmq_client.event_loop import run_blocking
            ours_uniq = run_blocking(p.aio.api.view_message, ours.msg_id).properties["UNIQ_KEY"]
        lines: list[dict] = [{"namesrv": serve.namesrv, "kind": "send", "message": {
            k: v for k, v in m.items() if k != "queue"}} for m in messages]  # rmq serve has one broker
        for ns, ids in ((cluster.namesrv, sent), (serve.namesrv, None)):
            lines += [{"namesrv": ns, "kind": "key", "topic": "FromStock", "key": k, "maxNum": 64, "begin": b,
                       "end": 2**63 - 1} for k, b in (("s7", 0), ("common", 0), ("b3", 0), ("s7", 4 * 10**12))]
            for kind, k, item in (("uniq", 5, 0), ("uniq", 40, 3), ("offset", 6, 0)):
                q = {"namesrv": ns, "kind": kind, "topic": "FromStock"}
                if ids is None:
                    q.update({"send": k, "item": item})
                else:
                    q["msgId"] = ids[k]["offsetMsgId"] if kind == "offset" else ids[k]["msgId"].split(",")[item]
                lines.append(q)
        lines.append({"namesrv": serve.namesrv, "kind": "uniq", "topic": "FromStock", "msgId": ours_uniq})
        out = cluster.java().run("StockQuery", input_lines=lines, timeout=240)
    assert len(out) == len(lines), out[-3:]
    assert all(o.get("status") == "SEND_OK" for o in out[:len(messages)]), out[:len(messages)]
    answers, last = out[len(messages):-1], out[-1]
    assert [m["body"] for m in last.get("messages", [])] == ["from-python"], last
    # nothing found: the client throws MQClientException NO_MESSAGE (208), from either broker
    bodies = [sorted(m["body"] for m in a["messages"]) if "messages" in a else
              "208" if "CODE: 208" in a["error"] else a["error"] for a in answers]
    half = len(bodies) // 2
    assert bodies[:half] == bodies[half:], (bodies[:half], bodies[half:])  # the stock broker's == ours
    assert bodies[:half] == [["single-7"], sorted(f"single-{i}" for i in range(40)), ["batch-3"], "208",
                             ["single-5"], ["batch-3"], ["single-6"]]


def _ms(ts) -> int:
    return round(ts.timestamp() * 1000)  # PySpark hands timestamps over as naive local datetimes


def test_delayed_messages_are_delivered_once_and_when_due(stores, cluster):
    """Our delayOffset.json says level 1 was delivered (no second copy); the level-3 message is delivered by the
    stock broker no earlier than its store time + LATE_S, read from the consume-queue unit's tagsCode. Last in the
    module: the tests before it run while the level-3 message comes due (LATE_S after the stores fixture)."""
    due = stores["late_store_ts"] / 1000 + LATE_S
    # a broker that delivered it at its start would have stamped it before it was due: detected only if the
    # brokers were up before then
    assert cluster.booted_at < due, f"the stock brokers booted {cluster.booted_at - due:.1f} s after it was due"
    # no pulls (a JVM each) before the message is due
    time.sleep(max(0.0, due - time.time()))
    deadline = time.time() + 120
    while True:
        later = cluster.java().run("StockStoreClient", "pull", cluster.namesrv, "Later")
        if sum(j["properties"].get("which") == "late" for j in later) == 2 or time.time() > deadline:
            break
        time.sleep(3)
    for broker in (CLEAN, CRASH):
        mine = [j for j in later if j["broker"] == broker]
        assert sorted(j["properties"]["which"] for j in mine) == ["late", "soon"], mine
        late = next(j for j in mine if j["properties"]["which"] == "late")
        assert late["storeTimestamp"] >= stores["late_store_ts"] + LATE_S * 1000
        assert late["properties"]["REAL_TOPIC"] == "Later" and late["bodyBase64"] == "ZHVlLWxhdGU="
