"""The admin request codes as RocketMQ's processors answer them, over real sockets: the name server's KV config and
topic deletion, the broker's topic deletion, subscription groups, connection lists, a member's running info
forwarded to it, and the answers to bad requests (mqadmin's own runs are tests/peers/test_mqadmin_matrix.py)."""
from __future__ import annotations

import asyncio
import json
import os
import re

from remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from remoting import remoting_serializable as rs
from remoting.namesrv_bodies import TopicList
from rmq_broker import Broker, NameServer


def _req(code: int, body: bytes = b"", **fields) -> RemotingCommand:
    return RemotingCommand.request(code, {k: v for k, v in fields.items() if v is not None}, body=body)


def test_the_name_servers_kv_config_and_topic_deletion(tmp_path):
    async def main():
        kv_file = str(tmp_path / "kvConfig.json")
        async with NameServer("127.0.0.1:0", kv_config=kv_file) as ns, \
                Broker(tmp_path / "s", "127.0.0.1:0", namesrv=ns.address, cluster="C1") as b:
            async with RemotingClient(ns.address) as c:
                got = await c.invoke(_req(RequestCode.GET_KV_CONFIG, namespace="ORDER_TOPIC_CONFIG", key="T"))
                assert (got.code, got.remark) == (ResponseCode.QUERY_NOT_FOUND,
                                                  "No config item, Namespace: ORDER_TOPIC_CONFIG Key: T")
                put = _req(RequestCode.PUT_KV_CONFIG, namespace="ORDER_TOPIC_CONFIG", key="T", value="broker-a:4")
                assert (await c.invoke(put)).code == ResponseCode.SUCCESS
                got = await c.invoke(_req(RequestCode.GET_KV_CONFIG, namespace="ORDER_TOPIC_CONFIG", key="T"))
                assert (got.code, got.ext_fields["value"]) == (ResponseCode.SUCCESS, "broker-a:4")
                listed = await c.invoke(_req(RequestCode.GET_KVLIST_BY_NAMESPACE, namespace="ORDER_TOPIC_CONFIG"))
                assert rs.decode(listed.body) == {"table": {"T": "broker-a:4"}}
                # the order config travels with the topic's route, as RocketMQ's orderTopicConf
                await b.topics.create_topic("T", 4, 4, None)
                route = await c.invoke(_req(RequestCode.GET_ROUTEINFO_BY_TOPIC, topic="T"))
                assert rs.decode(route.body)["orderTopicConf"] == "broker-a:4"
                assert json.load(open(kv_file))["configTable"] == {"ORDER_TOPIC_CONFIG": {"T": "broker-a:4"}}
                assert (await c.invoke(_req(RequestCode.DELETE_KV_CONFIG, namespace="ORDER_TOPIC_CONFIG",
                                            key="T"))).code == ResponseCode.SUCCESS
                gone = await c.invoke(_req(RequestCode.GET_KVLIST_BY_NAMESPACE, namespace="ORDER_TOPIC_CONFIG"))
                assert (gone.code, gone.remark) == (ResponseCode.QUERY_NOT_FOUND,
                                                    "No config item, Namespace: ORDER_TOPIC_CONFIG")
                bad = await c.invoke(_req(RequestCode.PUT_KV_CONFIG, namespace="N", key="k"))
                assert bad.code == ResponseCode.SYSTEM_ERROR and "value" in bad.remark
                await c.invoke(_req(RequestCode.PUT_KV_CONFIG, namespace="N", key="k", value="v"))

                by_cluster = await c.invoke(_req(RequestCode.GET_TOPICS_BY_CLUSTER, cluster="C1"))
                assert "T" in TopicList.decode(by_cluster.body).topic_list
                none = await c.invoke(_req(RequestCode.GET_TOPICS_BY_CLUSTER, cluster="Nope"))
                assert TopicList.decode(none.body).topic_list == []
                # another cluster's deletion leaves the route; the topic's own cluster's removes it
                await c.invoke(_req(RequestCode.DELETE_TOPIC_IN_NAMESRV, topic="T", clusterName="Nope"))
                assert (await c.invoke(_req(RequestCode.GET_ROUTEINFO_BY_TOPIC, topic="T"))).code == 0
                await c.invoke(_req(RequestCode.DELETE_TOPIC_IN_NAMESRV, topic="T", clusterName="C1"))
                gone = await c.invoke(_req(RequestCode.GET_ROUTEINFO_BY_TOPIC, topic="T"))
                assert gone.code == ResponseCode.TOPIC_NOT_EXIST
        # kept across a restart
        async with NameServer("127.0.0.1:0", kv_config=kv_file) as ns:
            assert ns.kv.table == {"N": {"k": "v"}}
    asyncio.run(main())


def _heartbeat(client_id: str, group: str, version: int = 407) -> RemotingCommand:
    body = json.dumps({"clientID": client_id, "producerDataSet": [{"groupName": "P1"}], "consumerDataSet": [{
        "groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
        "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "unitMode": False, "subscriptionDataSet": [
            {"topic": "T", "subString": "*", "tagsSet": [], "codeSet": [], "subVersion": 1,
             "expressionType": "TAG", "classFilterMode": False}]}]}).encode()
    cmd = RemotingCommand.request(RequestCode.HEART_BEAT, body=body)
    cmd.version = version
    return cmd


def test_topic_and_group_admin_requests_and_a_members_running_info(tmp_path):
    async def main():
        async with NameServer("127.0.0.1:0") as ns, \
                Broker(tmp_path / "s", "127.0.0.1:0", namesrv=ns.address) as b:
            await b.topics.create_topic("T", 2, 2, None)
            b.store.put("T", b"x", queue_id=0)
            b.offsets.commit_offset("G", "T", 0, 1, persist=True)
            member = RemotingClient(b.address)
            await member.connect()

            async def answer(cmd: RemotingCommand) -> None:  # the member answers its running info
                if cmd.code == RequestCode.GET_CONSUMER_RUNNING_INFO:
                    reply = cmd.response(ResponseCode.SUCCESS, body=b'{"properties":{"k":"v"}}')
                    await member.invoke_oneway(reply)
            member.on_request = answer
            async with RemotingClient(b.address) as admin:
                assert (await member.invoke(_heartbeat("c1@x", "G"))).code == ResponseCode.SUCCESS
                conn = await admin.invoke(_req(RequestCode.GET_CONSUMER_CONNECTION_LIST, consumerGroup="G"))
                body = rs.decode(conn.body)
                assert [(c["clientId"], c["language"], c["version"]) for c in body["connectionSet"]] == \
                    [("c1@x", "PYTHON", 407)]
                assert (body["consumeType"], body["messageModel"], list(body["subscriptionTable"])) == \
                    ("CONSUME_PASSIVELY", "CLUSTERING", ["T"])
                missing = await admin.invoke(_req(RequestCode.GET_CONSUMER_CONNECTION_LIST, consumerGroup="None"))
                assert (missing.code, missing.remark) == (ResponseCode.CONSUMER_NOT_ONLINE,
                                                          "the consumer group[None] not online")
                producers = await admin.invoke(_req(RequestCode.GET_PRODUCER_CONNECTION_LIST, producerGroup="P1"))
                assert [c["clientId"] for c in rs.decode(producers.body)["connectionSet"]] == ["c1@x"]
                who = await admin.invoke(_req(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, topic="T"))
                assert rs.decode(who.body) == {"groupList": ["G"]}

                info = await admin.invoke(_req(RequestCode.GET_CONSUMER_RUNNING_INFO, consumerGroup="G",
                                               clientId="c1@x", jstackEnable="false"))
                assert (info.code, info.body) == (ResponseCode.SUCCESS, b'{"properties":{"k":"v"}}')
                gone = await admin.invoke(_req(RequestCode.GET_CONSUMER_RUNNING_INFO, consumerGroup="G",
                                               clientId="c9@x"))
                assert (gone.code, gone.remark) == (ResponseCode.SYSTEM_ERROR, "The Consumer <G> <c9@x> not online")

                # reset: the member is told (RESET_CONSUMER_CLIENT_OFFSET) and the answer lists the new offsets
                told: list[RemotingCommand] = []
                member.on_request = lambda cmd: asyncio.sleep(0, told.append(cmd))
                b.offsets.commit_offset("G", "T", 1, 0, persist=True)
                reset = await admin.invoke(_req(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, topic="T", group="G",
                                                timestamp=-1, isForce="true"))
                assert reset.code == ResponseCode.SUCCESS
                for _ in range(100):
                    if told:
                        break
                    await asyncio.sleep(0.05)
                assert told and told[0].code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET
                assert rs.decode(reset.body) == rs.decode(told[0].body)
                assert sorted(rs.decode(reset.body)["offsetTable"].values()) == [0, 1]  # each queue's end
                assert told[0].ext_fields["group"] == "G" and told[0].ext_fields["timestamp"] == "-1"
                offline = await admin.invoke(_req(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, topic="T", group="G2",
                                                  timestamp=0, isForce="true"))
                assert offline.code == ResponseCode.SYSTEM_ERROR and "THe consumer group <G2> not exist" in \
                    offline.remark
                b.offsets.commit_offset("G2", "T", 0, 0)
                b.offsets.commit_offset("G2", "T", 1, 0)
                offline = await admin.invoke(_req(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, topic="T", group="G2",
                                                  timestamp=0, isForce="true"))
                assert offline.code == ResponseCode.CONSUMER_NOT_ONLINE

                # subscription groups
                cfg = {"groupName": "S1", "consumeEnable": True, "retryMaxTimes": 3, "retryQueueNums": 1}
                assert (await admin.invoke(_req(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                                                json.dumps(cfg).encode()))).code == ResponseCode.SUCCESS
                table = rs.decode((await admin.invoke(_req(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))).body)
                assert table["subscriptionGroupTable"]["S1"]["retryMaxTimes"] == 3
                bad = await admin.invoke(_req(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, b'{"groupName":"a b"}'))
                assert bad.code == ResponseCode.SYSTEM_ERROR and "groupName" in bad.remark
                bad = await admin.invoke(_req(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, b"not json"))
                assert bad.code == ResponseCode.SYSTEM_ERROR and "not JSON" in bad.remark
                await admin.invoke(_req(RequestCode.DELETE_SUBSCRIPTIONGROUP, groupName="S1", removeOffset="true"))
                table = rs.decode((await admin.invoke(_req(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))).body)
                assert "S1" not in table["subscriptionGroupTable"]
                bad = await admin.invoke(_req(RequestCode.DELETE_SUBSCRIPTIONGROUP))
                assert bad.code == ResponseCode.SYSTEM_ERROR and "groupName" in bad.remark

                # topics: a system topic is refused; a deletion takes the queues and every group's offsets
                refused = await admin.invoke(_req(RequestCode.DELETE_TOPIC_IN_BROKER, topic="TBW102"))
                assert (refused.code, refused.remark) == (ResponseCode.SYSTEM_ERROR,
                                                          "The topic[TBW102] is conflict with system topic.")
                assert (await admin.invoke(_req(RequestCode.DELETE_TOPIC_IN_BROKER, topic="T"))).code == 0
                assert not b.store.has_topic("T")
                assert not os.path.exists(os.path.join(b.store.path, "consumequeue", "T"))
                offsets = rs.decode((await admin.invoke(_req(RequestCode.GET_ALL_CONSUMER_OFFSET))).body)
                assert not [k for k in offsets["offsetTable"] if k.startswith("T@")]
                assert "T" not in rs.decode((await admin.invoke(_req(RequestCode.GET_ALL_TOPIC_CONFIG))).body)[
                    "topicConfigTable"]
                config = await admin.invoke(_req(RequestCode.GET_BROKER_CONFIG))
                assert f"brokerName={b.broker_name}\n" in config.body.decode() and "version" in config.ext_fields
                runtime = rs.decode((await admin.invoke(_req(RequestCode.GET_BROKER_RUNTIME_INFO))).body)["table"]
                assert runtime["msgPutTotalTodayNow"] == "0" and runtime["brokerVersionDesc"] == "V4_9_7"
            await member.close()
    asyncio.run(main())


def test_the_docs_list_every_request_code_served_or_not(tmp_path):
    """docs/broker.md's table under "Requests served": every code RocketMQ defines in one row; a "not served" row names
    only codes neither server answers, the other rows every code one of them does."""
    broker = Broker(tmp_path / "s", "127.0.0.1:0")
    served = set(broker.processors) | set(NameServer("127.0.0.1:0").server.processors)
    broker.store.close()
    page = open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "broker.md"), encoding="utf-8").read()
    table = page[page.index("| request | code | notes |"):page.index("A code not served is answered")]
    rows = [line for line in table.splitlines() if line.startswith("| ")][1:]
    place: dict[str, list[bool]] = {}
    for row in rows:
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        unserved = cells[0].startswith("not served")
        for name in set(re.findall(r"\b[A-Z][A-Z0-9_]*[A-Z0-9]\b", cells[2] if unserved else cells[0])):
            if name in RequestCode.__members__:
                place.setdefault(name, []).append(unserved)
    assert sorted(set(RequestCode.__members__) - set(place)) == []
    assert [n for n, where in place.items() if len(where) > 1] == []
    assert sorted(n for n, (unserved,) in place.items() if unserved and RequestCode[n] in served) == []
    assert sorted(RequestCode(c).name for c in served if not place[RequestCode(c).name] == [False]) == []


def test_runtime_info_rates_are_messages_per_second_over_each_window():
    from rmq_broker.broker_stats import BrokerStats
    now = [0.0]
    stats = BrokerStats(clock=lambda: now[0])
    for _ in range(100):  # 100 messages a second for 10 s, then 60 s of nothing
        stats.put(10)
        now[0] += 0.1
    stats.got(0)
    assert stats.tps(0) == "99.00 99.00 99.00" and stats.put_total == 1000 and stats.tps(1) == "0.00 0.00 0.00"
    now[0] += 60
    stats.got(0)
    assert stats.tps(0).split()[:2] == ["0.00", "0.00"]
