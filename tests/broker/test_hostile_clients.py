"""Requests a hostile or unlucky client sends, over real sockets to an in-process broker: each is answered with
RocketMQ's response code and a remark, and none makes a consumer spin, loses others' data, bypasses the ACL or
stops a broker service (issue 32)."""
from __future__ import annotations

import asyncio

from broker_testkit import pull, send

from broker import Broker, NameServer
from remoting import RemotingClient, ResponseCode
from rmq_client.pull_consumer import AsyncPullConsumer, Subscription


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
    with messages the filter's tag codes refuse, which used to fail with "the broker answered offset 39 to a
    pull at 39"."""
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
