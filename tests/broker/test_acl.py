"""aclEnable=true: every request checked against plain_acl.yml as RocketMQ's PlainAccessValidator checks it, over
real sockets, with the project's client and the Apache RocketMQ C++ client signing with their credentials."""
from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import time

import pytest
from broker_testkit import ROOT, _child, pull

from remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from rmq_acl import AclClientRPCHook, SessionCredentials
from rmq_broker import Broker, NameServer
from rmq_broker.broker_config import BrokerConfig
from rmq_client import AsyncProducer, AsyncPullConsumer, MQClientError, NoPermissionError
from store import MessageStore

SECRET = "s3cr3t-Secret"
ACCOUNTS = f"""
globalWhiteRemoteAddresses:
- 10.10.103.*
accounts:
- accessKey: RocketMQ
  secretKey: "{SECRET}"
  whiteRemoteAddress: 192.168.0.*
  admin: false
  defaultTopicPerm: DENY
  defaultGroupPerm: SUB
  topicPerms:
  - Orders=PUB|SUB
  - PubOnly=PUB
  - SubOnly=SUB
  - Denied=DENY
  groupPerms:
  - NoSub=DENY
- accessKey: rocketmq2
  secretKey: "{SECRET}2"
  admin: true
"""
USER = SessionCredentials("RocketMQ", SECRET)
ADMIN = SessionCredentials("rocketmq2", SECRET + "2")


def acl_broker(tmp_path, ns=None, text=ACCOUNTS) -> Broker:
    (tmp_path / "plain_acl.yml").write_text(text)
    config = BrokerConfig(aclEnable=True, aclFilePath=str(tmp_path / "plain_acl.yml"))
    return Broker(tmp_path / "s", "127.0.0.1:0", namesrv=ns.address if ns else None, broker_config=config)


def signed(cmd: RemotingCommand, credentials=USER) -> RemotingCommand:
    AclClientRPCHook(credentials).do_before_request(cmd)
    return cmd


def send_cmd(topic: str, body: bytes = b"m", queue_id: int = 0) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.SEND_MESSAGE, {
        "producerGroup": "p", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": 1,
        "queueId": queue_id, "sysFlag": 0, "bornTimestamp": 1, "flag": 0, "properties": "", "reconsumeTimes": 0},
        body=body)


def refused(answer: RemotingCommand, *words: str) -> None:
    assert answer.code == ResponseCode.NO_PERMISSION, (answer.code, answer.remark)
    assert all(w in (answer.remark or "") for w in words), answer.remark
    assert SECRET not in (answer.remark or "")


def test_permissions_per_topic_group_and_admin_with_the_projects_client(tmp_path):
    """PUB sends and does not pull, SUB the opposite, DENY neither; a group without SUB cannot pull, commit or
    query offsets, or send messages back; topic creation is an admin's; each refusal is NO_PERMISSION naming the
    resource and the permission missing, never the secret."""
    async def main():
        async with NameServer("127.0.0.1:0") as ns, acl_broker(tmp_path, ns) as b:
            producer = AsyncProducer(ns.address, credentials=USER)
            consumer = AsyncPullConsumer(ns.address, "g1", credentials=USER)
            try:
                assert (await producer.send("PubOnly", b"hello")).queue_offset == 0
                mq = (await producer.send("Orders", b"hello")).queue
                got = await consumer.pull(mq, 0)
                assert got.messages.column("body").to_pylist() == [b"hello"]
                await consumer.commit_offset(mq, 1)
                assert await consumer.query_offset(mq) == 1
                for topic, words in (("SubOnly", ("topic:SubOnly", "PUB needed", "has SUB (topicPerms)")),
                                     ("Denied", ("topic:Denied", "has DENY")),
                                     ("Other", ("topic:Other", "has DENY (defaultTopicPerm)"))):
                    with pytest.raises(MQClientError) as e:
                        await producer.send(topic, b"no")
                    assert isinstance(e.value, NoPermissionError) and not e.value.retriable
                    assert e.value.code == ResponseCode.NO_PERMISSION and all(w in str(e.value) for w in words)
                async with RemotingClient(b.address) as c:
                    refused(await c.invoke(signed(pull("PubOnly", 0))), "topic:PubOnly", "SUB needed", "has PUB")
                    refused(await c.invoke(signed(pull("Denied", 0))), "topic:Denied")
                    query = {"key": "k", "maxNum": 32, "beginTimestamp": 0, "endTimestamp": 2**62}
                    refused(await c.invoke(signed(RemotingCommand.request(RequestCode.QUERY_MESSAGE, {
                        "topic": "PubOnly", **query}))), "topic:PubOnly", "SUB needed")
                    uniq = dict(got.messages.column("properties")[0].as_py())["UNIQ_KEY"]
                    found = await c.invoke(signed(RemotingCommand.request(RequestCode.QUERY_MESSAGE, {
                        "topic": "Orders", **query, "key": uniq, "_UNIQUE_KEY_QUERY": "true"})))
                    assert found.code == ResponseCode.SUCCESS and b"hello" in found.body
                    # the group: NoSub=DENY
                    refused(await c.invoke(signed(pull("Orders", 0, group="NoSub"))), "group:NoSub", "SUB needed")
                    for code in (RequestCode.UPDATE_CONSUMER_OFFSET, RequestCode.QUERY_CONSUMER_OFFSET):
                        refused(await c.invoke(signed(RemotingCommand.request(code, {
                            "consumerGroup": "NoSub", "topic": "Orders", "queueId": 0, "commitOffset": 1}))),
                            "group:NoSub")
                    refused(await c.invoke(signed(RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, {
                        "offset": 0, "group": "NoSub", "delayLevel": 0, "originMsgId": "x"}))), "group:NoSub")
                    # a consumer's send to its group's retry topic needs the group, not the topic
                    refused(await c.invoke(signed(RemotingCommand.request(RequestCode.SEND_MESSAGE, {
                        "producerGroup": "p", "topic": "%RETRY%NoSub", "group": "NoSub", "queueId": 0},
                        body=b"x"))), "group:NoSub")
                    heartbeat = json.dumps({"clientID": "c1", "consumerDataSet": [{
                        "groupName": "g1", "subscriptionDataSet": [{"topic": "PubOnly", "subString": "*"}]}]})
                    refused(await c.invoke(signed(RemotingCommand.request(RequestCode.HEART_BEAT,
                                                                          body=heartbeat.encode()))),
                            "topic:PubOnly")
                    create = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
                        "topic": "Made", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6})
                    refused(await c.invoke(signed(create)), "Need admin permission for request code=17",
                            "accessKey=RocketMQ")
                    assert (await c.invoke(signed(create, ADMIN))).code == ResponseCode.SUCCESS
            finally:
                await producer.close()
                await consumer.close()
            return b.store.has_topic("Made"), {t: b.store.max_offset(t, 0) for t in ("SubOnly", "Denied", "Other")
                                               if b.store.has_topic(t)}
    made, others = asyncio.run(main())
    assert made and not any(others.values())  # nothing refused was written


def test_wrong_secret_unknown_key_no_credentials_and_tampered_requests_are_refused(tmp_path):
    """Nothing written, nothing delivered: the signature covers every extField and the body. An exact replay of
    a signed request is accepted, as RocketMQ's plain ACL accepts it (it has no nonce or timestamp)."""
    async def main():
        async with acl_broker(tmp_path) as b, RemotingClient(b.address) as c:
            assert (await c.invoke(signed(send_cmd("Orders", b"first")))).code == ResponseCode.SUCCESS
            refused(await c.invoke(signed(send_cmd("Orders"), SessionCredentials("RocketMQ", "not-the-secret"))),
                    "Check signature failed for accessKey=RocketMQ")
            refused(await c.invoke(signed(send_cmd("Orders"), SessionCredentials("Stranger", SECRET))),
                    "No acl config for Stranger")
            refused(await c.invoke(send_cmd("Orders")), "No accessKey is configured")
            refused(await c.invoke(signed(pull("Orders", 0), SessionCredentials("RocketMQ", "not-the-secret"))),
                    "Check signature failed")
            tampered = signed(send_cmd("Orders", b"what was signed"))
            tampered.body = b"something else"
            refused(await c.invoke(tampered), "Check signature failed")
            moved = signed(send_cmd("Orders"))
            moved.ext_fields["topic"] = "PubOnly"
            refused(await c.invoke(moved), "Check signature failed")
            dropped = signed(send_cmd("Orders"))
            del dropped.ext_fields["Signature"]
            refused(await c.invoke(dropped), "Check signature failed")
            again = signed(send_cmd("Orders", b"second"))
            assert (await c.invoke(again)).code == ResponseCode.SUCCESS
            replay = RemotingCommand.request(again.code, dict(again.ext_fields), body=again.body)
            assert (await c.invoke(replay)).code == ResponseCode.SUCCESS
            return b.store.max_offset("Orders", 0)
    assert asyncio.run(main()) == 3  # first, second and its replay


WHITE_LISTED = """
globalWhiteRemoteAddresses:
- {global_white}
accounts:
- accessKey: RocketMQ
  secretKey: "{secret}"
  whiteRemoteAddress: {account_white}
  defaultTopicPerm: DENY
  defaultGroupPerm: SUB
  topicPerms:
  - Orders=PUB|SUB
"""


def _white(global_white: str, account_white: str) -> str:
    return WHITE_LISTED.format(global_white=global_white, account_white=account_white, secret=SECRET)


def test_white_lists_and_a_changed_yml_apply_within_seconds_and_a_broken_one_keeps_the_rules(tmp_path, caplog):
    """A global white address passes any request; an account's white address passes its access key without a
    signature (and without its permissions checked, as in RocketMQ); elsewhere an unsigned request is refused.
    The file is re-read while the broker runs: the new rules apply within seconds, a broken file keeps the old."""
    unsigned_with_key = RemotingCommand.request(RequestCode.SEND_MESSAGE, dict(send_cmd("Orders").ext_fields,
                                                                           AccessKey="RocketMQ"), body=b"w")

    async def main():
        path = tmp_path / "plain_acl.yml"
        async with acl_broker(tmp_path, text=_white("10.0.0.*", "192.168.1.1,192.168.1.2")) as b, \
                RemotingClient(b.address) as c:
            async def code(cmd):  # each time a new request (opaque) with the same fields and body
                return (await c.invoke(RemotingCommand.request(cmd.code, dict(cmd.ext_fields), body=cmd.body))).code

            async def until(cmd, want, seconds=5.0):
                deadline = time.monotonic() + seconds
                while await code(cmd) != want:
                    assert time.monotonic() < deadline, "the changed plain_acl.yml did not apply in time"
                    await asyncio.sleep(0.1)

            refused(await c.invoke(send_cmd("Orders")), "No accessKey is configured", "127.0.0.1")
            refused(await c.invoke(unsigned_with_key), "Check signature failed")
            path.write_text(_white("10.0.0.*", "127.0.0.{1,2}"))  # this client's address: its key needs no signature
            await until(unsigned_with_key, ResponseCode.SUCCESS)
            refused(await c.invoke(send_cmd("Orders")), "No accessKey is configured")
            path.write_text(_white("127.0.0.1", ""))  # global: anything from here passes
            await until(send_cmd("Other"), ResponseCode.SUCCESS)
            with caplog.at_level(logging.ERROR, logger="rmq_acl.plain_permission_manager"):
                path.write_text(_white("127.0.*.*", "").replace("Orders=PUB|SUB", "Orders=WRITE"))  # broken
                deadline = time.monotonic() + 5
                while "does not load" not in caplog.text:
                    assert time.monotonic() < deadline, "the broken file was not noticed"
                    await asyncio.sleep(0.1)
            assert "'WRITE' is not a permission" in caplog.text and SECRET not in caplog.text
            assert await code(send_cmd("Other")) == ResponseCode.SUCCESS  # the previous rules stay
            path.write_text(_white("10.0.0.1", "").replace("Orders=PUB|SUB", "Orders=SUB"))
            await until(signed(send_cmd("Orders")), ResponseCode.NO_PERMISSION)
            refused(await c.invoke(signed(send_cmd("Orders"))), "topic:Orders", "PUB needed", "has SUB")
    asyncio.run(main())


CPP_PRODUCER = """
    import sys
    from rocketmq.client import Message, Producer
    p = Producer("cpp-acl-producer")
    p.set_namesrv_addr(sys.argv[1])
    if sys.argv[2] != "-":
        p.set_session_credentials(sys.argv[2], sys.argv[3], "ALIYUN")
    p.start()
    sent = 0
    for i in range(int(sys.argv[4])):
        m = Message("Orders")
        m.set_tags("TagA")
        m.set_body("order-%d" % i)
        try:
            p.send_sync(m)
            sent += 1
        except Exception as e:
            print("refused", type(e).__name__, flush=True)
            break
    p.shutdown()
    print("sent", sent, flush=True)
"""

CPP_CONSUMER = """
    import sys, time, json
    from rocketmq.client import PushConsumer
    want, seconds = int(sys.argv[4]), float(sys.argv[5])
    seen = []
    c = PushConsumer(sys.argv[6])
    c.set_namesrv_addr(sys.argv[1])
    if sys.argv[2] != "-":
        c.set_session_credentials(sys.argv[2], sys.argv[3], "ALIYUN")
    c.subscribe("Orders", lambda msg: seen.append(msg.body.decode()))
    c.start()
    deadline = time.time() + seconds
    while len(seen) < want and time.time() < deadline:
        time.sleep(0.2)
    c.shutdown()
    print(json.dumps(seen), flush=True)
"""


def test_the_rocketmq_cpp_client_with_credentials_sends_and_consumes_and_without_them_is_refused(tmp_path):
    """The C++ client signs with set_session_credentials: with the account's keys it sends and its push consumer
    gets every message; with a wrong secret, an unknown key, or none, nothing is written and nothing delivered."""
    pytest.importorskip("rocketmq.client", reason="the rocketmq==0.4.4 test extra (the Apache RocketMQ C++ client)")
    n = 20

    async def main():
        async with NameServer("127.0.0.1:0") as ns, acl_broker(tmp_path, ns) as b:
            bad = [("RocketMQ", "wrong-secret"), ("Stranger", SECRET), ("-", "-")]
            results = await asyncio.gather(*[
                _child(CPP_PRODUCER, ns.address, key, secret, 1, home=tmp_path / f"p{i}")
                for i, (key, secret) in enumerate(bad)])
            for rc, out, err in results:
                assert rc == 0 and "refused" in out and "sent 0" in out, out + err[-2000:]
            assert not b.store.has_topic("Orders")
            rc, out, err = await _child(CPP_PRODUCER, ns.address, "RocketMQ", SECRET, n, home=tmp_path / "p")
            assert rc == 0 and out.strip().endswith(f"sent {n}"), out + err[-2000:]
            consumers = await asyncio.gather(
                _child(CPP_CONSUMER, ns.address, "RocketMQ", "wrong-secret", 1, 6, "cpp-acl-other",
                       home=tmp_path / "c0"),
                _child(CPP_CONSUMER, ns.address, "RocketMQ", SECRET, n, 30, "cpp-acl-consumer",
                       home=tmp_path / "c1"))
            return [(rc, err, json.loads(out.strip().splitlines()[-1]) if rc == 0 else None)
                    for rc, out, err in consumers]
    (rc_bad, err_bad, got_bad), (rc, err, got) = asyncio.run(main())
    assert rc_bad == 0 and got_bad == [], err_bad[-2000:]
    assert rc == 0 and sorted(got) == sorted(f"order-{i}" for i in range(n)), err[-2000:]
    with MessageStore(tmp_path / "s", read_only=True) as s:
        assert sum(s.max_offset("Orders", q) for q in s.queues("Orders")) == n


def test_rmq_serve_warns_when_it_listens_beyond_loopback_without_acl(tmp_path):
    """On 0.0.0.0 without aclEnable a warning says anyone can read and write; with aclEnable and the accounts
    beside broker.conf the log names the file in force instead. A plain_acl.yml that does not load stops it."""
    (tmp_path / "plain_acl.yml").write_text(ACCOUNTS)

    def serve(conf: str) -> tuple[int, str]:
        (tmp_path / "broker.conf").write_text(conf)
        proc = subprocess.Popen([sys.executable, "-m", "rmq_cli", "-s", str(tmp_path / "s"), "serve", "--config",
                                 str(tmp_path / "broker.conf"), "--listen", "0.0.0.0:0", "--namesrv-listen",
                                 "127.0.0.1:0"], env=dict(os.environ, PYTHONPATH=ROOT), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            if proc.stdout is not None and proc.stdout.readline():
                proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        return proc.returncode, err

    rc, err = serve("brokerName = open\n")
    assert rc == 0 and "with aclEnable=false: anyone who reaches it can read and write every topic" in err
    rc, err = serve("aclEnable = true\n")
    assert rc == 0 and "aclEnable=false" not in err and f"ACL: {tmp_path / 'plain_acl.yml'} in force" in err
    (tmp_path / "plain_acl.yml").write_text(ACCOUNTS.replace("PubOnly=PUB", "PubOnly=PUBLISH"))
    rc, err = serve("aclEnable = true\n")
    assert rc == 2 and "account 'RocketMQ'.topicPerms PubOnly: 'PUBLISH' is not a permission" in err, err
    assert SECRET not in err
