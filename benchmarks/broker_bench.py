"""The broker over loopback, each figure beside a reference measured in the same run.

1. Send: SEND_BATCH_MESSAGE of 1,000 x 100-byte messages, 4 requests in flight, from the project's client:
   messages/s, as a ratio to put_batch of the same messages in-process (target >= 0.4).
2. Pull: 8 queues, 8 requests in flight, maxMsgNums 32: messages/s (target >= 250,000 on 2 cores).
3. Long polling: held pulls over 100 queues; from a send's response to the held pull's answer, p50 and p99
   (target p99 <= 10 ms).

    .venv/bin/python benchmarks/broker_bench.py [--messages 200000]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import struct
import sys
import tempfile
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from broker import Broker  # noqa: E402
from remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode  # noqa: E402
from store import MessageStore  # noqa: E402
from store import message_codec as codec  # noqa: E402

BODY = b"x" * 100


def batch_body(n: int) -> bytes:
    text = codec.properties_to_string({"TAGS": "TagA"}).encode()
    one = struct.pack(">iiiii", 22 + len(BODY) + len(text), 0, zlib.crc32(BODY) & 0x7FFFFFFF, 0, len(BODY)) + BODY + \
        struct.pack(">h", len(text)) + text
    return one * n


def send_batch(topic: str, queue_id: int, body: bytes) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, {
        "producerGroup": "bench", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": 8,
        "queueId": queue_id, "sysFlag": 0, "bornTimestamp": int(time.time() * 1000), "flag": 0, "properties": "",
        "reconsumeTimes": 0, "unitMode": False, "batch": True}, body=body)


def pull(topic: str, queue_id: int, offset: int, max_msgs: int = 32, suspend_ms: int = 0) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, {
        "consumerGroup": "bench", "topic": topic, "queueId": queue_id, "queueOffset": offset, "maxMsgNums": max_msgs,
        "sysFlag": 0x4 | (0x2 if suspend_ms else 0), "commitOffset": -1, "suspendTimeoutMillis": suspend_ms,
        "subscription": "*", "subVersion": 0, "expressionType": "TAG"})


def reference_put_batch(root: str, messages: int) -> float:
    """put_batch of the same 1,000-message batches in-process: messages/s."""
    path = os.path.join(root, "ref")
    with MessageStore(path) as s:
        s.create_topic("R", 8)
        started = time.perf_counter()
        for i in range(messages // 1000):
            s.put_batch("R", [BODY] * 1000, tags="TagA", queue_id=i % 8)
        elapsed = time.perf_counter() - started
    shutil.rmtree(path, ignore_errors=True)
    return messages / elapsed


async def bench(root: str, messages: int) -> None:
    async with Broker(os.path.join(root, "s"), "127.0.0.1:0") as b:
        async with RemotingClient(b.address) as client:
            body = batch_body(1000)
            await client.invoke(send_batch("T", 0, body))  # creates the topic
            batches = messages // 1000
            started = time.perf_counter()
            in_flight = asyncio.Semaphore(4)

            async def one(i: int) -> None:
                async with in_flight:
                    r = await client.invoke(send_batch("T", i % 8, body), timeout=30)
                    assert r.code == ResponseCode.SUCCESS, r.remark
            await asyncio.gather(*(one(i) for i in range(batches)))
            send_rate = batches * 1000 / (time.perf_counter() - started)
            ref = reference_put_batch(root, batches * 1000)
            print(f"(1) send: SEND_BATCH_MESSAGE 1,000 x 100 B, 4 in flight: {send_rate:12,.0f} msg/s | put_batch "
                  f"in-process {ref:12,.0f} msg/s | ratio {send_rate / ref:.2f} (target >= 0.4)", flush=True)

            ends = {q: b.store.max_offset("T", q) for q in range(8)}
            total = sum(ends.values())
            started = time.perf_counter()
            pulled = 0

            async def drain(q: int) -> int:
                offset, got = 0, 0
                while offset < ends[q]:
                    r = await client.invoke(pull("T", q, offset), timeout=30)
                    offset = int(r.ext_fields["nextBeginOffset"])
                    got += r.body.count(b"TagA")  # one TAGS property per record
                return got
            pulled = sum(await asyncio.gather(*(drain(q) for q in range(8))))
            pull_rate = pulled / (time.perf_counter() - started)
            print(f"(2) pull: 8 queues, 8 in flight, maxMsgNums 32: {pull_rate:12,.0f} msg/s of {total:,} "
                  f"(target >= 250,000)", flush=True)

            for q in range(100):
                await client.invoke(send_batch("L", q % 100, batch_body(1)))
            latencies = []
            async with RemotingClient(b.address) as producer:
                for round_ in range(5):
                    held = {q: asyncio.ensure_future(client.invoke(pull("L", q, b.store.max_offset("L", q),
                                                                        suspend_ms=15_000), timeout=30))
                            for q in range(8)}
                    await asyncio.sleep(0.2)
                    for q in range(8):
                        await producer.invoke(send_batch("L", q, batch_body(1)))
                        sent = time.perf_counter()
                        await held[q]
                        latencies.append((time.perf_counter() - sent) * 1000)
            latencies.sort()
            p50 = statistics.median(latencies)
            p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
            print(f"(3) long polling, held pull answered after a send: p50 {p50:.2f} ms, p99 {p99:.2f} ms over "
                  f"{len(latencies)} (target p99 <= 10 ms)", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=200_000)
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="rmq-broker-bench-")
    try:
        print(f"broker benchmark in {root} (python {sys.version.split()[0]}, {os.cpu_count()} cores)", flush=True)
        asyncio.run(bench(root, args.messages))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
