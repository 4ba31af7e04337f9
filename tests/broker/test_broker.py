"""The broker over real sockets, registered with a real name server: sends land in the store, pulls return the
stored records as they lie in the commitlog, filtered by TAG or SQL92, held until a message arrives; consumer
offsets land in config/consumerOffset.json. And the Apache RocketMQ C++ client produces and consumes through it."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time

import pytest
from broker_testkit import ROOT, CppMembers, _child, pull, records, send, until

from remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from remoting.route_data import TopicRouteData
from rmq_broker import Broker, NameServer
from rmq_common import message_codec as codec
from store import MessageStore, OffsetStore


def test_send_pull_filters_long_polling_and_offsets(tmp_path):
    async def main():
        async with NameServer("127.0.0.1:0") as ns, Broker(tmp_path / "s", "127.0.0.1:0", namesrv=ns.address) as b:
            async with RemotingClient(b.address) as client, RemotingClient(ns.address) as names:
                answers = [await client.invoke(send("T", b"m%d" % i, tags=["TagA", "TagB", "TagC"][i % 3],
                                                    keys=f"k{i}", region="eu" if i % 2 else "us"))
                           for i in range(9)]
                assert all(a.code == ResponseCode.SUCCESS for a in answers)
                assert [int(a.ext_fields["queueOffset"]) for a in answers] == list(range(9))
                route = await names.invoke(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}))
                assert route.code == ResponseCode.SUCCESS  # the auto-created topic was registered at once
                assert TopicRouteData.decode(route.body).broker_datas[0].broker_addrs == {0: b.address}

                got = await client.invoke(pull("T", 0, "TagA || TagB"))
                assert got.code == ResponseCode.SUCCESS
                msgs = records(got.body)
                assert [m.body for m in msgs] == [b"m0", b"m1", b"m3", b"m4", b"m6", b"m7"]
                assert got.ext_fields["nextBeginOffset"] == "9" and got.ext_fields["maxOffset"] == "9"
                with MessageStore(tmp_path / "s", read_only=True) as s:  # the bytes are the stored records
                    stored = s.get_message("x", "T", 0, 0, 32).messages
                    assert msgs[0].commit_log_offset == stored[0].commit_log_offset
                sql = records((await client.invoke(pull("T", 0, "region = 'eu' AND TAGS <> 'TagC'", "SQL92"))).body)
                assert [m.body for m in sql] == [b"m1", b"m3", b"m7"]
                bad = await client.invoke(pull("T", 0, "region = ", "SQL92"))
                assert bad.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED and "ends too early" in bad.remark
                empty = await client.invoke(pull("T", 9))
                assert empty.code == ResponseCode.PULL_NOT_FOUND

                # a held pull answers when a message arrives, not when the timeout passes
                started = time.monotonic()
                held = asyncio.ensure_future(client.invoke(pull("T", 9, suspend_ms=10_000), timeout=20))
                await asyncio.sleep(0.3)
                await client.invoke(send("T", b"late", tags="TagA"))
                late = await held
                assert late.code == ResponseCode.SUCCESS and [m.body for m in records(late.body)] == [b"late"]
                assert time.monotonic() - started < 5

                # offsets: a new group on a young queue starts at 0; committed offsets are the store's
                q = await client.invoke(RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, {
                    "consumerGroup": "g2", "topic": "T", "queueId": 0}))
                assert (q.code, q.ext_fields["offset"]) == (ResponseCode.SUCCESS, "0")
                await client.invoke(pull("T", 3, group="g2", commit=3))
                await client.invoke(RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {
                    "consumerGroup": "g2", "topic": "T", "queueId": 0, "commitOffset": 7}))
                q = await client.invoke(RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, {
                    "consumerGroup": "g2", "topic": "T", "queueId": 0}))
                assert q.ext_fields["offset"] == "7"
                assert OffsetStore(tmp_path / "s", "g2").read_offset(("T", 0)) == 7  # where rmq stat and Spark read
                mx = await client.invoke(RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": "T",
                                                                                              "queueId": 0}))
                assert mx.ext_fields["offset"] == "10"
                nope = await client.invoke(pull("Nope", 0))
                assert nope.code == ResponseCode.TOPIC_NOT_EXIST
    asyncio.run(main())


PRODUCER = """
    import sys
    from rocketmq.client import Message, Producer
    p = Producer("cpp-producer")
    p.set_namesrv_addr(sys.argv[1])
    p.start()
    for i in range(int(sys.argv[2])):
        m = Message("CppTopic")
        m.set_keys("key-%d" % i)
        m.set_tags(["TagA", "TagB", "TagC"][i % 3])
        m.set_property("seq", str(i))
        m.set_body("body-%d" % i)
        if i % 100 == 7:
            p.send_orderly(m, i)  # the queue chosen by the client's selector: i % queues
        else:
            p.send_sync(m)
    p.shutdown()
    print("sent", flush=True)
"""

CONSUMER = """
    import sys, time, json
    from rocketmq.client import PushConsumer
    want = int(sys.argv[2])
    seen = []
    def text(v):
        return v.decode() if isinstance(v, bytes) else v
    def on_message(msg):  # returning normally is CONSUME_SUCCESS
        seen.append([text(msg.body), text(msg.tags), text(msg.get_property("seq")), text(msg.keys),
                     msg.queue_id])
    c = PushConsumer("cpp-consumer")
    c.set_namesrv_addr(sys.argv[1])
    c.subscribe("CppTopic", on_message, "TagA || TagB")
    c.start()
    deadline = time.time() + 60
    while len(seen) < want and time.time() < deadline:
        time.sleep(0.2)
    time.sleep(1)
    c.shutdown()
    print(json.dumps(seen), flush=True)
"""


def test_the_rocketmq_cpp_client_produces_and_consumes_through_the_broker(tmp_path, spark):
    """10,000 messages from the C++ Producer (send_sync, every hundredth send_orderly to the queue its selector
    picks), tags, keys and a property; its PushConsumer with `TagA || TagB` receives exactly the matching ones;
    `rmq check` is clean and Spark reads the same messages from the store."""
    pytest.importorskip("rocketmq.client", reason="the rocketmq==0.4.4 test extra (the Apache RocketMQ C++ client)")
    n = 10_000

    async def main():
        async with NameServer("127.0.0.1:0") as ns, Broker(tmp_path / "s", "127.0.0.1:0", namesrv=ns.address):
            rc, out, err = await _child(PRODUCER, ns.address, n, home=tmp_path / "p", timeout=240)
            assert rc == 0 and out.strip() == "sent", err[-2000:]
            rc, out, err = await _child(CONSUMER, ns.address, n * 2 // 3 + 1, home=tmp_path / "c")
            assert rc == 0, err[-2000:]
            return json.loads(out.strip().splitlines()[-1])
    seen = asyncio.run(main())
    tags = ["TagA", "TagB", "TagC"]
    expected = {(f"body-{i}", tags[i % 3], str(i), f"key-{i}") for i in range(n) if i % 3 != 2}
    assert len(seen) == len(expected) and {tuple(s[:4]) for s in seen} == expected
    queues = 4  # the C++ producer's defaultTopicQueueNums
    assert all(s[4] == int(s[2]) % queues for s in seen if int(s[2]) % 100 == 7)  # send_orderly's selector
    with MessageStore(tmp_path / "s", read_only=True) as s:
        assert len(s.queues("CppTopic")) == queues
        assert sum(s.max_offset("CppTopic", q) for q in s.queues("CppTopic")) == n
    check = subprocess.run([sys.executable, "-m", "rmq_cli", "-s", str(tmp_path / "s"), "check"],
                           env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr
    rows = spark.read.format("rmq").option("subscribe", "CppTopic").load(str(tmp_path / "s")) \
        .selectExpr("cast(body as string) as body", "tags", "properties['seq'] as seq", "keys[0] as key").collect()
    assert {(r.body, r.tags, r.seq, r.key) for r in rows} == {
        (f"body-{i}", tags[i % 3], str(i), f"key-{i}") for i in range(n)}


def test_rmq_serve_prints_its_addresses_serves_and_stops_cleanly_on_sigterm(tmp_path):
    import signal
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.Popen([sys.executable, "-m", "rmq_cli", "-s", str(tmp_path / "s"), "serve", "--listen",
                             "127.0.0.1:0", "--namesrv-listen", "127.0.0.1:0"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = json.loads(proc.stdout.readline())
        assert line["brokerName"] == "broker-a"

        async def use():
            async with RemotingClient(line["broker"]) as client:
                assert (await client.invoke(send("T", b"hi", tags="TagA"))).code == ResponseCode.SUCCESS
                await client.invoke(RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {
                    "consumerGroup": "g", "topic": "T", "queueId": 0, "commitOffset": 1}))
            async with RemotingClient(line["namesrv"]) as names:
                r = await names.invoke(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}))
                assert TopicRouteData.decode(r.body).broker_datas[0].broker_addrs == {0: line["broker"]}
        asyncio.run(use())

        async def held_then_stopped():
            async with RemotingClient(line["broker"]) as client:
                held = asyncio.ensure_future(client.invoke(pull("T", 1, suspend_ms=60_000), timeout=90))
                await asyncio.sleep(0.5)
                assert not held.done()
                proc.send_signal(signal.SIGTERM)
                return await held  # answered before the broker closes the connection
        answer = asyncio.run(held_then_stopped())
        assert answer.code == ResponseCode.PULL_NOT_FOUND and answer.ext_fields["nextBeginOffset"] == "1"
        assert proc.wait(timeout=30) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not (tmp_path / "s" / "abort").exists()  # the store was closed cleanly
    assert OffsetStore(tmp_path / "s", "g").read_offset(("T", 0)) == 1
    with MessageStore(tmp_path / "s", read_only=True) as s:
        assert [m.body for m in s.get_message("x", "T", 0, 0).messages] == [b"hi"]


def test_group_members_are_told_when_the_group_changes(tmp_path):
    """NOTIFY_CONSUMER_IDS_CHANGED to every member when one joins or leaves (or stops sending heartbeats)."""
    def heartbeat(client_id):
        return RemotingCommand.request(RequestCode.HEART_BEAT, body=json.dumps({
            "clientID": client_id, "producerDataSet": [], "consumerDataSet": [{
                "groupName": "g", "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
                "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "unitMode": False,
                "subscriptionDataSet": [{"topic": "T", "subString": "*", "tagsSet": [], "codeSet": [],
                                         "subVersion": 0, "expressionType": "TAG"}]}]}).encode())

    async def main():
        async with Broker(tmp_path / "s", "127.0.0.1:0", client_expiry_s=0.5) as b:
            notes = {"a": [], "b": []}
            a, c = RemotingClient(b.address), RemotingClient(b.address)

            async def on_a(cmd):
                notes["a"].append(cmd.code)

            async def on_c(cmd):
                notes["b"].append(cmd.code)
            a.on_request, c.on_request = on_a, on_c
            await a.connect()
            await c.connect()
            await a.invoke(heartbeat("a"))
            await c.invoke(heartbeat("b"))
            ids = await a.invoke(RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                                                         {"consumerGroup": "g"}))
            assert json.loads(ids.body) == {"consumerIdList": ["a", "b"]}
            await asyncio.sleep(0.1)
            assert notes["a"] == [RequestCode.NOTIFY_CONSUMER_IDS_CHANGED] * 2  # its own join, then b's
            await c.close()  # b leaves: a is told
            await asyncio.sleep(0.1)
            assert len(notes["a"]) == 3
            ids = await a.invoke(RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                                                         {"consumerGroup": "g"}))
            assert json.loads(ids.body) == {"consumerIdList": ["a"]}
            await asyncio.sleep(1.0)  # a sends no heartbeat: it expires
            ids = await a.invoke(RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                                                         {"consumerGroup": "g"}))
            assert ids.code == ResponseCode.SYSTEM_ERROR
            await a.close()
    asyncio.run(main())


RESUMING_CONSUMER = """
    import sys, time, json
    from rocketmq.client import PushConsumer
    want, seen = int(sys.argv[2]), []
    def on_message(msg):
        seen.append(msg.body.decode() if isinstance(msg.body, bytes) else msg.body)
    c = PushConsumer("cpp-resume")
    c.set_namesrv_addr(sys.argv[1])
    c.subscribe("Resume", on_message, "*")
    c.start()
    deadline = time.time() + 60
    while len(seen) < want and time.time() < deadline:
        time.sleep(0.2)
    # a member until the client's timer (every 5 s) stored its offsets at the queue ends on the broker, read here
    # by our client without joining the group
    from rmq_client import PullConsumer
    with PullConsumer(sys.argv[1], "cpp-resume") as stored:
        deadline = time.time() + 30
        while time.time() < deadline and any(stored.query_offset(mq) != end
                                             for mq, (_, end) in stored.queue_bounds("Resume").items()):
            time.sleep(0.2)
    c.shutdown()
    print(json.dumps(seen), flush=True)
"""


def test_a_restarted_cpp_consumer_resumes_from_the_offsets_the_broker_stored(tmp_path):
    pytest.importorskip("rocketmq.client", reason="the rocketmq==0.4.4 test extra (the Apache RocketMQ C++ client)")

    async def main():
        async with NameServer("127.0.0.1:0") as ns, Broker(tmp_path / "s", "127.0.0.1:0", namesrv=ns.address) as b:
            async with RemotingClient(b.address) as client:
                for i in range(20):
                    await client.invoke(send("Resume", b"first-%d" % i, queue_id=i % 4))
                rc, out, err = await _child(RESUMING_CONSUMER, ns.address, 20, home=tmp_path / "c")
                assert rc == 0, err[-2000:]
                first = json.loads(out.strip().splitlines()[-1])
                for i in range(10):
                    await client.invoke(send("Resume", b"second-%d" % i, queue_id=i % 4))
                rc, out, err = await _child(RESUMING_CONSUMER, ns.address, 10, home=tmp_path / "c")
                assert rc == 0, err[-2000:]
                return first, json.loads(out.strip().splitlines()[-1])
    first, second = asyncio.run(main())
    assert sorted(first) == sorted(f"first-{i}" for i in range(20))
    assert sorted(second) == sorted(f"second-{i}" for i in range(10))  # nothing before the stored offsets again
    for q in range(4):
        assert OffsetStore(tmp_path / "s", "cpp-resume").read_offset(("Resume", q)) == 5 + (3 if q < 2 else 2)


def test_send_back_retries_after_the_delay_level_then_the_dead_letter_queue(tmp_path):
    """CONSUMER_SEND_MSG_BACK: to %RETRY%<group> through SCHEDULE_TOPIC_XXXX after the next delay level, with the
    reconsume count growing; to %DLQ%<group> once maxReconsumeTimes is reached. A message sent with a DELAY level
    arrives no earlier than its delay."""
    async def main():
        async with Broker(tmp_path / "s", "127.0.0.1:0", message_delay_level="1s 1s 1s 1s 1s") as b:
            async with RemotingClient(b.address) as client:
                sent = await client.invoke(send("T", b"work", tags="TagA"))
                offset = json.loads("0")
                first = records((await client.invoke(pull("T", offset))).body)[0]
                retries = []
                msg = first
                for attempt in range(3):
                    back = await client.invoke(RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, {
                        "offset": msg.commit_log_offset, "group": "g", "delayLevel": 0,
                        "originMsgId": sent.ext_fields["msgId"], "maxReconsumeTimes": 2}))
                    assert back.code == ResponseCode.SUCCESS
                    if attempt == 2:
                        break
                    asked = time.monotonic()
                    got = await client.invoke(pull("%RETRY%g", attempt, suspend_ms=5000), timeout=10)
                    waited = time.monotonic() - asked
                    assert got.code == ResponseCode.SUCCESS, got.remark
                    msg = records(got.body)[0]
                    retries.append((msg.body, msg.reconsume_times, msg.properties["RETRY_TOPIC"]))
                    assert 0.5 < waited < 4  # the 1 s level, not at once
                assert retries == [(b"work", 1, "T"), (b"work", 2, "T")]
                dead = records((await client.invoke(pull("%DLQ%g", 0))).body)
                assert [(m.body, m.reconsume_times, m.properties["ORIGIN_MESSAGE_ID"]) for m in dead] == \
                    [(b"work", 3, sent.ext_fields["msgId"])]

                started = time.monotonic()
                await client.invoke(send("T", b"later", tags="TagA", DELAY="2"))
                got = await client.invoke(pull("T", 1, suspend_ms=5000), timeout=10)
                assert [m.body for m in records(got.body)] == [b"later"]
                assert time.monotonic() - started >= 0.9
                assert "DELAY" not in records(got.body)[0].properties
        assert json.loads((tmp_path / "s" / "config" / "delayOffset.json").read_text())["offsetTable"]
    asyncio.run(main())


RETRYING_CONSUMER = """
    import sys, time, json
    from rocketmq.client import PushConsumer, RecvMessage, dll
    from rocketmq.exceptions import ffi_check
    seen, failures = [], {}
    # The wrapper's subscribe() loses a callback's RECONSUME_LATER (it re-raises in a finally), so the status
    # is returned from a callback registered with the C client directly.
    def on_message(consumer, handle):
        msg = RecvMessage(handle)
        body = msg.body.decode() if isinstance(msg.body, bytes) else msg.body
        seen.append([body, msg.reconsume_times, time.time()])
        if body == "flaky" and failures.get(body, 0) < 2:
            failures[body] = failures.get(body, 0) + 1
            return 1  # RECONSUME_LATER
        return 0  # CONSUME_SUCCESS
    c = PushConsumer("cpp-retry")
    c.set_namesrv_addr(sys.argv[1])
    ffi_check(dll.Subscribe(c._handle, b"Flaky", b"*"))
    c._register_callback(on_message)
    c.start()
    deadline = time.time() + 60
    while sum(1 for s in seen if s[0] == "flaky") < 3 and time.time() < deadline:
        time.sleep(0.2)
    c.shutdown()
    print(json.dumps(seen), flush=True)
"""


def test_a_cpp_consumer_that_fails_twice_gets_the_message_three_times(tmp_path):
    pytest.importorskip("rocketmq.client", reason="the rocketmq==0.4.4 test extra (the Apache RocketMQ C++ client)")

    async def main():
        async with NameServer("127.0.0.1:0") as ns, Broker(tmp_path / "s", "127.0.0.1:0", namesrv=ns.address,
                                                          message_delay_level="1s 1s 1s 1s 1s") as b:
            async with RemotingClient(b.address) as client:
                await client.invoke(send("Flaky", b"flaky", queue_id=0))
                rc, out, err = await _child(RETRYING_CONSUMER, ns.address, home=tmp_path / "c")
                assert rc == 0, err[-2000:]
                return json.loads(out.strip().splitlines()[-1])
    seen = asyncio.run(main())
    flaky = [s for s in seen if s[0] == "flaky"]
    assert [s[1] for s in flaky] == [0, 1, 2]  # reconsume times
    assert all(b[2] - a[2] >= 0.9 for a, b in zip(flaky, flaky[1:]))  # each retry waited its 1 s level


DELAYED_PRODUCER = """
    import sys
    from rocketmq.client import Message, Producer
    p = Producer("cpp-delayed")
    p.set_namesrv_addr(sys.argv[1])
    p.start()
    m = Message("Later")
    m.set_body("delayed")
    m.set_delay_time_level(2)
    p.send_sync(m)
    p.shutdown()
"""


def test_a_message_the_cpp_producer_sends_with_a_delay_level_arrives_no_earlier_than_its_delay(tmp_path):
    pytest.importorskip("rocketmq.client", reason="the rocketmq==0.4.4 test extra (the Apache RocketMQ C++ client)")

    async def main():
        async with NameServer("127.0.0.1:0") as ns, Broker(tmp_path / "s", "127.0.0.1:0", namesrv=ns.address,
                                                          message_delay_level="1s 3s 1s") as b:
            b.store.create_topic("Later", 1)
            await b.register()
            async with RemotingClient(b.address) as client:
                sent = time.time()
                rc, _, err = await _child(DELAYED_PRODUCER, ns.address, home=tmp_path / "p")
                assert rc == 0, err[-2000:]
                early = await client.invoke(pull("Later", 0))
                assert early.code == ResponseCode.PULL_NOT_FOUND or time.time() - sent >= 3  # not yet there
                held = await client.invoke(pull("Later", 0, suspend_ms=15_000), timeout=20)
                arrived = time.time()
                assert held.code == ResponseCode.SUCCESS
                [m] = records(held.body)
                assert m.body == b"delayed" and m.properties.get("DELAY") is None
                return m.store_timestamp - m.born_timestamp, arrived - sent
    stored_after_ms, _ = asyncio.run(main())
    assert stored_after_ms >= 2900  # level 2 is 3 s: stored in its topic no earlier than that after it was born


def _batch_body(messages) -> bytes:
    """MessageBatch's body as a Java producer encodes it (MessageDecoder.encodeMessage); props a dict or the
    properties text itself."""
    import struct
    import zlib
    out = b""
    for body, props in messages:
        text = (props if isinstance(props, str) else codec.properties_to_string(props)).encode()
        total = 4 + 4 + 4 + 4 + 4 + len(body) + 2 + len(text)
        out += struct.pack(">iiiii", total, 0, zlib.crc32(body) & 0x7FFFFFFF, 0, len(body)) + body + \
            struct.pack(">h", len(text)) + text
    return out


def test_batches_views_locks_and_earliest_times(tmp_path):
    async def main():
        async with Broker(tmp_path / "s", "127.0.0.1:0") as b:
            async with RemotingClient(b.address) as client:
                batch = RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, {
                    "producerGroup": "p", "topic": "B", "defaultTopic": "TBW102", "defaultTopicQueueNums": 2,
                    "queueId": 1, "sysFlag": 0, "bornTimestamp": 1, "flag": 0, "properties": "",
                    "reconsumeTimes": 0, "unitMode": False, "batch": True},
                    body=_batch_body([(b"b%d" % i, {"TAGS": "T%d" % i, "UNIQ_KEY": "U%d" % i}) for i in range(5)]))
                answer = await client.invoke(batch)
                assert answer.code == ResponseCode.SUCCESS and answer.ext_fields["queueOffset"] == "0"
                got = records((await client.invoke(pull("B", 0, queue_id=1))).body)
                assert [(m.body, m.tags, m.properties["UNIQ_KEY"]) for m in got] == \
                    [(b"b%d" % i, "T%d" % i, "U%d" % i) for i in range(5)]
                bad = await client.invoke(RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, {"topic": "B"},
                                                                  body=b"\x00\x00\x01\x00junk"))
                assert bad.code == ResponseCode.MESSAGE_ILLEGAL and "batch message 0" in bad.remark

                viewed = await client.invoke(RemotingCommand.request(RequestCode.VIEW_MESSAGE_BY_ID,
                                                                     {"offset": got[2].commit_log_offset}))
                assert records(viewed.body)[0].body == b"b2"
                earliest = await client.invoke(RemotingCommand.request(RequestCode.GET_EARLIEST_MSG_STORETIME,
                                                                       {"topic": "B", "queueId": 1}))
                assert int(earliest.ext_fields["timestamp"]) == got[0].store_timestamp

                def lock(code, client_id):
                    return RemotingCommand.request(code, body=json.dumps({
                        "consumerGroup": "g", "clientId": client_id, "onlyThisBroker": False,
                        "mqSet": [{"topic": "B", "brokerName": "broker-a", "queueId": q} for q in (0, 1)]}).encode())
                first = json.loads((await client.invoke(lock(RequestCode.LOCK_BATCH_MQ, "c1"))).body)
                assert [m["queueId"] for m in first["lockOKMQSet"]] == [0, 1]
                second = json.loads((await client.invoke(lock(RequestCode.LOCK_BATCH_MQ, "c2"))).body)
                assert second["lockOKMQSet"] == []  # held by c1
                await client.invoke(lock(RequestCode.UNLOCK_BATCH_MQ, "c1"))
                second = json.loads((await client.invoke(lock(RequestCode.LOCK_BATCH_MQ, "c2"))).body)
                assert [m["queueId"] for m in second["lockOKMQSet"]] == [0, 1]
    asyncio.run(main())


def test_a_batch_with_the_v2_header_as_the_java_client_sends_it_lands_in_its_topic(tmp_path):
    """The Java client sends every batch as SEND_BATCH_MESSAGE with SendMessageRequestHeaderV2's short names (a..m):
    read as RocketMQ reads it, and a long-named field beside them (topic) is not what decides the topic."""
    async def main():
        async with Broker(tmp_path / "s", "127.0.0.1:0") as b:
            async with RemotingClient(b.address) as client:
                batch = RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, {
                    "a": "p", "b": "J", "c": "TBW102", "d": 4, "e": 2, "f": 0, "g": 1, "h": 0, "i": "",
                    "j": 0, "k": False, "m": True, "topic": "Other"},
                    body=_batch_body([(b"j%d" % i, {"TAGS": "T", "UNIQ_KEY": "U%d" % i}) for i in range(3)]))
                answer = await client.invoke(batch)
                assert answer.code == ResponseCode.SUCCESS, answer.remark
                assert answer.ext_fields["queueId"] == "2" and answer.ext_fields["queueOffset"] == "0"
                got = records((await client.invoke(pull("J", 0, queue_id=2))).body)
                assert [m.body for m in got] == [b"j0", b"j1", b"j2"]
                assert "Other" not in b.store.topics()
    asyncio.run(main())


def test_malformed_requests_get_codes_never_data_and_never_take_the_broker_down(tmp_path):
    """10,000 bad frames over 4,012 connections: 6,000 requests of every code the broker serves with fields of the
    wrong type or range, batch bodies that lie about their lengths, unknown codes (each answered with a RocketMQ
    response code and a remark), and 4,000 frames that do not decode (random bytes, truncations, oversize
    lengths, non-JSON and lying binary headers; each closes its own connection). Nothing is written, `rmq check`
    stays clean, and a well-behaved client is served throughout."""
    import random
    import struct as st

    from store.store_check import check_store
    rng = random.Random(5)
    bad_values = ["", "x", "-1", "99999999999999999999", "1.5", "true", "\x00", "%%%", "a" * 300]
    codes: list[int] = []  # every code the broker serves (read from it below) and an unknown one
    fields = ["topic", "queueId", "queueOffset", "consumerGroup", "offset", "commitOffset", "maxMsgNums", "sysFlag",
              "b", "e", "group", "delayLevel"]

    bad_topics = ["bad topic", "a/b", "", "x" * 200, "\x00", "1.5"]  # no valid topic name among them

    def bad_request() -> RemotingCommand:
        code = rng.choice(codes)
        ext = {f: rng.choice(bad_values) for f in rng.sample(fields, rng.randrange(0, 5))}
        for f in ("topic", "b"):
            if f in ext or code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_BATCH_MESSAGE):
                ext[f] = rng.choice(bad_topics)
        body = rng.randbytes(rng.randrange(0, 64)) if rng.random() < 0.7 else \
            st.pack(">iiiii", rng.randrange(-5, 10**6), 0, 0, 0, rng.randrange(-5, 10**6))
        return RemotingCommand.request(code, ext, body=body)

    def undecodable(i: int) -> bytes:
        """A frame the server cannot read, of one of six kinds: each closes its own connection."""
        kind = i % 6
        if kind == 0:  # random bytes
            return rng.randbytes(rng.randrange(1, 200))
        if kind == 1:  # truncated: the length promises more than comes before the connection ends
            return st.pack(">iI", 500, 20) + rng.randbytes(rng.randrange(0, 100))
        if kind == 2:  # oversize or negative length
            return st.pack(">i", rng.choice([(16 << 20) + 1, 2**31 - 1, -7, 0, 3])) + rng.randbytes(20)
        if kind == 3:  # a JSON header that is not JSON, or JSON of the wrong shape
            header = rng.choice([b"{not json", b"[1,2]", b'{"code":"x"}', b"\xff\xfe", b'{"code":10,"flag":"a"}'])
            return st.pack(">iI", 4 + len(header), len(header)) + header
        if kind == 4:  # a binary (ROCKETMQ) header with lying lengths
            header = st.pack(">hbhiii", 10, 0, 0, 1, 0, 9999) + rng.randbytes(8)
            return st.pack(">iI", 4 + len(header), (1 << 24) | len(header)) + header
        return st.pack(">iI", 30, 1000) + rng.randbytes(26)  # a header length past the frame

    async def main():
        async with Broker(tmp_path / "s", "127.0.0.1:0") as b:
            codes.extend([*sorted(b.processors), 9999])
            async with RemotingClient(b.address) as good:
                assert (await good.invoke(send("Good", b"kept", tags="TagA"))).code == ResponseCode.SUCCESS
                answered = 0

                async def noisy_client(count: int) -> int:
                    async with RemotingClient(b.address) as noisy:
                        for _ in range(count):
                            r = await noisy.invoke(bad_request(), timeout=10)
                            assert r.is_response and r.code in set(ResponseCode)  # a RocketMQ code, whatever
                    return count
                for round_ in range(3):  # 6,000 requests that decode but are wrong, 4 connections at a time
                    answered += sum(await asyncio.gather(*(noisy_client(500) for _ in range(4))))
                    assert (await good.invoke(pull("Good", 0))).code == ResponseCode.SUCCESS

                async def raw(i: int) -> None:
                    _, w = await asyncio.open_connection(b.server.host, b.server.port)
                    w.write(undecodable(i))
                    await w.drain()
                    if i % 2:
                        w.write_eof()  # half of them end the connection themselves; the broker closes the rest
                    await asyncio.sleep(0.05)
                    w.close()
                for start in range(0, 4000, 100):  # 4,000 that do not decode, each on its own connection
                    await asyncio.gather(*(raw(i) for i in range(start, start + 100)))
                    if start % 1000 == 0:
                        assert (await good.invoke(pull("Good", 0))).code == ResponseCode.SUCCESS
                assert (await good.invoke(pull("Good", 0))).code == ResponseCode.SUCCESS
                await asyncio.sleep(0.5)
                return answered, sorted(b.store.topics()), len(b.server.channels)
    answered, topics, channels = asyncio.run(main())
    assert answered == 6000
    assert channels == 1  # only the good client: every bad connection was closed and forgotten
    # nothing else written (the transaction topics exist from the start)
    assert [t for t in topics if not t.startswith(("%RETRY%", "TBW102", "RMQ_SYS_TRANS_"))] == ["Good"]
    with MessageStore(tmp_path / "s", read_only=True) as s:
        assert sum(s.max_offset("Good", q) for q in s.queues("Good")) == 1
    assert check_store(str(tmp_path / "s")).ok


GROUP_CONSUMER = """
    import sys, json
    from rocketmq.client import PushConsumer
    seen = []
    progress = open(sys.argv[2], "a")  # what it got so far, for the test to wait on
    def on_message(msg):
        body = msg.body.decode() if isinstance(msg.body, bytes) else msg.body
        seen.append(body)
        progress.write(body + "\\n")
        progress.flush()
    c = PushConsumer("cpp-group")
    c.set_namesrv_addr(sys.argv[1])
    c.set_thread_count(1)
    c.subscribe("Shared", on_message, "*")
    c.start()
    sys.stdin.readline()  # a member until the test says so
    c.shutdown()
    print(json.dumps(seen), flush=True)
"""


def test_cpp_consumers_of_one_group_share_the_queues_as_members_come_and_go(tmp_path):
    """Two consumers split the queues; a third joins, one leaves: every message is delivered; duplicates only
    around a membership change (counted)."""
    pytest.importorskip("rocketmq.client", reason="the rocketmq==0.4.4 test extra (the Apache RocketMQ C++ client)")

    async def main():
        def members() -> int:
            return len(b.consumers.member_ids("cpp-group"))

        async with NameServer("127.0.0.1:0") as ns, Broker(tmp_path / "s", "127.0.0.1:0", namesrv=ns.address) as b:
            group = CppMembers(GROUP_CONSUMER, ns.address, tmp_path)
            try:
                async with RemotingClient(b.address) as producer:
                    await producer.invoke(send("Shared", b"warm-up", queue_id=0))
                    b.store.create_topic("Shared", 4)
                    sent = ["warm-up"]

                    async def produce(tag, n):
                        for i in range(n):
                            body = f"{tag}-{i}"
                            await producer.invoke(send("Shared", body.encode(), queue_id=i % 4))
                            sent.append(body)
                        await until(lambda: set(sent) <= set(group.progress()), 60,
                                    f"every message up to {tag!r} delivered")
                    # each change of membership is waited for (the broker tells the members, which rebalance),
                    # then a round of messages, each delivered before the next change
                    await group.join("c1")
                    await group.join("c2")
                    await until(lambda: members() == 2, 60, "two members in the group")
                    await produce("one", 200)
                    await group.join("c3")
                    await until(lambda: members() == 3, 60, "the third member in the group")
                    await produce("two", 200)
                    first = await group.leave("c1")  # the first leaves
                    await until(lambda: members() == 2, 60, "the first member out of the group")
                    await produce("three", 200)
                    results = [first, await group.leave("c2"), await group.leave("c3")]
                    return sent, results, b.consumers.groups
            finally:
                await group.kill()
    sent, results, _ = asyncio.run(main())
    delivered, per_consumer = [], []
    for rc, out, err in results:
        assert rc == 0, err[-2000:]
        got = json.loads(out.strip().splitlines()[-1])
        per_consumer.append(got)
        delivered += got
    assert set(delivered) == set(sent)  # every message delivered
    assert all(per_consumer), [len(g) for g in per_consumer]  # each member, the late one too, had queues
    duplicates = len(delivered) - len(set(delivered))
    print(f"duplicates around the membership changes: {duplicates} of {len(sent)}")
    assert duplicates < len(sent)
