"""Single sends read in one turn of the broker's loop are appended together (rmq_broker/send_coalescer.py): each
still gets its own answer, queue offsets in the order the sends were read, the message it sent at the offset its
SEND_OK names; one the store refuses is refused alone; a delayed send or a batch read after them is stored after
them; under SYNC_FLUSH none is acknowledged before the fsync covering it."""
from __future__ import annotations

import asyncio

from broker_testkit import pull, records, send, send_batch

from remoting import RemotingClient, ResponseCode
from rmq_broker import Broker
from store import StoreConfig


def test_pipelined_sends_are_appended_together_each_answered_in_order(tmp_path):
    async def main():
        config = StoreConfig(maxMessageSize=1000)
        async with Broker(tmp_path / "s", "127.0.0.1:0", config=config) as b:
            async with RemotingClient(b.address) as client:
                coalescer = b.processors[send("T", b"").code].coalescer
                await client.invoke(send("T", b"first", queue_id=0))  # the topic exists
                before = coalescer.coalesced
                requests = [send("T", b"m%d" % i, queue_id=i % 2) for i in range(20)]
                requests[7] = send("T", b"x" * 2000, queue_id=1)  # over maxMessageSize
                requests[12] = send("T", b"later", queue_id=0, DELAY="1")  # goes to the schedule topic
                requests.append(send_batch("T", [b"b0", b"b1"], queue_id=0))
                answers = await asyncio.gather(*[client.invoke(r) for r in requests])
                assert coalescer.coalesced > before  # appended together
                assert answers[7].code == ResponseCode.MESSAGE_ILLEGAL and "2000" in answers[7].remark
                ok = [i for i, a in enumerate(answers) if i not in (7, 12)]
                assert all(answers[i].code == ResponseCode.SUCCESS for i in ok), [answers[i].remark for i in ok]
                stored = {}
                for queue in (0, 1):
                    got = await client.invoke(pull("T", 0, queue_id=queue))
                    stored[queue] = [(m.queue_offset, m.body) for m in records(got.body)]
                for i in ok[:-1]:  # each SEND_OK names the offset its message got
                    where = (int(answers[i].ext_fields["queueOffset"]), b"m%d" % i)
                    assert where in stored[i % 2], (i, where)
                # in the order read: queue 0 has first, the even ones but 12, then the batch
                assert [body for _, body in stored[0]] == \
                    [b"first"] + [b"m%d" % i for i in range(0, 20, 2) if i != 12] + [b"b0", b"b1"]
                assert [body for _, body in stored[1]] == [b"m%d" % i for i in range(1, 20, 2) if i != 7]
    asyncio.run(main())


def test_sync_flush_sends_appended_together_are_acknowledged_after_their_fsync(tmp_path, monkeypatch):
    async def main():
        async with Broker(tmp_path / "s", "127.0.0.1:0", config=StoreConfig(flushDiskType="SYNC_FLUSH")) as b:
            synced = []
            real = b.store.sync_to
            monkeypatch.setattr(b.store, "sync_to", lambda offset: synced.append(offset) or real(offset))
            async with RemotingClient(b.address) as client:
                await client.invoke(send("T", b"first", queue_id=0))
                answers = await asyncio.gather(*[client.invoke(send("T", b"m%d" % i, queue_id=0)) for i in range(10)])
                assert all(a.code == ResponseCode.SUCCESS for a in answers)
                assert b.store.synced_end >= b.store.commit_log_max_offset()
                assert len(synced) < 11  # one fsync served several sends
    asyncio.run(main())


def test_pipelined_batches_are_appended_together_in_order(tmp_path):
    async def main():
        async with Broker(tmp_path / "s", "127.0.0.1:0") as b:
            async with RemotingClient(b.address) as client:
                coalescer = b.processors[send("T", b"").code].coalescer
                await client.invoke(send("T", b"first", queue_id=0))
                before = coalescer.coalesced
                requests = [send_batch("T", [b"a%d" % i, b"b%d" % i], queue_id=i % 2) for i in range(8)]
                torn = send_batch("T", [b"torn"], queue_id=0)
                torn.body = torn.body[:-2]
                requests[3] = torn
                requests[5] = send_batch("T", [b"\xff odd"], queue_id=1, k="vä\x01lue")  # not the usual batch
                answers = await asyncio.gather(*[client.invoke(r) for r in requests])
                assert coalescer.coalesced > before
                assert answers[3].code == ResponseCode.MESSAGE_ILLEGAL, answers[3].remark
                assert all(a.code == ResponseCode.SUCCESS for i, a in enumerate(answers) if i != 3), \
                    [a.remark for a in answers]
                stored = {q: [m.body for m in records((await client.invoke(pull("T", 0, queue_id=q))).body)]
                          for q in (0, 1)}
                assert stored[0] == [b"first"] + [x for i in (0, 2, 4, 6) for x in (b"a%d" % i, b"b%d" % i)]
                assert stored[1] == [b"a1", b"b1", b"\xff odd", b"a7", b"b7"]  # 3 was torn, 5 went the long way
                assert int(answers[7].ext_fields["queueOffset"]) == 3
    asyncio.run(main())


def test_a_send_is_answered_once_its_record_is_written_unless_a_pull_waits_on_its_queue(tmp_path):
    """ASYNC_FLUSH: a send's answer leaves once the commitlog holds its record (before its consume-queue unit);
    with a pull held on its queue the send waits for the unit, and the held pull gets the message in the same turn.
    Either way the SEND_OK names where the message is, and a pull right after it finds it there."""
    async def main():
        async with Broker(tmp_path / "s", "127.0.0.1:0") as b:
            async with RemotingClient(b.address) as producer, RemotingClient(b.address) as consumer:
                coalescer = b.processors[send("T", b"").code].coalescer
                await producer.invoke(send("T", b"first", queue_id=0))
                early = coalescer.answered_early
                ok = await producer.invoke(send("T", b"alone", queue_id=0))
                assert coalescer.answered_early == early + 1
                got = await producer.invoke(pull("T", int(ok.ext_fields["queueOffset"]), queue_id=0))
                assert [m.body for m in records(got.body)][:1] == [b"alone"]

                held = asyncio.ensure_future(consumer.invoke(pull("T", 0, queue_id=1, suspend_ms=15000)))
                while not b.hold.waiting("T", 1):
                    await asyncio.sleep(0.01)
                ok = await producer.invoke(send("T", b"awaited", queue_id=1))
                assert ok.code == ResponseCode.SUCCESS and coalescer.answered_early == early + 1
                answer = await asyncio.wait_for(held, 10)
                assert [m.body for m in records(answer.body)] == [b"awaited"]
    asyncio.run(main())
