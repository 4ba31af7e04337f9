"""Remoting round trips over loopback, beside a plain asyncio echo of the same frames measured in the same run.

A RemotingServer (in a child process) answers each request with a response carrying the request's extFields and
body, from a processor as the broker registers them (a coroutine, a task per request). The client is a
RemotingClient with 1 or 16 requests in flight; the request a PULL_MESSAGE-sized JSON header (13 extFields) and a
body of 0 B or 4 KiB. The reference is a plain asyncio server (also in a child process) echoing each
length-prefixed frame as it is, driven by a plain asyncio client with the same frames and the same number in
flight: what the loopback and asyncio's streams cost without RocketMQ's codec. Printed: round trips/s of each,
and the ratio.

    .venv/bin/python benchmarks/remoting_bench.py [--seconds 2]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from remoting import RemotingClient, RemotingCommand, RemotingServer, RequestCode, ResponseCode  # noqa: E402

PULL_FIELDS = {"consumerGroup": "bench-group", "topic": "BenchTopic", "queueId": 3, "queueOffset": 123456,
               "maxMsgNums": 32, "sysFlag": 6, "commitOffset": -1, "suspendTimeoutMillis": 15000,
               "subscription": "TagA || TagB", "subVersion": 1700000000000, "expressionType": "TAG",
               "AccessKey": "", "OnsChannel": "ALIYUN"}


# -- the two servers (each run in a child process: `remoting_bench.py --serve remoting|echo`) -----------------------

async def _answer(cmd: RemotingCommand, channel) -> RemotingCommand:
    return cmd.response(ResponseCode.SUCCESS, ext_fields=cmd.ext_fields, body=cmd.body)


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readexactly(4)
            writer.write(head + await reader.readexactly(struct.unpack(">i", head)[0]))
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()


async def _serve(kind: str) -> None:
    if kind == "remoting":
        server = RemotingServer()
        server.register(RequestCode.PULL_MESSAGE, _answer)
        await server.start()
        port = server.port
    else:
        plain = await asyncio.start_server(_echo, "127.0.0.1", 0)
        port = plain.sockets[0].getsockname()[1]
    print(port, flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # until the parent closes stdin


# -- the two clients ---------------------------------------------------------------------------------------------

async def remoting_round_trips(port: int, body: bytes, in_flight: int, seconds: float) -> float:
    async with RemotingClient(f"127.0.0.1:{port}") as client:
        done = 0
        stop = time.perf_counter() + seconds

        async def worker() -> None:
            nonlocal done
            while time.perf_counter() < stop:
                answer = await client.invoke(RemotingCommand.request(RequestCode.PULL_MESSAGE, PULL_FIELDS, body))
                assert answer.code == ResponseCode.SUCCESS and len(answer.body) == len(body)
                done += 1
        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(in_flight)))
        return done / (time.perf_counter() - started)


async def echo_round_trips(port: int, frame: bytes, in_flight: int, seconds: float) -> float:
    """The same frames echoed; replies matched in order (one connection, so they come back in order)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    done = 0
    stop = time.perf_counter() + seconds
    waiting: asyncio.Queue = asyncio.Queue()

    async def read_replies() -> None:
        while True:
            head = await reader.readexactly(4)
            await reader.readexactly(struct.unpack(">i", head)[0])
            waiting.get_nowait().set_result(None)

    reading = asyncio.ensure_future(read_replies())

    async def worker() -> None:
        nonlocal done
        loop = asyncio.get_running_loop()
        while time.perf_counter() < stop:
            fut = loop.create_future()
            waiting.put_nowait(fut)
            writer.write(frame)
            await writer.drain()
            await fut
            done += 1
    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(in_flight)))
    elapsed = time.perf_counter() - started
    reading.cancel()
    writer.close()
    return done / elapsed


def _start(kind: str) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--serve", kind], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline())


def _stop(proc: subprocess.Popen) -> None:
    assert proc.stdin is not None
    proc.stdin.close()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=2.0, help="per measurement")
    ap.add_argument("--serve", choices=["remoting", "echo"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        asyncio.run(_serve(args.serve))
        return 0
    print(f"remoting benchmark (python {sys.version.split()[0]}, {os.cpu_count()} cores, {args.seconds} s each)",
          flush=True)
    remoting_server, remoting_port = _start("remoting")
    echo_server, echo_port = _start("echo")
    try:
        for body_size in (0, 4096):
            body = b"b" * body_size
            frame = RemotingCommand.request(RequestCode.PULL_MESSAGE, PULL_FIELDS, body).encode()
            for in_flight in (1, 16):
                plain = asyncio.run(echo_round_trips(echo_port, frame, in_flight, args.seconds))
                ours = asyncio.run(remoting_round_trips(remoting_port, body, in_flight, args.seconds))
                print(f"frame {len(frame):5,} B, {in_flight:2} in flight: remoting {ours:9,.0f} round trips/s | "
                      f"plain echo {plain:9,.0f}/s | ratio {ours / plain:.2f}", flush=True)
    finally:
        _stop(remoting_server)
        _stop(echo_server)
    return 0


if __name__ == "__main__":
    sys.exit(main())
