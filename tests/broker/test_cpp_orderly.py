"""The Apache RocketMQ C++ client's orderly push consumer (orderly=True: LOCK_BATCH_MQ before consuming a queue,
one queue at a time, UNLOCK_BATCH_MQ when it moves): each member gets each queue's messages in queue order while
queues move from one member to the other."""
from __future__ import annotations

import asyncio
import json
from collections import defaultdict

import pytest
from broker_testkit import _child, send

from remoting import RemotingClient
from rmq_broker import Broker, NameServer

ORDERLY_CONSUMER = """
    import sys, time, json
    from rocketmq.client import PushConsumer
    seen = []
    def on_message(msg):
        body = msg.body.decode() if isinstance(msg.body, bytes) else msg.body
        seen.append([msg.queue_id, int(body)])
        time.sleep(0.01)  # slow enough that the queues move while there is still work in them
    c = PushConsumer("cpp-orderly", orderly=True)
    c.set_namesrv_addr(sys.argv[1])
    c.set_thread_count(2)
    c.subscribe("Ordered", on_message, "*")
    c.start()
    time.sleep(float(sys.argv[2]))
    c.shutdown()
    print(json.dumps(seen), flush=True)
"""


def test_an_orderly_cpp_consumer_gets_each_queue_in_order_while_queues_move(tmp_path):
    pytest.importorskip("rocketmq.client", reason="the rocketmq==0.4.4 test extra (the Apache RocketMQ C++ client)")
    n = 400

    async def main():
        async with NameServer("127.0.0.1:0") as ns, Broker(tmp_path / "s", "127.0.0.1:0", namesrv=ns.address) as b:
            b.store.create_topic("Ordered", 4)
            await b.register()
            async with RemotingClient(b.address) as producer:
                async def produce(first, count):
                    for i in range(first, first + count):
                        await producer.invoke(send("Ordered", str(i).encode(), queue_id=i % 4))
                await produce(0, n // 2)
                first = asyncio.ensure_future(_child(ORDERLY_CONSUMER, ns.address, 32, home=tmp_path / "a",
                                                     timeout=100))
                await asyncio.sleep(6)  # the first member holds all four queues and is working through them
                second = asyncio.ensure_future(_child(ORDERLY_CONSUMER, ns.address, 24, home=tmp_path / "b",
                                                      timeout=100))
                await asyncio.sleep(3)
                await produce(n // 2, n // 2)
                return await first, await second
    results = asyncio.run(main())
    per_member = []
    for rc, out, err in results:
        assert rc == 0, err[-2000:]
        per_member.append(json.loads(out.strip().splitlines()[-1]))
    delivered = [seq for got in per_member for _, seq in got]
    assert set(delivered) == set(range(n))  # every message, by one member or the other
    queues_of = []
    for got in per_member:
        by_queue = defaultdict(list)
        for queue_id, seq in got:
            assert seq % 4 == queue_id  # from the queue it was sent to
            by_queue[queue_id].append(seq)
        for queue_id, seqs in by_queue.items():
            assert seqs == sorted(seqs), f"queue {queue_id} out of order: {seqs}"
        queues_of.append(set(by_queue))
    assert queues_of[0] & queues_of[1], queues_of  # a queue moved from the first member to the second
    duplicates = len(delivered) - len(set(delivered))
    print(f"orderly: {len(delivered)} deliveries of {n} messages, {duplicates} duplicates around the move")
