"""The name server over real sockets: brokers register their topics the way a RocketMQ broker does, clients get
routes (TOPIC_NOT_EXIST when there is none), silent or disconnected brokers drop out; and the Apache RocketMQ
C++ client (PyPI `rocketmq` 0.4.4) asks it for a route."""
from __future__ import annotations

import asyncio
import json
import os
import signal
import struct
import subprocess
import sys
import textwrap
import zlib

import pytest

from remoting import RemotingClient, RemotingCommand, RemotingServer, RequestCode, ResponseCode
from remoting.broker_headers import SendMessageRequestHeader, SendMessageResponseHeader
from remoting.namesrv_bodies import ClusterInfo, TopicList
from remoting.route_data import TopicRouteData
from rmq_broker import NameServer
from rmq_broker.namesrv import STANDARD_JSON_VERSION

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def register(name: str, addr: str, topics: dict, broker_id: int = 0, cluster: str = "DefaultCluster"):
    body = {"topicConfigSerializeWrapper": {"topicConfigTable": {
        t: {"topicName": t, "readQueueNums": q, "writeQueueNums": q, "perm": 6, "topicFilterType": "SINGLE_TAG",
            "topicSysFlag": 0, "order": False} for t, q in topics.items()},
        "dataVersion": {"counter": 1, "timestamp": 0}}, "filterServerList": []}
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, {
        "brokerName": name, "brokerAddr": addr, "clusterName": cluster, "haServerAddr": addr, "brokerId": broker_id,
        "compressed": False}, body=json.dumps(body).encode())


async def route(client, topic):
    return await client.invoke(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))


def test_routes_clusters_and_topic_lists():
    async def main():
        async with NameServer("127.0.0.1:0") as ns:
            async with RemotingClient(ns.address) as broker_a, RemotingClient(ns.address) as broker_b, \
                    RemotingClient(ns.address) as client:
                assert (await broker_a.invoke(register("a", "10.0.0.1:10911", {"T": 8, "U": 4}))).code == 0
                assert (await broker_b.invoke(register("b", "10.0.0.2:10911", {"T": 2}))).code == 0
                slave = await broker_b.invoke(register("b", "10.0.0.3:10911", {"T": 2}, broker_id=1))
                assert slave.ext_fields == {"haServerAddr": "10.0.0.2:10911", "masterAddr": "10.0.0.2:10911"}
                r = await route(client, "T")
                assert r.code == ResponseCode.SUCCESS
                # fastjson's own form, as RocketMQ answers clients older than 4.9.4: broker ids as bare keys
                assert b'"brokerAddrs":{0:"10.0.0.2:10911",1:"10.0.0.3:10911"}' in r.body
                data = TopicRouteData.decode(r.body)
                assert [(q.broker_name, q.read_queue_nums, q.write_queue_nums) for q in data.queue_datas] == \
                    [("a", 8, 8), ("b", 2, 2)]
                assert [(b.broker_name, b.broker_addrs) for b in data.broker_datas] == \
                    [("a", {0: "10.0.0.1:10911"}), ("b", {0: "10.0.0.2:10911", 1: "10.0.0.3:10911"})]
                # standard JSON for a client of 4.9.4 or later, or one that asks for it
                newer = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
                newer.version = 401
                asks = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                               {"topic": "T", "acceptStandardJsonOnly": True})
                for answer in [await client.invoke(newer), await client.invoke(asks)]:
                    standard = json.loads(answer.body)
                    assert standard["brokerDatas"][1]["brokerAddrs"] == {"0": "10.0.0.2:10911", "1": "10.0.0.3:10911"}
                    assert TopicRouteData.decode(answer.body) == data
                missing = await route(client, "Nope")
                assert missing.code == ResponseCode.TOPIC_NOT_EXIST and "Nope" in missing.remark
                info = ClusterInfo.decode((await client.invoke(
                    RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))).body)
                assert info.cluster_addr_table == {"DefaultCluster": ["a", "b"]}
                assert info.broker_addr_table["b"].broker_addrs == {0: "10.0.0.2:10911", 1: "10.0.0.3:10911"}
                topics = TopicList.decode((await client.invoke(
                    RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))).body)
                assert topics.topic_list == ["T", "U"]
                await broker_a.invoke(RemotingCommand.request(RequestCode.UNREGISTER_BROKER, {
                    "brokerName": "a", "brokerAddr": "10.0.0.1:10911", "clusterName": "DefaultCluster",
                    "brokerId": 0}))
                assert (await route(client, "U")).code == ResponseCode.TOPIC_NOT_EXIST
                assert [q.broker_name for q in TopicRouteData.decode((await route(client, "T")).body).queue_datas] \
                    == ["b"]
    asyncio.run(main())


def test_a_silent_broker_drops_out_and_a_closed_connection_at_once():
    async def main():
        async with NameServer("127.0.0.1:0", broker_expiry_s=0.3) as ns:
            async with RemotingClient(ns.address) as client:
                broker = await RemotingClient(ns.address).connect()
                await broker.invoke(register("a", "10.0.0.1:10911", {"T": 1}))
                assert (await route(client, "T")).code == ResponseCode.SUCCESS
                await asyncio.sleep(0.8)  # no re-registration within the expiry
                assert (await route(client, "T")).code == ResponseCode.TOPIC_NOT_EXIST
                await broker.invoke(register("a", "10.0.0.1:10911", {"T": 1}))
                assert (await route(client, "T")).code == ResponseCode.SUCCESS
                await broker.close()
                await asyncio.sleep(0.1)
                assert (await route(client, "T")).code == ResponseCode.TOPIC_NOT_EXIST
    asyncio.run(main())


def test_rmq_namesrv_prints_its_address_and_stops_on_sigterm():
    """`rmq namesrv` is the name server's one entry point (`python -m rmq_broker.namesrv` is gone)."""
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.Popen([sys.executable, "-m", "rmq_cli", "namesrv", "--listen", "127.0.0.1:0"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = json.loads(proc.stdout.readline())

        async def ask():
            async with RemotingClient(line["namesrv"]) as client:
                return await route(client, "T")
        assert asyncio.run(ask()).code == ResponseCode.TOPIC_NOT_EXIST
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


CPP_PRODUCER = """
    import sys
    from rocketmq.client import Message, Producer
    p = Producer("cpp-probe")
    p.set_namesrv_addr(sys.argv[1])
    p.start()
    m = Message("T")
    m.set_body("hello")
    m.set_tags("TagA")
    try:
        r = p.send_sync(m)
        print("sent", r.offset)
    except Exception as e:
        print("failed", type(e).__name__, e)
    p.shutdown()
"""


def test_the_rocketmq_cpp_client_takes_its_route_and_sends_where_it_points(tmp_path):
    """The route in fastjson's form (the C++ client says version 63, before 4.9.4) leads the client to the broker
    address under id 0: a stand-in broker there answers its SEND_MESSAGE, which the client reports as sent."""
    pytest.importorskip("rocketmq.client", reason="the rocketmq==0.4.4 test extra (the Apache RocketMQ C++ client)")
    sends: list[RemotingCommand] = []

    async def stand_in_broker(cmd: RemotingCommand, channel) -> RemotingCommand:
        sends.append(cmd)
        header = SendMessageRequestHeader.from_ext_fields(cmd.ext_fields)
        return cmd.response(ResponseCode.SUCCESS, ext_fields=SendMessageResponseHeader(
            "0A00000100002A9F0000000000000007", header.queue_id, 7).to_ext_fields())

    async def main():
        async with NameServer("127.0.0.1:0") as ns, RemotingServer() as fake:
            fake.register(RequestCode.SEND_MESSAGE, stand_in_broker)
            async with RemotingClient(ns.address) as broker:
                await broker.invoke(register("a", fake.address, {"T": 4}))
                env = dict(os.environ, HOME=str(tmp_path), PYTHONPATH=ROOT)
                proc = await asyncio.create_subprocess_exec(
                    sys.executable, "-c", textwrap.dedent(CPP_PRODUCER), ns.address, env=env,
                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
                try:
                    out, _ = await asyncio.wait_for(proc.communicate(), timeout=90)
                finally:
                    if proc.returncode is None:
                        proc.kill()
                        await proc.wait()
                return out.decode(), ns.requests[RequestCode.GET_ROUTEINFO_BY_TOPIC]
    out, asked = asyncio.run(main())
    assert asked >= 1, out
    assert out.split() == ["sent", "7"], out
    assert len(sends) == 1 and sends[0].body == b"hello" and sends[0].version < STANDARD_JSON_VERSION
    header = SendMessageRequestHeader.from_ext_fields(sends[0].ext_fields)
    assert (header.topic, header.producer_group, header.default_topic, header.unit_mode, header.batch) == \
        ("T", "cpp-probe", "TBW102", False, False)  # booleans sent as "0"
    assert "TAGS\x01TagA\x02" in header.properties


def _compressed_registration(topics: dict) -> bytes:
    """RegisterBrokerBody as a broker with compressedRegister=true deflates it: length-prefixed pieces."""
    def piece(data: bytes) -> bytes:
        return struct.pack(">i", len(data)) + data
    raw = piece(b'{"counter":3,"timestamp":1700000000000}') + struct.pack(">i", len(topics))
    raw += b"".join(piece(f"{t} {q} {q} 6 SINGLE_TAG {{}}".encode()) for t, q in topics.items())
    raw += piece(b"[]") + struct.pack(">i", 0)  # no filter servers; a 5.0 broker's empty queue-mapping count
    return zlib.compress(raw, 9)


def test_registrations_are_checked_field_by_field_and_compressed_ones_read():
    async def main():
        async with NameServer("127.0.0.1:0") as ns:
            async with RemotingClient(ns.address) as broker, RemotingClient(ns.address) as client:
                bad = await client.invoke(RemotingCommand.request(RequestCode.REGISTER_BROKER, {"brokerName": "x"}))
                assert bad.code == ResponseCode.SYSTEM_ERROR and "field brokerAddr is missing" in bad.remark
                good = register("a", "10.0.0.1:10911", {"T": 4})
                wrong_id = RemotingCommand.request(RequestCode.REGISTER_BROKER, dict(good.ext_fields, brokerId="one"),
                                                   body=good.body)
                answer = await client.invoke(wrong_id)
                assert answer.code == ResponseCode.SYSTEM_ERROR
                assert answer.remark == "RegisterBrokerRequestHeader: field brokerId is 'one', not an integer (long)"
                crc = RemotingCommand.request(RequestCode.REGISTER_BROKER, dict(good.ext_fields, bodyCrc32=12345),
                                              body=good.body)
                assert (await client.invoke(crc)).remark == "crc32 not match"
                lying = RemotingCommand.request(RequestCode.REGISTER_BROKER, good.ext_fields,
                                                body=b'{"topicConfigSerializeWrapper":{"topicConfigTable":'
                                                     b'{"T":{"topicName":"T","readQueueNums":"four"}}}}')
                answer = await client.invoke(lying)
                assert answer.code == ResponseCode.SYSTEM_ERROR and "readQueueNums is 'four'" in answer.remark
                assert (await route(client, "T")).code == ResponseCode.TOPIC_NOT_EXIST  # nothing half-registered

                body = _compressed_registration({"T": 4, "U": 2})
                compressed = RemotingCommand.request(RequestCode.REGISTER_BROKER, dict(
                    good.ext_fields, compressed=True, bodyCrc32=zlib.crc32(body) & 0x7FFFFFFF), body=body)
                assert (await broker.invoke(compressed)).code == ResponseCode.SUCCESS
                data = TopicRouteData.decode((await route(client, "U")).body)
                assert [(q.broker_name, q.read_queue_nums) for q in data.queue_datas] == [("a", 2)]
                truncated = RemotingCommand.request(RequestCode.REGISTER_BROKER, dict(good.ext_fields, compressed=True),
                                                    body=zlib.compress(zlib.decompress(body)[:30]))
                answer = await client.invoke(truncated)
                assert answer.code == ResponseCode.SYSTEM_ERROR and "compressed registration" in answer.remark
    asyncio.run(main())
