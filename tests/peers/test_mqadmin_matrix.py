"""RocketMQ's admin tool (mqadmin of rocketmq-tools 4.9.7, run through MQAdminStartup as operators run it) against
a stock 4.9.7 name server and brokers (the session's cluster) and against `rmq serve` (two brokers as well), each
command on both with the same data: what it prints is parsed and compared where it does not depend on time or
addresses. One JVM runs every command (mqadmin_driver). The module's topics live on broker-a only."""
from __future__ import annotations

import dataclasses
import json
import os
import re
from dataclasses import dataclass

import pytest
from mqadmin_driver import MQAdmin, Printed
from stock_peers import CLUSTER, STOCK_4
from wire_cluster import PULL_LIMITS, WireCluster, wait_until

from remoting import RemotingCommand, RequestCode, ResponseCode
from remoting import remoting_serializable as rs
from remoting.blocking_client import BlockingRemotingClient
from rmq_broker.broker_config import BrokerConfig
from rmq_client import MessageQueue, Producer, PullConsumer
from rmq_common import message_codec as codec

TOPIC = "AdmTopic"
BROKER, OTHER = "broker-a", "broker-b"
# the session's 4.9.7 cluster; its id as conftest's, so that these tests are in that version's work unit (one worker
# boots the cluster once: tests/conftest.py's unit_of)
pytestmark = pytest.mark.parametrize("stock_version", [STOCK_4], indirect=True, ids=[f"rocketmq-{STOCK_4}"])
LOCALHOST = bytes([127, 0, 0, 1])
# (queue, tags, keys) of the messages both brokers get, in order
MESSAGES = [(0, "TagA", "k0 shared"), (0, "TagB", "k1"), (0, "TagA", "k2 shared"), (1, "TagA", "k3"), (1, "TagB", "k4")]


@dataclass
class Side:
    name: str
    namesrv: str
    broker: str  # broker-a's address
    other: str  # broker-b's
    store: str
    uniq_keys: list  # UNIQ_KEY (msgId) of each of MESSAGES as sent
    offset_ids: list  # the offset msgId of each
    puts_before: int = 0  # brokerStatus' msgPutTotalTodayNow before MESSAGES (the stock broker serves the session)


@pytest.fixture(scope="module")
def matrix(stock_cluster, tmp_path_factory):
    root = tmp_path_factory.mktemp("mqadmin")
    admin = MQAdmin(STOCK_4, root)  # boots while our brokers do
    try:
        stock = stock_cluster
        for name in (BROKER, OTHER):
            stock.ensure_running(name)
        with WireCluster(root / "ours", brokers=(BROKER, OTHER),
                         conf=PULL_LIMITS + f"brokerClusterName = {CLUSTER}\n") as ours:
            sides = [Side("stock", stock.namesrv, stock.addresses[BROKER], stock.addresses[OTHER], stock.store(BROKER),
                          [], []),
                     Side("ours", ours.namesrv, ours.addresses[BROKER], ours.addresses[OTHER], ours.store(BROKER),
                          [], [])]
            for side in sides:
                _admin(admin, side, "updateTopic", "-b", side.broker, "-t", TOPIC, "-r", "2", "-w", "2")
                status = _admin(admin, side, "brokerStatus", "-b", side.broker).out
                side.puts_before = int(_fields(status)["msgPutTotalTodayNow"])
                with Producer(side.namesrv) as p:
                    for q, tags, keys in MESSAGES:
                        uniq = codec.new_uniq_keys(1, LOCALHOST)[0].as_py()  # as the Java client makes them
                        r = p.send(TOPIC, f"body {keys}".encode(), tags=tags, keys=keys.split(),
                                   properties={"UNIQ_KEY": uniq}, queue=MessageQueue(TOPIC, BROKER, q))
                        side.uniq_keys.append(uniq)
                        side.offset_ids.append(r.msg_id)
            yield admin, sides
    finally:
        print(f"mqadmin: {admin.spent_ms} ms in its commands")
        admin.close()


def _admin(admin: MQAdmin, side: Side, command: str, *args: str) -> Printed:
    return admin(command, "-n", side.namesrv, *args)


def _both(matrix, command: str, *args: str) -> dict[str, str]:
    """The command on both sides; what each printed with its broker address as ADDR. A stack trace fails."""
    admin, sides = matrix
    out = {}
    for side in sides:
        printed = _admin(admin, side, command, *[a.replace("{ADDR}", side.broker) for a in args])
        assert "Exception" not in printed.err, f"{side.name}: mqadmin {command} {args}:\n{printed.err[-3000:]}"
        out[side.name] = printed.out.replace(side.broker, "ADDR").replace(side.other, "ADDR_B")
    return out


def _rows(text: str, first: str) -> list[list[str]]:
    """The whitespace-separated rows of a table after its header line (starting with `first`)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(first))
    rows = []
    for line in lines[start + 1:]:
        if not line.strip():
            break
        rows.append(line.split())
    return rows


def _lines(text: str) -> list[str]:
    return sorted(line for line in text.splitlines() if line.strip())


def _fields(text: str) -> dict[str, str]:
    """'Name:   value' lines (printMsg, brokerStatus) as a dict."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^([A-Za-z][A-Za-z0-9 ]*?)\s*:\s+(.*)$", line)
        if m:
            out.setdefault(m.group(1).strip(), m.group(2).strip())
    return out


def _ask(side: Side, code: int, fields: dict | None = None) -> RemotingCommand:
    with BlockingRemotingClient(side.broker, connect_timeout=5) as c:
        return c.invoke(RemotingCommand.request(code, fields or {}), 10)


def test_update_topic_topic_list_route_and_status(matrix):
    out = _both(matrix, "updateTopic", "-b", "{ADDR}", "-t", "AdmOther", "-r", "3", "-w", "3")
    assert out["ours"] == out["stock"]
    assert "create topic to ADDR success." in out["ours"] and "readQueueNums=3, writeQueueNums=3" in out["ours"]

    listed = _both(matrix, "topicList")
    for name, text in listed.items():
        assert {TOPIC, "AdmOther"} <= set(text.split()), name

    routes = {k: rs.decode(v.encode()) for k, v in _both(matrix, "topicRoute", "-t", TOPIC).items()}
    for route in routes.values():
        for b in route["brokerDatas"]:
            b["brokerAddrs"] = sorted(b["brokerAddrs"])
    assert routes["ours"] == routes["stock"]
    assert routes["ours"]["queueDatas"] == [{"brokerName": BROKER, "perm": 6, "readQueueNums": 2,
                                             "topicSysFlag": 0, "writeQueueNums": 2}]

    status = _both(matrix, "topicStatus", "-t", TOPIC)
    rows = {k: [r[:4] for r in _rows(v, "#Broker Name")] for k, v in status.items()}
    assert rows["ours"] == rows["stock"] == [[BROKER, "0", "0", "3"], [BROKER, "1", "0", "2"]]
    for text in status.values():  # the last message's store time, to the second
        assert all(len(r) == 6 for r in _rows(text, "#Broker Name")), text


def test_cluster_list_broker_status_and_broker_config(matrix):
    clusters = _both(matrix, "clusterList")
    rows = {k: [r[:5] for r in _rows(v, "#Cluster Name")] for k, v in clusters.items()}
    assert rows["ours"] == rows["stock"] == [[CLUSTER, BROKER, "0", "ADDR", "V4_9_7"],
                                             [CLUSTER, OTHER, "0", "ADDR_B", "V4_9_7"]]

    status = {k: _fields(v) for k, v in _both(matrix, "brokerStatus", "-b", "{ADDR}").items()}
    missing = sorted(set(status["stock"]) - set(status["ours"]))
    # the runtime figures this broker keeps are named as RocketMQ names them; docs/compatibility.md lists the ones
    # it has not
    assert not set(status["ours"]) - set(status["stock"]), sorted(set(status["ours"]) - set(status["stock"]))
    for key in ("brokerVersionDesc", "brokerVersion", "commitLogMinOffset"):
        assert status["ours"][key] == status["stock"][key], key
    _, sides = matrix  # earlier modules' tests send to the stock broker too: the puts counted since the fixture's
    puts = {side.name: int(status[side.name]["msgPutTotalTodayNow"]) - side.puts_before for side in sides}
    assert puts["ours"] == puts["stock"] >= len(MESSAGES), puts
    assert len(status["ours"]) >= 25, missing
    print("brokerStatus keys only stock has:", missing)

    configs = {}
    for name, text in _both(matrix, "getBrokerConfig", "-b", "{ADDR}").items():
        configs[name] = dict(line.split(" = ", 1) for line in text.splitlines() if " = " in line)
        configs[name] = {k.strip(): v.strip() for k, v in configs[name].items()}
    for key in ("brokerName", "brokerClusterName", "brokerId", "autoCreateTopicEnable", "autoCreateSubscriptionGroup",
                "messageDelayLevel", "enablePropertyFilter", "flushDiskType",
                "brokerIP1"):
        assert configs["ours"].get(key) == configs["stock"].get(key), (key, configs["ours"].get(key))
    # every store key is named as RocketMQ names it; keys RocketMQ does not have are this broker's own (BrokerConfig:
    # limits, aclFilePath, maxReconsumeTimes...)
    ours_only = set(configs["ours"]) - set(configs["stock"])
    assert ours_only <= {f.name for f in dataclasses.fields(BrokerConfig)}, ours_only
    assert len(set(configs["ours"]) & set(configs["stock"])) >= 30
    print("getBrokerConfig keys only ours has:", sorted(ours_only))


def _consumer(side: Side, group: str, register: bool) -> PullConsumer:
    c = PullConsumer(side.namesrv, group)
    if register:
        c.register_group([TOPIC])
    return c


def test_consumer_progress_connection_and_reset_of_an_online_group(matrix):
    admin, sides = matrix
    consumers = {s.name: _consumer(s, "AdmOnline", register=True) for s in sides}
    try:
        for c in consumers.values():
            c.commit_offset(MessageQueue(TOPIC, BROKER, 0), 2)
            c.commit_offset(MessageQueue(TOPIC, BROKER, 1), 1)
        progress = _both(matrix, "consumerProgress", "-g", "AdmOnline")
        rows = {k: [r[:6] for r in _rows(v, "#Topic")] for k, v in progress.items()}
        assert rows["ours"] == rows["stock"] == [[TOPIC, BROKER, "0", "3", "2", "1"],
                                                 [TOPIC, BROKER, "1", "2", "1", "1"]]
        assert all("Diff Total: 2" in v for v in progress.values())

        every = _both(matrix, "consumerProgress")
        mine = {k: next(r for r in _rows(v, "#Group") if r[0] == "AdmOnline") for k, v in every.items()}
        # #Group #Count #Version #Type #Model (none for a pull consumer) #TPS #Diff Total
        assert mine["ours"] == mine["stock"] == ["AdmOnline", "1", "V4_9_7", "PULL", "0", "2"]

        conn = _both(matrix, "consumerConnection", "-g", "AdmOnline")
        for text in conn.values():
            assert "PYTHON" in text and f"{TOPIC} " in text and "ConsumeType: CONSUME_ACTIVELY" in text
        tails = {k: v[v.index("Below is subscription"):] for k, v in conn.items()}
        assert tails["ours"] == tails["stock"]

        # the member's running info, asked of it through its broker (GET_CONSUMER_RUNNING_INFO forwarded)
        status = {}
        for side in sides:
            got = _admin(admin, side, "consumerStatus", "-g", "AdmOnline", "-i", consumers[side.name].client_id)
            assert "Exception" not in got.err, f"{side.name}: {got.err[-3000:]}"
            status[side.name] = got.out
        for text in status.values():
            assert "PROP_CONSUME_TYPE" in text and "CONSUME_ACTIVELY" in text and TOPIC in text, text
        keys = {k: sorted(re.findall(r"^(PROP_\w+)", v, re.M)) for k, v in status.items()}
        assert keys["ours"] == keys["stock"] and len(keys["ours"]) == 6

        # back to the start (timestamp 0): the online member is told, and commits where it was told
        reset = _both(matrix, "resetOffsetByTime", "-g", "AdmOnline", "-t", TOPIC, "-s", "0")
        rows = {k: sorted(_rows(v, "#brokerName")) for k, v in reset.items()}
        assert rows["ours"] == rows["stock"] == [[BROKER, "0", "0"], [BROKER, "1", "0"]]
        for side in sides:
            c = consumers[side.name]
            wait_until(lambda: len(c.resets) == 2, 20, f"{side.name}: the reset told to the consumer")
            assert c.resets == {MessageQueue(TOPIC, BROKER, 0): 0, MessageQueue(TOPIC, BROKER, 1): 0}
            wait_until(lambda: c.query_offset(MessageQueue(TOPIC, BROKER, 0)) == 0, 20, "the reset committed")
            assert c.query_offset(MessageQueue(TOPIC, BROKER, 1)) == 0
    finally:
        for c in consumers.values():
            c.close()


def test_reset_of_an_offline_group_and_its_progress(matrix):
    admin, sides = matrix
    for side in sides:
        with _consumer(side, "AdmOffline", register=False) as c:
            c.commit_offset(MessageQueue(TOPIC, BROKER, 0), 1)
            c.commit_offset(MessageQueue(TOPIC, BROKER, 1), 0)
    # "now": every queue to its end; the broker answers CONSUMER_NOT_ONLINE and the tool commits the offsets
    reset = _both(matrix, "resetOffsetByTime", "-g", "AdmOffline", "-t", TOPIC, "-s", "now")
    rows = {k: sorted(_rows(v, "#brokerName")) for k, v in reset.items()}
    # #brokerName #queueId #brokerOffset #consumerOffset #timestampOffset #resetOffset
    assert rows["ours"] == rows["stock"] == [[BROKER, "0", "3", "1", "3", "3"], [BROKER, "1", "2", "0", "2", "2"]]
    for side in sides:
        with _consumer(side, "AdmOffline", register=False) as c:
            assert [c.query_offset(MessageQueue(TOPIC, BROKER, q)) for q in (0, 1)] == [3, 2], side.name


def test_producer_connection(matrix):
    admin, sides = matrix
    clients = []
    try:
        for side in sides:
            c = BlockingRemotingClient(side.broker, connect_timeout=5)
            clients.append(c)
            body = json.dumps({"clientID": "127.0.0.1@adm-producer", "producerDataSet": [{"groupName": "AdmProducer"}],
                               "consumerDataSet": []}).encode()
            cmd = RemotingCommand.request(RequestCode.HEART_BEAT, body=body)
            cmd.version = 407
            assert c.invoke(cmd, 10).code == ResponseCode.SUCCESS
        out = _both(matrix, "producerConnection", "-g", "AdmProducer", "-t", TOPIC)
        assert all(len(text.splitlines()) == 1 for text in out.values()), out
        parsed = {k: v.split() for k, v in out.items()}
        # "0001  127.0.0.1@adm-producer  127.0.0.1:port  PYTHON  V4_9_7"
        expected = ["0001", "127.0.0.1@adm-producer", "PYTHON", "V4_9_7"]
        assert [p[0:2] + p[3:] for p in parsed.values()] == [expected] * 2, out
    finally:
        for c in clients:
            c.close()


def test_update_and_delete_subscription_group(matrix):
    admin, sides = matrix
    out = _both(matrix, "updateSubGroup", "-c", CLUSTER, "-g", "AdmSub", "-r", "3", "-q", "2")
    assert _lines(out["ours"]) == _lines(out["stock"])  # a line per broker, in the order of a HashSet
    assert "create subscription group to ADDR success." in out["ours"]
    for side in sides:
        table = rs.decode(_ask(side, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG).body)["subscriptionGroupTable"]
        assert (table["AdmSub"]["retryMaxTimes"], table["AdmSub"]["retryQueueNums"]) == (3, 2), side.name
    out = _both(matrix, "deleteSubGroup", "-c", CLUSTER, "-g", "AdmSub")
    assert _lines(out["ours"]) == _lines(out["stock"])
    assert "delete subscription group [AdmSub] from broker [ADDR] in cluster [StockCluster] success." in out["ours"]
    for side in sides:
        table = rs.decode(_ask(side, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG).body)["subscriptionGroupTable"]
        assert "AdmSub" not in table, side.name


def test_delete_topic(matrix):
    admin, sides = matrix
    _both(matrix, "updateTopic", "-b", "{ADDR}", "-t", "AdmGone", "-r", "1", "-w", "1")
    for side in sides:
        with Producer(side.namesrv) as p:
            for i in range(3):
                p.send("AdmGone", b"x")
        with _consumer(side, "AdmGoneGroup", register=False) as c:
            c.commit_offset(MessageQueue("AdmGone", BROKER, 0), 2)
    out = _both(matrix, "deleteTopic", "-c", CLUSTER, "-t", "AdmGone")
    assert _lines(out["ours"]) == _lines(out["stock"])
    assert "delete topic [AdmGone] from cluster [StockCluster] success." in out["ours"]
    for side in sides:
        gone = _admin(admin, side, "topicRoute", "-t", "AdmGone")
        assert "No topic route info in name server for the topic: AdmGone" in gone.err, side.name
        # its consume queues' files are gone (the stock broker leaves the empty directories)
        left = [f for _, _, files in os.walk(os.path.join(side.store, "consumequeue", "AdmGone")) for f in files]
        assert not left, (side.name, left)
    with open(os.path.join(sides[1].store, "config", "consumerOffset.json")) as f:
        assert "AdmGone@" not in f.read()  # and every group's offsets of it (RocketMQ 5's cleanOffsetByTopic)
    # created again, it starts empty on both
    _both(matrix, "updateTopic", "-b", "{ADDR}", "-t", "AdmGone", "-r", "1", "-w", "1")
    status = _both(matrix, "topicStatus", "-t", "AdmGone")
    rows = {k: [r[:4] for r in _rows(v, "#Broker Name")] for k, v in status.items()}
    assert rows["ours"] == rows["stock"] == [[BROKER, "0", "0", "0"]]


def _same_message(printed: dict[str, str], index: int, matrix) -> None:
    """printMsg's fields of MESSAGES[index] on both sides: the same but for ids, hosts and times."""
    _, sides = matrix
    fields = {k: _fields(v) for k, v in printed.items()}
    q, tags, keys = MESSAGES[index]
    for name, f in fields.items():
        assert f["Topic"] == TOPIC and f["Tags"] == f"[{tags}]" and f["Keys"] == f"[{keys}]", (name, f)
        assert f["Queue ID"] == str(q), (name, f)
    for key in ("Queue Offset", "Reconsume Times", "System Flag"):
        assert fields["ours"][key] == fields["stock"][key], key
    for side in sides:
        if "OffsetID" in fields[side.name]:  # printMsg's (queryMsgByUniqueKey prints its own fields, without it)
            assert side.offset_ids[index] == fields[side.name]["OffsetID"], side.name
        assert f"UNIQ_KEY={side.uniq_keys[index]}" in fields[side.name]["Properties"], side.name


def test_query_msg_by_offset(matrix):
    printed = _both(matrix, "queryMsgByOffset", "-t", TOPIC, "-b", BROKER, "-i", "0", "-o", "1")
    _same_message(printed, 1, matrix)


def test_query_msg_by_id(matrix):
    admin, sides = matrix
    printed = {}
    for side in sides:
        got = _admin(admin, side, "queryMsgById", "-i", side.offset_ids[3])
        assert "Exception" not in got.err, (side.name, got.err[-3000:])
        printed[side.name] = got.out
    _same_message(printed, 3, matrix)


def test_query_msg_by_unique_key(matrix):
    admin, sides = matrix
    printed = {}
    for side in sides:
        got = _admin(admin, side, "queryMsgByUniqueKey", "-t", TOPIC, "-i", side.uniq_keys[4])
        assert "Exception" not in got.err, f"{side.name} {side.uniq_keys[4]}: {got.err[-3000:]}"
        assert "Queue Offset" in got.out, f"{side.name}: {got.out}"
        printed[side.name] = got.out
    _same_message(printed, 4, matrix)


def test_query_msg_by_key(matrix):
    out = _both(matrix, "queryMsgByKey", "-t", TOPIC, "-k", "shared")
    rows = {k: sorted(r[1:] for r in _rows(v, "#Message ID")) for k, v in out.items()}
    assert rows["ours"] == rows["stock"] == [["0", "0"], ["0", "2"]]


def test_rmq_admin_commands_through_a_stock_broker_and_ours(matrix, capsys):
    """`rmq create-topic / groups / reset-offsets / delete-topic --namesrv` (rmq_client.Admin) give the same
    answers through the stock broker as through ours."""
    from rmq_cli.cli import main
    admin, sides = matrix
    got = {}
    for side in sides:
        def rmq(*args):
            assert main([*args, "--namesrv", side.namesrv]) == 0, capsys.readouterr().err
            return capsys.readouterr().out
        assert rmq("create-topic", "-t", "RmqMade", "-q", "2") == f"topic RmqMade: 2 queues on {BROKER}, {OTHER}\n"
        assert "RmqMade" in _admin(admin, side, "topicList").out
        rows = [r for r in json.loads(rmq("groups", "--json")) if r["group"] in ("AdmOnline", "AdmOffline")]
        reset = json.loads(rmq("reset-offsets", "-g", "AdmOffline", "-t", TOPIC, "--to", "earliest", "--json"))
        assert rmq("delete-topic", "-t", "RmqMade") == \
            f"topic RmqMade: deleted on {BROKER}, {OTHER} and from the name server\n"
        got[side.name] = rows, reset["queues"]
    assert got["ours"] == got["stock"]
    rows, queues = got["ours"]
    assert {(r["group"], r["topic"], r["queues"]) for r in rows} >= {("AdmOffline", TOPIC, 2)}
    assert [(q["queue_id"], q["new"]) for q in queues] == [(0, 0), (1, 0)]
