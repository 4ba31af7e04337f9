"""Soak: 200 well-behaved clients (100 producers sending SYNC every 2 s, 100 long-polling consumers) against one
`rmq serve`, first alone, then beside 20 hostile clients (5 slowloris, 5 that never read the 1 MiB answers they ask
for, 5 sending huge TAG selectors, 5 holding half frames), each phase on a fresh broker for --minutes / 2.

Prints one JSON line: the broker's peak RSS in each phase, the good clients' p99 round trip in each and their ratio
(target <= 2), and how many acknowledged sends were missing from the store afterwards (target 0).

    .venv/bin/python benchmarks/soak_bench.py --minutes 3
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode  # noqa: E402
from rmq_common import message_codec as codec  # noqa: E402
from store import MessageStore  # noqa: E402

PRODUCERS, CONSUMERS, QUEUES = 100, 100, 8
KINDS = ("slowloris", "unread", "selector", "half_frame")
CONF = "serverChannelMaxIdleTimeSeconds = {idle}\n"


def send(topic: str, body: bytes, queue_id: int) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.SEND_MESSAGE, {
        "producerGroup": "soak", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": QUEUES,
        "queueId": queue_id, "sysFlag": 0, "bornTimestamp": int(time.time() * 1000), "flag": 0, "properties": "",
        "reconsumeTimes": 0, "unitMode": False}, body=body)


def pull(topic: str, queue_id: int, offset: int, subscription: str = "*", suspend_ms: int = 2000) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, {
        "consumerGroup": "soak-c", "topic": topic, "queueId": queue_id, "queueOffset": offset, "maxMsgNums": 32,
        "sysFlag": 0x4 | 0x2, "commitOffset": -1, "suspendTimeoutMillis": suspend_ms, "subscription": subscription,
        "subVersion": 0, "expressionType": "TAG"})


def serve(store: str, idle: int) -> tuple[subprocess.Popen, str]:
    conf = os.path.join(store + ".conf")
    with open(conf, "w") as f:
        f.write(CONF.format(idle=idle))
    proc = subprocess.Popen([sys.executable, "-m", "rmq_cli", "-s", store, "serve", "--config", conf, "--listen",
                             "127.0.0.1:0", "--namesrv-listen", "127.0.0.1:0"], stdout=subprocess.PIPE,
                            stderr=open(store + ".log", "w"), text=True, env=dict(os.environ, PYTHONPATH=ROOT))
    line = proc.stdout.readline() if proc.stdout else ""
    if not line:
        proc.kill()
        raise SystemExit("rmq serve did not start; see " + store + ".log")
    return proc, json.loads(line)["broker"]


def rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))


async def good_clients(address: str, seconds: float) -> tuple[list[float], list[bytes], int]:
    """Round trips (s) of the producers' sends and the consumers' offset queries, the bodies acknowledged, and
    the messages the consumers received."""
    rtts: list[float] = []
    acked: list[bytes] = []
    received = [0]
    end = time.monotonic() + seconds

    async def producer(i: int) -> None:
        async with RemotingClient(address) as c:
            n = 0
            while time.monotonic() < end:
                body = b"p%d-%d" % (i, n)
                t0 = time.monotonic()
                try:
                    r = await c.invoke(send("Soak", body, i % QUEUES), timeout=10)
                except (ConnectionError, TimeoutError, OSError):
                    return
                rtts.append(time.monotonic() - t0)
                if r.code == ResponseCode.SUCCESS:
                    acked.append(body)
                n += 1
                await asyncio.sleep(2.0)

    async def consumer(i: int) -> None:
        queue_id, offset = i % QUEUES, 0
        async with RemotingClient(address) as c:
            while time.monotonic() < end:
                try:
                    t0 = time.monotonic()
                    r = await c.invoke(RemotingCommand.request(RequestCode.GET_MAX_OFFSET,
                                                               {"topic": "Soak", "queueId": queue_id}), timeout=10)
                    rtts.append(time.monotonic() - t0)
                    r = await c.invoke(pull("Soak", queue_id, offset), timeout=10)
                except (ConnectionError, TimeoutError, OSError):
                    return
                if r.code == ResponseCode.SUCCESS:
                    offset = int(r.ext_fields["nextBeginOffset"])
                    received[0] += _count(r.body)
                elif "nextBeginOffset" in r.ext_fields:
                    offset = int(r.ext_fields["nextBeginOffset"])
                await asyncio.sleep(1.0)

    async with RemotingClient(address) as c:  # the topic exists before the consumers ask for it
        await c.invoke(send("Soak", b"first", 0), timeout=60)
    await asyncio.gather(*(producer(i) for i in range(PRODUCERS)), *(consumer(i) for i in range(CONSUMERS)))
    return rtts, acked, received[0]


def _count(body: bytes) -> int:
    n, pos = 0, 0
    while pos < len(body):
        pos += struct.unpack_from(">i", body, pos)[0]
        n += 1
    return n


def hostile(address: str, seconds: float, big_offset: int, kinds: list[str]) -> None:
    """5 threads of each kind, each a bad client that reconnects when the broker closes it."""
    host, port = address.rsplit(":", 1)
    end = time.monotonic() + seconds

    def connect(rcvbuf: int = 0) -> socket.socket:
        s = socket.socket()
        if rcvbuf:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        s.connect((host, int(port)))
        s.settimeout(2)
        return s

    def forever(act) -> None:
        while time.monotonic() < end:
            try:
                s = connect(4096)
                try:
                    act(s)
                finally:
                    s.close()
            except OSError:
                time.sleep(0.5)

    def slowloris(s: socket.socket) -> None:
        frame = RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": "Soak", "queueId": 0}).encode()
        for b in frame * 1000:
            if time.monotonic() >= end:
                return
            s.send(bytes([b]))
            time.sleep(1)

    def unread(s: socket.socket) -> None:
        view = RemotingCommand.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": big_offset}).encode()
        while time.monotonic() < end:
            s.send(view * 50)
            time.sleep(1)

    def selector(s: socket.socket) -> None:
        tags = " || ".join(f"tag{i}" for i in range(20_000))
        s.settimeout(30)
        while time.monotonic() < end:
            s.sendall(pull("Soak", 0, 0, subscription=tags, suspend_ms=0).encode())
            s.recv(1 << 20)
            time.sleep(1)

    def half_frame(s: socket.socket) -> None:
        s.sendall(struct.pack(">i", 16 << 20) + b"\0" * (6 << 20))
        while time.monotonic() < end:
            time.sleep(1)

    acts = {"slowloris": slowloris, "unread": unread, "selector": selector, "half_frame": half_frame}
    threads = [threading.Thread(target=forever, args=(acts[kind],), daemon=True) for kind in kinds for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, end - time.monotonic()) + 5)


def phase(workdir: str, name: str, seconds: float, kinds: list[str], idle: int) -> dict:
    store = os.path.join(workdir, name)
    proc, address = serve(store, idle)
    peak = [rss(proc.pid)]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(1.0):
            try:
                peak.append(rss(proc.pid))
            except (OSError, StopIteration):
                return
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    bad = None
    try:
        if kinds:
            async def big() -> int:
                async with RemotingClient(address) as c:
                    r = await c.invoke(send("Big", b"x" * (1 << 20), 0), timeout=60)
                    return codec.decode_message_id(r.ext_fields["msgId"])[2]
            offset = asyncio.run(big())
            bad = subprocess.Popen([sys.executable, __file__, "--hostile", address, "--seconds", str(seconds),
                                    "--offset", str(offset), "--kinds", ",".join(kinds)])
        rtts, acked, received = asyncio.run(good_clients(address, seconds))
    finally:
        stop.set()
        if bad is not None:
            bad.kill()
            bad.wait()
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    with MessageStore(store, read_only=True) as s:
        stored = set()
        for q in s.queues("Soak"):
            offset = 0
            while offset < s.max_offset("Soak", q):
                got = s.get_message("x", "Soak", q, offset, 32)
                stored.update(m.body for m in got.messages)
                offset = got.next_begin_offset
    rtts.sort()
    p99 = rtts[int(len(rtts) * 0.99)] if rtts else float("nan")
    return {"peak_rss_mib": round(max(peak) / (1 << 20), 1), "start_rss_mib": round(peak[0] / (1 << 20), 1),
            "round_trips": len(rtts), "p99_ms": round(p99 * 1000, 1), "p50_ms": round(rtts[len(rtts) // 2] * 1000, 1)
            if rtts else None, "acked": len(acked), "lost": len(set(acked) - stored), "received": received}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=5.0, help="both phases together (default 5)")
    ap.add_argument("--idle", type=int, default=30, help="the broker's serverChannelMaxIdleTimeSeconds (default 30)")
    ap.add_argument("--kinds", default=",".join(KINDS),
                    help=f"hostile kinds, 5 clients each (default {','.join(KINDS)})")
    ap.add_argument("--hostile", help=argparse.SUPPRESS)
    ap.add_argument("--seconds", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--offset", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.hostile:
        hostile(args.hostile, args.seconds, args.offset, args.kinds.split(","))
        return
    kinds = args.kinds.split(",")
    unknown = set(kinds) - set(KINDS)
    if unknown:
        ap.error(f"--kinds: unknown {', '.join(sorted(unknown))}; give some of {','.join(KINDS)}")
    seconds = args.minutes * 60 / 2
    with tempfile.TemporaryDirectory(prefix="soak-") as workdir:
        alone = phase(workdir, "alone", seconds, [], args.idle)
        besieged = phase(workdir, "besieged", seconds, kinds, args.idle)
    print(json.dumps({"minutes": args.minutes, "idle_timeout_s": args.idle, "hostile_kinds": kinds,
                      "alone": alone, "hostile": besieged,
                      "p99_ratio": round(besieged["p99_ms"] / alone["p99_ms"], 2),
                      "lost": alone["lost"] + besieged["lost"]}))


if __name__ == "__main__":
    main()
