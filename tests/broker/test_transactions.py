"""Transactional messages over real sockets with hand-built frames: halves invisible until END_TRANSACTION 37
commits them (then all visible, in their queue, as sent), rollbacks, decisions kept across a restart, wrong
requests refused with codes, and CHECK_TRANSACTION_STATE 39 answered late or never."""
from __future__ import annotations

import asyncio
import json
import time

from broker_testkit import pull, records, send
from test_broker import _batch_body

from remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from rmq_broker import Broker
from rmq_broker.broker_config import BrokerConfig
from rmq_common import message_codec as codec

COMMIT, ROLLBACK, UNKNOWN = 8, 12, 0


def half(topic, body, group="pg", queue_id=0, **props):
    cmd = send(topic, body, queue_id=queue_id, TRAN_MSG="true", PGROUP=group, **props)
    cmd.ext_fields["sysFlag"] = "4"  # TRANSACTION_PREPARED_TYPE, as RocketMQ's producer sets it
    return cmd


def half_batch(topic, n, batch_id, group="pg", queue_id=1):
    return RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, {
        "producerGroup": group, "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": 2,
        "queueId": queue_id, "sysFlag": 0, "bornTimestamp": 1, "flag": 0, "properties": "", "reconsumeTimes": 0,
        "unitMode": False, "batch": True},
        body=_batch_body([(b"b%d" % i, {"TAGS": "T", "UNIQ_KEY": f"{batch_id}-{i}", "TRAN_MSG": "true",
                                        "PGROUP": group, "TRAN_BATCH": batch_id}) for i in range(n)]))


def end(answer, state, group="pg", count=None, from_check=False, offset=None, oneway=False):
    first = answer.ext_fields["msgId"].split(",")[0]
    fields = {"producerGroup": group,
              "tranStateTableOffset": offset if offset is not None else answer.ext_fields["queueOffset"],
              "commitLogOffset": codec.decode_message_id(first)[2], "commitOrRollback": state,
              "fromTransactionCheck": str(from_check).lower(), "msgId": first,
              "transactionId": answer.ext_fields.get("transactionId", "")}
    if count is not None:
        fields["tranStateTableCount"] = count
    return RemotingCommand.request(RequestCode.END_TRANSACTION, fields, oneway=oneway)


def test_halves_are_invisible_until_committed_and_decisions_hold_across_a_restart(tmp_path):
    async def main():
        async with Broker(tmp_path / "s", "127.0.0.1:0") as b:
            async with RemotingClient(b.address) as c:
                await c.invoke(send("T", b"plain"))  # the topic exists, queue 0 at offset 1
                one = await c.invoke(half("T", b"h1", tags="TagA", keys="k1", color="red"))
                assert one.code == ResponseCode.SUCCESS, one.remark
                assert (await c.invoke(pull("T", 1))).code == ResponseCode.PULL_NOT_FOUND
                done = await c.invoke(end(one, COMMIT))
                assert done.code == ResponseCode.SUCCESS, done.remark
                got = records((await c.invoke(pull("T", 1))).body)
                assert [(m.body, m.tags, m.properties.get("KEYS"), m.properties.get("color")) for m in got] == \
                    [(b"h1", "TagA", "k1", "red")]
                assert "REAL_TOPIC" not in got[0].properties and "REAL_QID" not in got[0].properties
                assert got[0].sys_flag & 0xC == COMMIT and got[0].properties["TRAN_MSG"] == "true"
                again = await c.invoke(end(one, COMMIT))  # idempotent: nothing put twice
                assert again.code == ResponseCode.SUCCESS and "already" in again.remark
                assert len(records((await c.invoke(pull("T", 1))).body)) == 1
                back = await c.invoke(end(one, ROLLBACK))
                assert back.code == ResponseCode.TRANSACTION_SHOULD_COMMIT and "committed" in back.remark

                batch = await c.invoke(half_batch("T", 5, "tx-1"))
                assert batch.code == ResponseCode.SUCCESS, batch.remark
                assert len(batch.ext_fields["msgId"].split(",")) == 5
                assert (await c.invoke(end(batch, ROLLBACK, count=5))).code == ResponseCode.SUCCESS
                assert (await c.invoke(pull("T", 0, queue_id=1))).code == ResponseCode.PULL_NOT_FOUND
                late = await c.invoke(end(batch, COMMIT, count=5))
                assert late.code == ResponseCode.TRANSACTION_SHOULD_ROLLBACK and "rolled back" in late.remark

                kept = await c.invoke(half_batch("T", 4, "tx-2"))
                assert (await c.invoke(pull("T", 0, queue_id=1))).code == ResponseCode.PULL_NOT_FOUND
                # refusals: wrong group, offsets outside the half queue, a count past another batch, bad fields
                wrong = await c.invoke(end(kept, COMMIT, group="other", count=4))
                assert wrong.code == ResponseCode.SYSTEM_ERROR and "producer group wrong" in wrong.remark
                far = await c.invoke(end(kept, COMMIT, offset=10_000))
                assert far.code == ResponseCode.SYSTEM_ERROR and "Find prepared transaction" in far.remark
                mixed = await c.invoke(end(kept, COMMIT, count=5))
                assert mixed.code == ResponseCode.SYSTEM_ERROR and "not in the half queue" in mixed.remark
                bad = end(kept, COMMIT, count=4)
                bad.ext_fields["commitOrRollback"] = "3"
                assert "commitOrRollback" in (await c.invoke(bad)).remark
                bad = end(kept, COMMIT, count=4)
                bad.ext_fields["tranStateTableOffset"] = "x"
                assert "tranStateTableOffset" in (await c.invoke(bad)).remark
                await c.invoke_oneway(end(kept, UNKNOWN, count=4, oneway=True))  # nothing happens, no answer
                assert (await c.invoke(pull("T", 0, queue_id=1))).code == ResponseCode.PULL_NOT_FOUND
                no_group = send("T", b"x", TRAN_MSG="true")
                assert (await c.invoke(no_group)).code == ResponseCode.MESSAGE_ILLEGAL
                assert b.transactions.undecided_count() == 4
        # a restarted broker knows every decision: the op messages are in its store
        async with Broker(tmp_path / "s", "127.0.0.1:0") as b:
            async with RemotingClient(b.address) as c:
                assert (await c.invoke(end(one, COMMIT))).code == ResponseCode.SUCCESS
                assert (await c.invoke(end(batch, COMMIT, count=5))).code == ResponseCode.TRANSACTION_SHOULD_ROLLBACK
                assert (await c.invoke(end(kept, COMMIT, count=4))).code == ResponseCode.SUCCESS
                got = records((await c.invoke(pull("T", 0, queue_id=1))).body)
                assert [m.body for m in got] == [b"b0", b"b1", b"b2", b"b3"]
                assert [m.properties["UNIQ_KEY"] for m in got] == [f"tx-2-{i}" for i in range(4)]
                assert len(records((await c.invoke(pull("T", 0))).body)) == 2
                assert b.transactions.undecided_count() == 0
    asyncio.run(main())


def test_check_back_answered_late_commits_and_never_answered_rolls_back(tmp_path):
    config = BrokerConfig(transactionTimeOut=300, transactionCheckInterval=200, transactionCheckMax=3)

    async def main():
        async with Broker(tmp_path / "s", "127.0.0.1:0", broker_config=config) as b:
            async with RemotingClient(b.address) as producer, RemotingClient(b.address) as other:
                checks: list[RemotingCommand] = []

                async def on_request(cmd):
                    checks.append(cmd)
                producer.on_request = on_request
                beat = RemotingCommand.request(RequestCode.HEART_BEAT, body=json.dumps({
                    "clientID": "checker", "producerDataSet": [{"groupName": "pg"}], "consumerDataSet": []}).encode())
                assert (await producer.invoke(beat)).code == ResponseCode.SUCCESS
                await other.invoke(send("T", b"plain"))
                answered = await other.invoke(half("T", b"late"))
                orphan = await other.invoke(half("T", b"never", group="nobody"))
                deadline = time.monotonic() + 10
                while len(checks) < 2 and time.monotonic() < deadline:  # checked again while unanswered
                    await asyncio.sleep(0.05)
                assert len(checks) >= 2 and {c.code for c in checks} == {RequestCode.CHECK_TRANSACTION_STATE}
                first = checks[0]
                assert first.ext_fields["tranStateTableOffset"] == answered.ext_fields["queueOffset"]
                assert records(first.body)[0].body == b"late"  # the half's stored bytes
                assert records(first.body)[0].properties["REAL_TOPIC"] == "T"
                reply = end(answered, COMMIT, from_check=True, oneway=True)
                await producer.invoke_oneway(reply)  # RocketMQ's producer answers a check oneway
                deadline = time.monotonic() + 10
                while b.transactions.undecided_count() and time.monotonic() < deadline:
                    await asyncio.sleep(0.05)
                assert b.transactions.undecided_count() == 0  # the orphan rolled back after 3 checks
                got = records((await other.invoke(pull("T", 1))).body)
                assert [m.body for m in got] == [b"late"]
                assert (await other.invoke(end(orphan, COMMIT, group="nobody"))).code == \
                    ResponseCode.TRANSACTION_SHOULD_ROLLBACK
                assert not any(c.ext_fields["tranStateTableOffset"] == orphan.ext_fields["queueOffset"]
                               for c in checks)  # nobody of its group was there to ask
    asyncio.run(main())


def test_committed_halves_keep_the_properties_texts_as_sent(tmp_path):
    """Halves whose texts end without a \x02 (Java's messageProperties2String), repeat a key or carry TRAN_BATCH
    anywhere: committed, each message reads as sent (the later duplicate winning) plus TRAN_MSG and PGROUP, with
    REAL_TOPIC, REAL_QID and TRAN_BATCH gone; plain batches with such texts read as sent too."""
    tx = "TRAN_MSG\x01true\x02PGROUP\x01pg\x02TRAN_BATCH\x01tx-9"
    texts = [f"TAGS\x01A\x02color\x01red\x02UNIQ_KEY\x01u0\x02{tx}",
             f"TRAN_BATCH\x01tx-9\x02color\x01blue\x02color\x01green\x02{tx}\x02UNIQ_KEY\x01u1",
             f"{tx}\x02TAGS\x01C\x02UNIQ_KEY\x01u2\x02\x02size\x01L"]
    plain_texts = ["TAGS\x01A\x02color\x01red\x02UNIQ_KEY\x01u0\x02x\x01y",
                   "color\x01blue\x02color\x01green\x02x\x01y\x02UNIQ_KEY\x01u1",
                   "x\x01y\x02TAGS\x01C\x02UNIQ_KEY\x01u2\x02\x02size\x01L"]
    want = [{"TAGS": "A", "color": "red", "UNIQ_KEY": "u0"}, {"color": "green", "UNIQ_KEY": "u1"},
            {"TAGS": "C", "UNIQ_KEY": "u2", "size": "L"}]

    async def main():
        async with Broker(tmp_path / "s", "127.0.0.1:0") as b:
            async with RemotingClient(b.address) as c:
                sent = await c.invoke(RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, {
                    "producerGroup": "pg", "topic": "T", "defaultTopic": "TBW102", "defaultTopicQueueNums": 2,
                    "queueId": 1, "sysFlag": 0, "bornTimestamp": 1, "flag": 0, "batch": True},
                    body=_batch_body([(b"b%d" % i, t) for i, t in enumerate(texts)])))
                assert sent.code == ResponseCode.SUCCESS and sent.ext_fields["transactionId"] == "tx-9"
                assert (await c.invoke(end(sent, COMMIT, count=3))).code == ResponseCode.SUCCESS
                got = records((await c.invoke(pull("T", 0, queue_id=1))).body)
                assert [m.body for m in got] == [b"b0", b"b1", b"b2"]
                assert [m.tags for m in got] == ["A", None, "C"]
                assert [m.properties for m in got] == [dict(w, TRAN_MSG="true", PGROUP="pg") for w in want]
                plain = await c.invoke(RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, {
                    "producerGroup": "pg", "topic": "T", "queueId": 0, "sysFlag": 0, "bornTimestamp": 1, "flag": 0,
                    "batch": True}, body=_batch_body([(b"p%d" % i, t) for i, t in enumerate(plain_texts)])))
                assert plain.code == ResponseCode.SUCCESS, plain.remark
                got = records((await c.invoke(pull("T", 0))).body)
                assert [m.properties for m in got] == [dict(w, x="y") for w in want]
                assert [m.tags for m in got] == ["A", None, "C"]
    asyncio.run(main())


def test_ends_racing_for_the_same_halves_decide_them_once(tmp_path):
    """Ends run in threads: many ENDs of the same halves at once, commits and rollbacks mixed, decide them once
    (the messages are in their queue once or not at all, every answer agrees with that one decision), while ends
    of other batches in between commit theirs."""
    async def main():
        async with Broker(tmp_path / "s", "127.0.0.1:0") as b:
            clients = [await RemotingClient(b.address).connect() for _ in range(4)]
            try:
                c, read = clients[0], 0
                for rnd in range(6):
                    racing = await c.invoke(half_batch("T", 300, f"race-{rnd}", queue_id=0))
                    others = [await c.invoke(half_batch("T", 50, f"other-{rnd}-{i}", queue_id=1)) for i in range(3)]
                    states = [COMMIT, ROLLBACK] * 4
                    answers = await asyncio.gather(
                        *(clients[i % 4].invoke(end(racing, st, count=300)) for i, st in enumerate(states)),
                        *(clients[i % 4].invoke(end(o, COMMIT, count=50)) for i, o in enumerate(others)))
                    race, rest = answers[:len(states)], answers[len(states):]
                    assert all(a.code == ResponseCode.SUCCESS for a in rest), [a.remark for a in rest]
                    winners = {st for st, a in zip(states, race) if a.code == ResponseCode.SUCCESS and not a.remark}
                    assert len(winners) == 1, [(a.code, a.remark) for a in race]
                    won = winners.pop()
                    for st, a in zip(states, race):
                        if st == won:
                            assert a.code == ResponseCode.SUCCESS
                        else:
                            assert a.code == (ResponseCode.TRANSACTION_SHOULD_COMMIT if won == COMMIT else
                                              ResponseCode.TRANSACTION_SHOULD_ROLLBACK), a.remark
                    bodies: list[bytes] = []
                    while True:
                        got = await c.invoke(pull("T", read, queue_id=0))
                        if got.code != ResponseCode.SUCCESS:
                            break
                        bodies += [m.body for m in records(got.body)]
                        read += len(records(got.body))
                    assert len(bodies) == (300 if won == COMMIT else 0) and len(set(bodies)) == len(bodies)
                assert b.store.max_offset("T", 1) == 6 * 150
                assert b.transactions.undecided_count() == 0
            finally:
                for client in clients:
                    await client.close()
    asyncio.run(main())
