"""Requests a hostile or unlucky client sends, over real sockets to an in-process broker: each is answered with
RocketMQ's response code and a remark, and none makes a consumer spin, loses others' data, bypasses the ACL or
stops a broker service."""
from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import time
import zlib

from broker_testkit import ROOT, pull, records, send, send_batch, send_v2, serve_process, stop_process

from remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from rmq_acl import AclClientRPCHook, SessionCredentials
from rmq_broker import Broker, NameServer
from rmq_broker.broker_config import BrokerConfig
from rmq_broker.selector_cache import MAX_SELECTOR_CHARS
from rmq_broker.topic_validator import NOT_ALLOWED_SEND_TOPICS
from rmq_client.pull_consumer import AsyncPullConsumer, Subscription
from store import MessageStore, OffsetStore


def run(coro):
    asyncio.run(asyncio.wait_for(coro, 60))


def test_a_sql92_pull_naming_tags_moves_past_every_unit_it_examined(tmp_path):
    """A SQL92 filter on TAGS whose tag codes do not match (TagD against TAGS in ('TagA', 'TagB')) answers
    PULL_RETRY_IMMEDIATELY with nextBeginOffset past the unit, as DefaultMessageStore.getMessage: the consumer
    moves on instead of pulling the same offset forever."""
    async def main():
        async with Broker(tmp_path / "s", "127.0.0.1:0") as b, RemotingClient(b.address) as client:
            for tag in ("TagA", "TagD"):
                assert (await client.invoke(send("T", b"x", tags=tag, a="1"))).code == ResponseCode.SUCCESS
            for sql in ("TAGS in ('TagA', 'TagB')", "a = 1 and TAGS = 'TagA'", "a = 2"):
                answer = await client.invoke(pull("T", 1, sql, "SQL92"))
                assert answer.code == ResponseCode.PULL_RETRY_IMMEDIATELY, (sql, answer.code, answer.remark)
                assert int(answer.ext_fields["nextBeginOffset"]) == 2, (sql, answer.ext_fields)
                found = await client.invoke(pull("T", 0, sql, "SQL92"))
                if sql != "a = 2":
                    assert found.code == ResponseCode.SUCCESS, (sql, found.remark)
                    assert int(found.ext_fields["nextBeginOffset"]) == 2, (sql, found.ext_fields)
    run(main())


def test_a_wire_read_with_a_sql92_filter_on_tags_reads_its_range(tmp_path):
    """What the Spark wire source does for a queue's range (read_range following nextBeginOffset): the queue ends
    with messages the filter's tag codes refuse: the pull's nextBeginOffset moves past them, and the read ends
    instead of failing with "the broker answered offset 39 to a pull at 39"."""
    async def main():
        async with NameServer("127.0.0.1:0") as ns, \
                Broker(tmp_path / "s", "127.0.0.1:0", namesrv=ns.address) as b, RemotingClient(b.address) as client:
            tags = ["TagA" if i % 3 == 0 else "TagD" for i in range(38)] + ["TagD", "TagD"]
            for i, tag in enumerate(tags):
                assert (await client.invoke(send("T", str(i).encode(), tags=tag))).code == ResponseCode.SUCCESS
            consumer = AsyncPullConsumer(ns.address, "g")
            try:
                mq = next(q for q in await consumer.queues("T") if q.queue_id == 0)
                got = [row for batch in [rb async for rb in consumer.read_range(
                    mq, 0, len(tags), Subscription("TAGS in ('TagA', 'TagB')", "SQL92"), max_nums=4)]
                       for row in batch.column("queue_offset").to_pylist()]
            finally:
                await consumer.close()
            assert got == [i for i, t in enumerate(tags) if t == "TagA"]
    run(main())


def test_sends_to_the_brokers_own_topics_are_refused(tmp_path):
    """TopicValidator.isNotAllowedSendTopic: a forged half (then committed), op or delayed message is refused
    NO_PERMISSION on every send code, so it can never reach a topic, erase a decision or stop a service."""
    async def main():
        async with Broker(tmp_path / "s", "127.0.0.1:0") as b, RemotingClient(b.address) as client:
            for topic in sorted(NOT_ALLOWED_SEND_TOPICS):
                forged = send(topic, b"FORGED", REAL_TOPIC="V", REAL_QID="0", PGROUP="x", DELAY="1")
                for cmd in (forged, send_v2(forged), send_batch(topic, [b"FORGED"], REAL_TOPIC="V", REAL_QID="0")):
                    answer = await client.invoke(cmd)
                    assert answer.code == ResponseCode.NO_PERMISSION, (topic, cmd.code, answer.code, answer.remark)
                    assert answer.remark == f"Sending message to topic[{topic}] is forbidden."
            half = b.store.max_offset("RMQ_SYS_TRANS_HALF_TOPIC", 0)
            assert half == 0 and b.store.max_offset("RMQ_SYS_TRANS_OP_HALF_TOPIC", 0) == 0
            answer = await client.invoke(RemotingCommand.request(RequestCode.END_TRANSACTION, {
                "producerGroup": "x", "tranStateTableOffset": "0", "commitLogOffset": "0", "commitOrRollback": "8"}))
            assert answer.code != ResponseCode.SUCCESS
            assert not b.store.has_topic("V")
    run(main())


def _due(client, topic, queue_id, count, timeout=10.0):
    async def wait():
        deadline = time.monotonic() + timeout
        while True:
            answer = await client.invoke(pull(topic, 0, queue_id=queue_id))
            got = records(answer.body) if answer.code == ResponseCode.SUCCESS else []
            if len(got) >= count or time.monotonic() > deadline:
                return got
            await asyncio.sleep(0.2)
    return wait()


def _poisoned_store(path) -> None:
    """What a broker before these checks could be left with: a junk op message, a delayed message without
    REAL_TOPIC, and one for a queue its topic does not have, all due at once."""
    with MessageStore(path) as store:
        for topic, queues in (("RMQ_SYS_TRANS_OP_HALF_TOPIC", 1), ("SCHEDULE_TOPIC_XXXX", 2), ("T", 4)):
            store.create_topic(topic, queues)
        store.put("RMQ_SYS_TRANS_OP_HALF_TOPIC", b"junk", tags="d", queue_id=0)
        store.put("SCHEDULE_TOPIC_XXXX", b"no real topic", properties={"DELAY": "1"}, queue_id=0)
        store.put("SCHEDULE_TOPIC_XXXX", b"no such queue", properties={"DELAY": "1", "REAL_TOPIC": "T",
                                                                        "REAL_QID": "99"}, queue_id=0)


def test_a_poisoned_store_starts_and_delivers_what_is_delayed(tmp_path):
    """A junk op message does not stop the broker from starting; a delayed message without REAL_TOPIC or to a
    queue that does not exist is passed over (logged) and those behind it are delivered; a delayed send to a
    queue that does not exist is refused at once."""
    _poisoned_store(tmp_path / "s")

    async def main():
        async with Broker(tmp_path / "s", "127.0.0.1:0", message_delay_level="1s 2s") as b, \
                RemotingClient(b.address) as client:
            refused = await client.invoke(send("T", b"x", queue_id=99, DELAY="1"))
            assert refused.code == ResponseCode.SYSTEM_ERROR and "queueId[99] is illegal" in refused.remark
            assert (await client.invoke(send("T", b"later", queue_id=1, DELAY="1"))).code == ResponseCode.SUCCESS
            assert [m.body for m in await _due(client, "T", 1, 1)] == [b"later"]
            assert b.schedule._task is not None and not b.schedule._task.done()
    run(main())


def test_sigterm_persists_offsets_after_a_poisoned_delay(tmp_path):
    """A real `rmq serve`: the poisoned schedule does not kill its service, and SIGTERM exits 0 with the offset a
    pull committed persisted."""
    _poisoned_store(tmp_path / "s")
    proc, addresses = serve_process(tmp_path, "messageDelayLevel = 1s 2s\n")
    try:
        async def main():
            async with RemotingClient(addresses["broker"]) as client:
                assert (await client.invoke(send("T", b"now", queue_id=2))).code == ResponseCode.SUCCESS
                assert (await client.invoke(send("T", b"later", queue_id=1, DELAY="1"))).code == ResponseCode.SUCCESS
                assert [m.body for m in await _due(client, "T", 1, 1)] == [b"later"]
                answer = await client.invoke(pull("T", 1, queue_id=2, commit=1))  # commits 1, not persisted yet
                assert answer.code == ResponseCode.PULL_NOT_FOUND
        run(main())
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    finally:
        stop_process(proc)
    offsets = OffsetStore(tmp_path / "s", "g")
    offsets.load()
    assert offsets.read_offset(("T", 2)) == 1


PUBLISHER = SessionCredentials("publisher", "publisher-secret")
READER = SessionCredentials("subscriber", "reader-secret")
ACCOUNTS = f"""
accounts:
- accessKey: {PUBLISHER.access_key}
  secretKey: publisher-secret
  defaultTopicPerm: DENY
  defaultGroupPerm: DENY
  topicPerms:
  - Allowed=PUB
- accessKey: {READER.access_key}
  secretKey: reader-secret
  defaultTopicPerm: DENY
  defaultGroupPerm: DENY
  topicPerms:
  - Readable=SUB
  groupPerms:
  - gA=SUB
- accessKey: administrator
  secretKey: admin-secret
  admin: true
"""
ADMIN = SessionCredentials("administrator", "admin-secret")


def _acl_broker(tmp_path) -> Broker:
    (tmp_path / "plain_acl.yml").write_text(ACCOUNTS)
    return Broker(tmp_path / "s", "127.0.0.1:0", broker_config=BrokerConfig(
        aclEnable=True, aclFilePath=str(tmp_path / "plain_acl.yml")))


def _signed(cmd: RemotingCommand, credentials: SessionCredentials) -> RemotingCommand:
    AclClientRPCHook(credentials).do_before_request(cmd)
    return cmd


def test_the_acl_and_the_broker_read_one_topic_from_a_v2_or_batch_header(tmp_path):
    """An account with PUB on Allowed only: a V2 or batch header naming `b: Allowed` beside `topic: Secret` lands
    in Allowed or nowhere, never in Secret; the Java client's batch (only `b`) is accepted."""
    async def main():
        async with _acl_broker(tmp_path) as b, RemotingClient(b.address) as client:
            secret = await client.invoke(_signed(send("Secret", b"admin's"), ADMIN))
            assert secret.code == ResponseCode.SUCCESS, secret.remark
            for code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
                cmd = send_batch("Allowed", [b"forged"]) if code == RequestCode.SEND_BATCH_MESSAGE else \
                    send_v2(send("Allowed", b"forged"))
                cmd.ext_fields["topic"] = "Secret"
                answer = await client.invoke(_signed(cmd, PUBLISHER))
                assert answer.code in (ResponseCode.SUCCESS, ResponseCode.NO_PERMISSION), (code, answer.remark)
                refused = await client.invoke(_signed(send_v2(send("Secret", b"x")), PUBLISHER))
                assert refused.code == ResponseCode.NO_PERMISSION, refused.remark
            assert b.store.max_offset("Secret", 0) == 1  # the admin's message alone
            java_batch = await client.invoke(_signed(send_batch("Allowed", [b"j1", b"j2"]), PUBLISHER))
            assert java_batch.code == ResponseCode.SUCCESS, java_batch.remark
            got = [m.body for m in records((await client.invoke(_signed(pull("Secret", 0), ADMIN))).body)]
            assert got == [b"admin's"]
    run(main())


def test_selectors_are_bounded_parsed_once_and_never_hold_other_clients(tmp_path):
    """A 1M-tag selector and a SQL92 OR-chain past the bounds are refused SUBSCRIPTION_PARSE_FAILED with a remark
    naming the bound; a selector within them is built once per (group, topic, expression, version), off the event
    loop: another client's GET_MAX_OFFSET sent while it builds is answered first."""
    async def main():
        async with Broker(tmp_path / "s", "127.0.0.1:0") as b, RemotingClient(b.address) as client, \
                RemotingClient(b.address) as other:
            assert (await client.invoke(send("T", b"x", tags="Tag7", a="7"))).code == ResponseCode.SUCCESS
            huge = " || ".join(f"Tag{i}" for i in range(1_000_000))
            nested = "(" * 40 + "a = 1" + ")" * 40
            chain = " or ".join(f"a = {i}" for i in range(100_000))
            for selector, kind, words in ((huge, "TAG", str(MAX_SELECTOR_CHARS)), (chain, "SQL92", "characters"),
                                          (" or ".join(f"a = {i}" for i in range(300)), "SQL92", "AND/OR/NOT"),
                                          (nested, "SQL92", "parentheses 40 deep")):
                answer = await client.invoke(pull("T", 0, selector, kind))
                assert answer.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED, (kind, answer.code, answer.remark)
                assert words in answer.remark, answer.remark
            large = " or ".join(f"a = {i}" for i in range(120))
            order = []

            async def timed(name, c, cmd):
                answer = await c.invoke(cmd)
                order.append(name)
                return answer
            built = b.selectors.built
            found, _ = await asyncio.gather(
                timed("pull", client, pull("T", 0, large, "SQL92")),
                timed("max", other, RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": "T", "queueId": 0})))
            assert found.code == ResponseCode.SUCCESS and [m.body for m in records(found.body)] == [b"x"]
            assert order == ["max", "pull"]
            for _ in range(5):
                assert (await client.invoke(pull("T", 0, large, "SQL92"))).code == ResponseCode.SUCCESS
            assert b.selectors.built == built + 1
            newer = pull("T", 0, large, "SQL92")
            newer.ext_fields["subVersion"] = "2"
            assert (await client.invoke(newer)).code == ResponseCode.SUCCESS
            assert b.selectors.built == built + 2
    run(main())


def test_a_sub_only_account_reads_no_other_topic_through_offsets_retry_sends_or_producer_groups(tmp_path):
    """Holes of RocketMQ 4.x closed: CONSUMER_SEND_MSG_BACK and VIEW_MESSAGE_BY_ID name a message by offset, and
    its topic is checked against the account; a send to %RETRY%<group> needs that group; a heartbeat registering
    a producer group (whose halves are checked back with it) needs the group."""
    def offset_of(answer):
        return int(answer.ext_fields["msgId"][-16:], 16)

    async def main():
        async with _acl_broker(tmp_path) as b, RemotingClient(b.address) as client:
            secret = offset_of(await client.invoke(_signed(send("Secret", b"secret"), ADMIN)))
            readable = offset_of(await client.invoke(_signed(send("Readable", b"mine"), ADMIN)))

            def view(offset):
                return _signed(RemotingCommand.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": offset}), READER)

            def back(offset):
                return _signed(RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, {
                    "group": "gA", "offset": offset, "delayLevel": 0, "originMsgId": "", "originTopic": "",
                    "maxReconsumeTimes": 16}), READER)
            answer = await client.invoke(view(secret))
            assert answer.code == ResponseCode.NO_PERMISSION and "topic:Secret" in answer.remark, answer.remark
            assert answer.body in (b"", None)
            assert (await client.invoke(view(readable))).code == ResponseCode.SUCCESS
            answer = await client.invoke(back(secret))
            assert answer.code == ResponseCode.NO_PERMISSION and "topic:Secret" in answer.remark, answer.remark
            assert not b.store.has_topic("SCHEDULE_TOPIC_XXXX")  # nothing on its way to %RETRY%gA
            assert (await client.invoke(back(readable))).code == ResponseCode.SUCCESS

            retry = send("%RETRY%victimG", b"forged")
            answer = await client.invoke(_signed(retry, READER))
            assert answer.code == ResponseCode.NO_PERMISSION and "group:victimG" in answer.remark, answer.remark
            own = await client.invoke(_signed(send("%RETRY%gA", b"own"), READER))
            assert own.code == ResponseCode.SUCCESS, own.remark

            def heartbeat(producer_group):
                return _signed(RemotingCommand.request(RequestCode.HEART_BEAT, body=json.dumps({
                    "clientID": "thief", "consumerDataSet": [],
                    "producerDataSet": [{"groupName": "CLIENT_INNER_PRODUCER"},
                                        {"groupName": producer_group}]}).encode()), READER)
            answer = await client.invoke(heartbeat("victimPG"))
            assert answer.code == ResponseCode.NO_PERMISSION and "group:victimPG" in answer.remark, answer.remark
            assert (await client.invoke(heartbeat("gA"))).code == ResponseCode.SUCCESS
    run(main())


def test_smaller_holes_queue_counts_perm_negative_offsets_compressed_bodies_and_numbers(tmp_path, caplog):
    """A producer's defaultTopicQueueNums is capped at TBW102's queues; UPDATE_AND_CREATE_TOPIC's perm is the
    topic's; a negative commit offset is refused with a remark and no traceback; a compressed send whose body is
    not zlib is refused MESSAGE_ILLEGAL (and `rmq check` reports one already stored); "1_0" and " 3" are not
    numbers."""
    async def main():
        async with Broker(tmp_path / "s", "127.0.0.1:0") as b, RemotingClient(b.address) as client:
            many = send("Many", b"x")
            many.ext_fields["defaultTopicQueueNums"] = "1000"
            assert (await client.invoke(many)).code == ResponseCode.SUCCESS
            assert len(b.store.queues("Many")) == len(b.store.queues("TBW102")) == 8

            create = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
                "topic": "WriteOnly", "readQueueNums": 4, "writeQueueNums": 4, "perm": 2,
                "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False})
            assert (await client.invoke(create)).code == ResponseCode.SUCCESS
            assert (await client.invoke(send("WriteOnly", b"w"))).code == ResponseCode.SUCCESS
            refused = await client.invoke(pull("WriteOnly", 0))
            assert refused.code == ResponseCode.NO_PERMISSION, refused.remark
            create.ext_fields["perm"] = "6"
            assert (await client.invoke(create)).code == ResponseCode.SUCCESS
            assert (await client.invoke(pull("WriteOnly", 0))).code == ResponseCode.SUCCESS

            caplog.clear()
            with caplog.at_level(logging.INFO):
                negative = await client.invoke(RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {
                    "consumerGroup": "g", "topic": "Many", "queueId": 0, "commitOffset": -5}))
            assert negative.code == ResponseCode.SYSTEM_ERROR and "commitOffset -5 is negative" in negative.remark
            assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"

            junk = send("Z", b"junk", queue_id=0)
            junk.ext_fields["sysFlag"] = "1"
            answer = await client.invoke(junk)
            assert answer.code == ResponseCode.MESSAGE_ILLEGAL and "does not decompress" in answer.remark
            assert b.store.max_offset("Z", 0) == 0
            packed = send("Z", zlib.compress(b"fine" * 100), queue_id=0)
            packed.ext_fields["sysFlag"] = "1"
            assert (await client.invoke(packed)).code == ResponseCode.SUCCESS
            assert [m.body for m in records((await client.invoke(pull("Z", 0))).body)] == [b"fine" * 100]

            for field, value in (("queueOffset", "1_0"), ("queueId", " 3"), ("maxMsgNums", "3 ")):
                bad = pull("Many", 0)
                bad.ext_fields[field] = value
                answer = await client.invoke(bad)
                assert answer.code == ResponseCode.SYSTEM_ERROR, (field, answer.code)
                assert f"{field} is {value!r}, not an integer" in answer.remark, answer.remark
    run(main())

    with MessageStore(tmp_path / "s") as store:  # what a broker before the check stored
        store.put("Z", b"junk", queue_id=0, sys_flag=1)
    check = subprocess.run([sys.executable, "-m", "rmq_cli", "-s", str(tmp_path / "s"), "check"], timeout=120,
                           capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=ROOT))
    assert check.returncode == 1, check.stdout + check.stderr
    assert "does not decompress" in check.stdout, check.stdout
