"""Requests as RocketMQ clients build them, and a child-process runner for the Apache RocketMQ C++ client."""
from __future__ import annotations

import asyncio
import os
import sys
import textwrap
import time

from remoting import RemotingCommand, RequestCode
from store import message_codec as codec

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
