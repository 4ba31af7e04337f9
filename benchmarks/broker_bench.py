"""The broker over loopback, each figure beside a reference measured in the same run. The broker runs as
`rmq serve` in its own process (as a user runs it); the clients run here.

1. Send: SEND_BATCH_MESSAGE of 1,000 x 100-byte messages, 4 requests in flight, from the project's client:
   messages/s, as a ratio to put_batch of the same messages in-process (target >= 0.4).
2. Pull: 8 queues, 8 requests in flight, maxMsgNums 32: messages/s (target >= 250,000 on 2 cores); and with
   maxMsgNums 1,024: bytes/s as a ratio to a plain loopback socket streaming the same record bytes in responses
   of the same size (target >= 0.5).
3. Long polling: 1,000 held pulls over 100 queues; from a send's response to the held pull's answer, p50 and p99
   (target p99 <= 10 ms); the broker's CPU while they are held and nothing arrives (target < 2% of one core).
   And 1,000 idle connections: a client's round trips beside them, as a ratio to the same without them.
4. The Apache RocketMQ C++ client (PyPI rocketmq 0.4.4), when installed: 10,000 messages produced and consumed,
   messages/s, for reference.

    .venv/bin/python benchmarks/broker_bench.py [--messages 200000]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import textwrap
import time
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode  # noqa: E402
from rmq_common import message_codec as codec  # noqa: E402
from store import MessageStore  # noqa: E402

BODY = b"x" * 100
BIG_PULL = 1024
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def batch_body(n: int) -> bytes:
    text = codec.properties_to_string({"TAGS": "TagA"}).encode()
    one = struct.pack(">iiiii", 22 + len(BODY) + len(text), 0, zlib.crc32(BODY) & 0x7FFFFFFF, 0, len(BODY)) + BODY + \
        struct.pack(">h", len(text)) + text
    return one * n


def send_batch(topic: str, queue_id: int, body: bytes, queues: int = 8) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, {
        "producerGroup": "bench", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": queues,
        "queueId": queue_id, "sysFlag": 0, "bornTimestamp": int(time.time() * 1000), "flag": 0, "properties": "",
        "reconsumeTimes": 0, "unitMode": False, "batch": True}, body=body)


def pull(topic: str, queue_id: int, offset: int, max_msgs: int = 32, suspend_ms: int = 0,
         group: str = "bench") -> RemotingCommand:
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, {
        "consumerGroup": group, "topic": topic, "queueId": queue_id, "queueOffset": offset, "maxMsgNums": max_msgs,
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


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime + stime


class Serve:
    """`rmq serve` in a child process, stopped whatever happens."""

    def __init__(self, root: str):
        conf = os.path.join(root, "broker.conf")
        with open(conf, "w") as f:  # big pulls may return up to BIG_PULL messages (RocketMQ's default is 32)
            f.write(f"maxTransferCountOnMessageInMemory = {BIG_PULL}\n"
                    f"maxTransferBytesOnMessageInMemory = {64 << 20}\n"
                    # TBW102's queues cap a topic a send creates: the long-polling topic has 100
                    "defaultTopicQueueNums = 100\n")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rmq_cli", "-s", os.path.join(root, "s"), "serve", "--config", conf,
             "--listen", "127.0.0.1:0", "--namesrv-listen", "127.0.0.1:0"],
            env=dict(os.environ, PYTHONPATH=ROOT), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if not line:
            self.stop()
            raise RuntimeError("rmq serve did not start")
        addresses = json.loads(line)
        self.broker, self.namesrv = addresses["broker"], addresses["namesrv"]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


async def bench_send(client: RemotingClient, root: str, messages: int) -> None:
    body = batch_body(1000)
    await client.invoke(send_batch("T", 0, body))  # creates the topic
    batches = messages // 1000
    in_flight = asyncio.Semaphore(4)

    async def one(i: int) -> None:
        async with in_flight:
            r = await client.invoke(send_batch("T", i % 8, body), timeout=30)
            assert r.code == ResponseCode.SUCCESS, r.remark
    started = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(batches)))
    send_rate = batches * 1000 / (time.perf_counter() - started)
    ref = reference_put_batch(root, batches * 1000)
    print(f"(1) send: SEND_BATCH_MESSAGE 1,000 x 100 B, 4 in flight: {send_rate:12,.0f} msg/s | put_batch "
          f"in-process {ref:12,.0f} msg/s | ratio {send_rate / ref:.2f} (target >= 0.4)", flush=True)


async def drain_all(client: RemotingClient, ends: dict, max_msgs: int) -> tuple[int, int, list[int]]:
    """Pull every queue from 0 to its end, one request in flight per queue: messages, bytes, response sizes."""
    sizes: list[int] = []

    async def drain(q: int) -> int:
        offset, got = 0, 0
        while offset < ends[q]:
            r = await client.invoke(pull("T", q, offset, max_msgs), timeout=30)
            assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)
            next_offset = int(r.ext_fields["nextBeginOffset"])
            got += next_offset - offset  # no filter: every message in between was returned
            offset = next_offset
            sizes.append(len(r.body))
        return got
    pulled = sum(await asyncio.gather(*(drain(q) for q in ends)))
    return pulled, sum(sizes), sizes


async def reference_stream(sizes: list[int], in_flight: int) -> float:
    """A plain loopback socket: a server answering each 4-byte request with a ready response of the next size
    (the same record bytes as the broker's responses would carry), read by a plain asyncio client: bytes/s."""
    payload = batch_body(max(sizes) // len(batch_body(1)) + 1)

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                writer.write(struct.pack(">i", size) + payload[:size])
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()
    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    started = time.perf_counter()
    total, pending = 0, list(sizes)
    for size in pending[:in_flight]:
        writer.write(struct.pack(">i", size))
    next_ask = min(in_flight, len(pending))
    for _ in range(len(pending)):
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        total += len(await reader.readexactly(size))
        if next_ask < len(pending):
            writer.write(struct.pack(">i", pending[next_ask]))
            next_ask += 1
    elapsed = time.perf_counter() - started
    writer.close()
    server.close()
    return total / elapsed


async def bench_pull(client: RemotingClient, messages: int, rounds: int = 5) -> None:
    """Each figure the median of `rounds` full drains (this machine is noisy); the bytes ratio pairs each drain
    with a reference run right after it."""
    ends = {}
    for q in range(8):
        r = await client.invoke(RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": "T", "queueId": q}))
        ends[q] = int(r.ext_fields["offset"])
    total = sum(ends.values())
    rates = []
    for _ in range(rounds):
        started = time.perf_counter()
        pulled, _, _ = await drain_all(client, ends, 32)
        rates.append(pulled / (time.perf_counter() - started))
    print(f"(2) pull: 8 queues, 8 in flight, maxMsgNums 32: {statistics.median(rates):12,.0f} msg/s of {total:,} "
          f"(median of {rounds}, range {min(rates):,.0f}-{max(rates):,.0f}; target >= 250,000)", flush=True)
    byte_rates, refs, ratios = [], [], []
    for _ in range(rounds):
        started = time.perf_counter()
        pulled, nbytes, sizes = await drain_all(client, ends, BIG_PULL)
        byte_rates.append(nbytes / (time.perf_counter() - started))
        refs.append(await reference_stream(sizes, 8))
        ratios.append(byte_rates[-1] / refs[-1])
    print(f"    maxMsgNums {BIG_PULL}: {statistics.median(byte_rates) / 1e6:8,.1f} MB/s ({len(sizes)} responses of "
          f"~{nbytes // len(sizes):,} B) | plain loopback socket, same sizes {statistics.median(refs) / 1e6:8,.1f} "
          f"MB/s | ratio {statistics.median(ratios):.2f} (median of {rounds}, range {min(ratios):.2f}-"
          f"{max(ratios):.2f}; target >= 0.5)", flush=True)


async def bench_long_polling(address: str, broker_pid: int) -> None:
    async with RemotingClient(address) as producer:
        for q in range(100):
            r = await producer.invoke(send_batch("L", q, batch_body(1), queues=100))
            assert r.code == ResponseCode.SUCCESS, r.remark
        clients = [await RemotingClient(address).connect() for _ in range(10)]
        try:
            latencies: list[float] = []
            idle_cpu = []
            for round_ in range(3):
                ends = {}
                for q in range(100):
                    r = await producer.invoke(RemotingCommand.request(RequestCode.GET_MAX_OFFSET,
                                                                      {"topic": "L", "queueId": q}))
                    ends[q] = int(r.ext_fields["offset"])
                # 10 consumer groups x 100 queues, each group on its own connection
                held = {(g, q): asyncio.ensure_future(clients[g].invoke(
                    pull("L", q, ends[q], suspend_ms=60_000, group=f"lp{g}"), timeout=90))
                    for g in range(10) for q in range(100)}
                await asyncio.sleep(1.0)
                assert not any(f.done() for f in held.values()), "a pull was answered with nothing to answer"
                before, t0 = cpu_seconds(broker_pid), time.perf_counter()
                await asyncio.sleep(5.0)
                idle_cpu.append((cpu_seconds(broker_pid) - before) / (time.perf_counter() - t0))
                for q in range(100):
                    await producer.invoke(send_batch("L", q, batch_body(1)))
                    sent = time.perf_counter()
                    for g in range(10):
                        r = await held[(g, q)]
                        assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)
                    # the tenth answer's arrival: every held pull of the queue has its message
                    latencies.append((time.perf_counter() - sent) * 1000)
        finally:
            for c in clients:
                await c.close()
    latencies.sort()
    p50 = statistics.median(latencies)
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    print(f"(3) long polling, 1,000 held pulls over 100 queues: from a send's response to the last of its queue's "
          f"10 held pulls answered: p50 {p50:.2f} ms, p99 {p99:.2f} ms over {len(latencies)} sends "
          f"(target p99 <= 10 ms); broker CPU while 1,000 are held: {max(idle_cpu) * 100:.2f}% of one core "
          f"(worst of {len(idle_cpu)} 5 s windows; target < 2%)", flush=True)


async def bench_idle_connections(address: str, n_idle: int = 1000, trips: int = 3000) -> None:
    async def round_trips() -> float:
        async with RemotingClient(address) as client:
            started = time.perf_counter()
            for _ in range(trips):
                await client.invoke(RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": "T", "queueId": 0}))
            return trips / (time.perf_counter() - started)
    host, _, port = address.rpartition(":")
    alone = await round_trips()
    idle = [await asyncio.open_connection(host, int(port)) for _ in range(n_idle)]
    try:
        beside = await round_trips()
    finally:
        for _, w in idle:
            w.close()
    print(f"    {n_idle:,} idle connections: round trips beside them {beside:10,.0f}/s | without them "
          f"{alone:10,.0f}/s | ratio {beside / alone:.2f}", flush=True)


CPP_PRODUCER = """
    import sys
    from rocketmq.client import Producer, Message
    p = Producer("bench-producer")
    p.set_namesrv_addr(sys.argv[1])
    p.start()
    for i in range(int(sys.argv[2])):
        m = Message("CppBench")
        m.set_tags("TagA")
        m.set_body(b"x" * 100)
        p.send_sync(m)
    p.shutdown()
"""

CPP_CONSUMER = """
    import sys, time
    from rocketmq.client import PushConsumer
    want, seen = int(sys.argv[2]), []
    c = PushConsumer("bench-consumer")
    c.set_namesrv_addr(sys.argv[1])
    c.subscribe("CppBench", lambda msg: seen.append(1), "*")
    c.start()
    deadline = time.time() + 300
    while len(seen) < want and time.time() < deadline:
        time.sleep(0.05)
    c.shutdown()
    print(len(seen), flush=True)
"""


def bench_cpp(namesrv: str, root: str, n: int = 10_000) -> None:
    try:
        import rocketmq.client  # noqa: F401
    except (ImportError, OSError) as e:
        print(f"(4) C++ client: not run ({e})", flush=True)
        return
    env = dict(os.environ, HOME=os.path.join(root, "home"), PYTHONPATH=ROOT)
    os.makedirs(env["HOME"], exist_ok=True)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", textwrap.dedent(CPP_PRODUCER), namesrv, str(n)], env=env, check=True,
                   timeout=600, capture_output=True)
    produced = time.perf_counter() - started
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(CPP_CONSUMER), namesrv, str(n)], env=env,
                         check=True, timeout=600, capture_output=True, text=True).stdout
    consumed = time.perf_counter() - started
    print(f"(4) C++ client, {n:,} x 100 B: send_sync {n / produced:10,.0f} msg/s; push consumer received "
          f"{int(out.strip() or 0):,} at {n / consumed:10,.0f} msg/s (process start and rebalance included)",
          flush=True)


async def bench(root: str, messages: int) -> None:
    serve = Serve(root)
    try:
        async with RemotingClient(serve.broker) as client:
            await bench_send(client, root, messages)
            await bench_pull(client, messages)
        await bench_long_polling(serve.broker, serve.proc.pid)
        await bench_idle_connections(serve.broker)
        bench_cpp(serve.namesrv, root)
    finally:
        serve.stop()


def main() -> int:
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))  # the idle connections
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
