"""Requests as RocketMQ clients build them, and a child-process runner for the Apache RocketMQ C++ client."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import time

from remoting import RemotingCommand, RequestCode
from remoting.broker_headers import V2_SEND_FIELDS
from rmq_client.producer import encode_batch
from rmq_common import message_codec as codec

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def send(topic, body: bytes, tags=None, keys=None, queue_id=0, **props):
    if tags:
        props["TAGS"] = tags
    if keys:
        props["KEYS"] = keys
    return RemotingCommand.request(RequestCode.SEND_MESSAGE, {
        "producerGroup": "p", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": 4,
        "queueId": queue_id, "sysFlag": 0, "bornTimestamp": int(time.time() * 1000), "flag": 0,
        "properties": codec.properties_to_string(props), "reconsumeTimes": 0, "unitMode": False}, body=body)


def send_v2(cmd: RemotingCommand, code: int = RequestCode.SEND_MESSAGE_V2) -> RemotingCommand:
    """A SEND_MESSAGE request as the Java client sends it: SendMessageRequestHeaderV2's short field names."""
    short = {v: k for k, v in V2_SEND_FIELDS.items()}
    return RemotingCommand.request(code, {short.get(k, k): v for k, v in cmd.ext_fields.items()}, body=cmd.body)


def send_batch(topic, bodies, queue_id=0, **props) -> RemotingCommand:
    """SEND_BATCH_MESSAGE as the Java client sends every batch: the V2 header, a MessageBatch body."""
    header = send(topic, b"", queue_id=queue_id)
    return send_v2(RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, header.ext_fields,
                                           body=encode_batch(bodies, [props] * len(bodies))),
                   RequestCode.SEND_BATCH_MESSAGE)


def pull(topic, offset, subscription="*", kind="TAG", queue_id=0, suspend_ms=0, group="g", commit=-1):
    flag = 0x4 | (0x2 if suspend_ms else 0) | (0x1 if commit >= 0 else 0)
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, {
        "consumerGroup": group, "topic": topic, "queueId": queue_id, "queueOffset": offset, "maxMsgNums": 32,
        "sysFlag": flag, "commitOffset": commit, "suspendTimeoutMillis": suspend_ms, "subscription": subscription,
        "subVersion": 0, "expressionType": kind})


def records(body: bytes):
    out, pos = [], 0
    while pos < len(body):
        m = codec.decode_record(body, pos)
        out.append(m)
        pos += m.store_size
    return out



async def _child(code: str, *args, home, timeout=90):
    env = dict(os.environ, HOME=str(home), PYTHONPATH=ROOT)
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", textwrap.dedent(code), *map(str, args),
                                                env=env, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout=timeout)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    return proc.returncode, out.decode(), err.decode()


async def until(check, timeout: float, what: str) -> None:
    """Until check() is true (polled every 0.1 s); fails naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        await asyncio.sleep(0.1)


class CppMembers:
    """C++ consumer programs (`code` gets the name server's address and a progress file, writes a line there per
    message, and stays a member of its group until a line arrives on its stdin), each with a HOME of its own."""

    def __init__(self, code: str, namesrv: str, tmp_path) -> None:
        self.code, self.namesrv, self.tmp_path = textwrap.dedent(code), namesrv, tmp_path
        self.procs: dict[str, asyncio.subprocess.Process] = {}

    async def join(self, name: str) -> None:
        (self.tmp_path / f"{name}.seen").write_text("")
        self.procs[name] = await asyncio.create_subprocess_exec(
            sys.executable, "-c", self.code, self.namesrv, str(self.tmp_path / f"{name}.seen"),
            env=dict(os.environ, HOME=str(self.tmp_path / name), PYTHONPATH=ROOT), stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)

    async def leave(self, name: str) -> tuple:
        """The member told to leave; its exit code, stdout and stderr."""
        out, err = await asyncio.wait_for(self.procs[name].communicate(b"leave\n"), 60)
        return self.procs[name].returncode, out.decode(), err.decode()

    def progress(self, *names: str) -> list[str]:
        """The lines the members (all of them by default) wrote so far."""
        return [line for name in names or self.procs
                for line in (self.tmp_path / f"{name}.seen").read_text().splitlines()]

    async def kill(self) -> None:
        for proc in self.procs.values():
            if proc.returncode is None:
                proc.kill()
                await proc.wait()


def serve_process(tmp_path, conf: str) -> tuple[subprocess.Popen, dict]:
    """`rmq serve --config broker.conf` on the store tmp_path/s, and the addresses it printed."""
    (tmp_path / "broker.conf").write_text(conf)
    proc = subprocess.Popen([sys.executable, "-m", "rmq_cli", "-s", str(tmp_path / "s"), "serve", "--config",
                             str(tmp_path / "broker.conf"), "--listen", "127.0.0.1:0", "--namesrv-listen",
                             "127.0.0.1:0"], env=dict(os.environ, PYTHONPATH=ROOT), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline() if proc.stdout else ""
    if not line:
        proc.kill()
        proc.wait()
        raise AssertionError("rmq serve did not start")
    return proc, json.loads(line)


def stop_process(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()
