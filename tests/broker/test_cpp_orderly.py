"""The Apache RocketMQ C++ client's orderly push consumer (orderly=True: LOCK_BATCH_MQ before consuming a queue,
one queue at a time, UNLOCK_BATCH_MQ when it moves): each member gets each queue's messages in queue order while
queues move from one member to the other."""
from __future__ import annotations

import asyncio
import json
from collections import defaultdict

import pytest
from broker_testkit import CppMembers, send, until

from remoting import RemotingClient
from rmq_broker import Broker, NameServer

ORDERLY_CONSUMER = """
    import sys, time, json
    from rocketmq.client import PushConsumer
    seen = []
    progress = open(sys.argv[2], "a")  # "<queue> <seq>" per message, for the test to wait on
    def on_message(msg):
        body = msg.body.decode() if isinstance(msg.body, bytes) else msg.body
        seen.append([msg.queue_id, int(body)])
        progress.write(f"{msg.queue_id} {body}\\n")
        progress.flush()
        time.sleep(0.01)  # slow enough that the queues move while there is still work in them
    c = PushConsumer("cpp-orderly", orderly=True)
    c.set_namesrv_addr(sys.argv[1])
    c.set_thread_count(2)
    c.subscribe("Ordered", on_message, "*")
    c.start()
    sys.stdin.readline()  # a member until the test says so
    c.shutdown()
    print(json.dumps(seen), flush=True)
"""


def test_an_orderly_cpp_consumer_gets_each_queue_in_order_while_queues_move(tmp_path):
    pytest.importorskip("rocketmq.client", reason="the rocketmq==0.4.4 test extra (the Apache RocketMQ C++ client)")
    n = 400

    async def main():
        def queues_of(name: str) -> set[int]:
            return {int(line.split()[0]) for line in members.progress(name)}

        def lock_holders() -> set[str]:
            return {client for client, _ in b.locks._locks.get("cpp-orderly", {}).values()}

        def delivered() -> set[int]:
            return {int(line.split()[1]) for line in members.progress()}

        async with NameServer("127.0.0.1:0") as ns, Broker(tmp_path / "s", "127.0.0.1:0", namesrv=ns.address) as b:
            b.store.create_topic("Ordered", 4)
            await b.register()
            members = CppMembers(ORDERLY_CONSUMER, ns.address, tmp_path)
            try:
                async with RemotingClient(b.address) as producer:
                    async def produce(first, count):
                        for i in range(first, first + count):
                            await producer.invoke(send("Ordered", str(i).encode(), queue_id=i % 4))
                    await produce(0, n // 2)
                    await members.join("a")
                    await until(lambda: queues_of("a") == {0, 1, 2, 3}, 60,
                                "the first member holding all four queues and working through them")
                    await members.join("b")
                    # the second member locked queues the first gave up (LOCK_BATCH_MQ on this broker)
                    await until(lambda: len(lock_holders()) == 2, 60, "queues locked by the second member")
                    await produce(n // 2, n // 2)
                    await until(lambda: delivered() == set(range(n)), 60, "every message delivered")
                    return await members.leave("a"), await members.leave("b")
            finally:
                await members.kill()
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
