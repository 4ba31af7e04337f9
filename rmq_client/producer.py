"""A producer (RocketMQ's DefaultMQProducer): the topic's write queues from the name server (TBW102's, for the
broker to create the topic, when it has no route yet), a queue chosen by sharding key (SelectMessageQueueByHash)
or round robin, SEND_MESSAGE for one message and SEND_BATCH_MESSAGE for many, and on a failed send another broker
(retryTimesWhenSendFailed). `AsyncProducer` is the asyncio form, `Producer` its blocking face."""
from __future__ import annotations

import itertools
import struct
import time
from typing import Mapping, Optional, Sequence

from remoting import ResponseCode
from rmq_acl import SessionCredentials
from rmq_common import message_codec as codec

from .event_loop import run_blocking
from .mq_client_api import MessageQueue, MQClientAPI, MQClientError, SendResult

DEFAULT_TOPIC = "TBW102"
DEFAULT_TOPIC_QUEUE_NUMS = 4  # a new topic's queues on each broker (DefaultMQProducer.defaultTopicQueueNums)
RETRY_TIMES_WHEN_SEND_FAILED = 2
_NOT_RETRIED = {16, 17, 13}  # NO_PERMISSION, TOPIC_NOT_EXIST, MESSAGE_ILLEGAL: another broker will not differ


def java_hash(text: str) -> int:
    """Java's String.hashCode (UTF-16 code units), as SelectMessageQueueByHash uses it."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def message_properties(tags: Optional[str], keys, properties: Optional[Mapping[str, str]]) -> dict:
    props = dict(properties or {})
    if tags:
        props[codec.PROPERTY_TAGS] = tags
    if keys:
        props[codec.PROPERTY_KEYS] = keys if isinstance(keys, str) else " ".join(keys)
    return props


def encode_batch(bodies: Sequence[bytes], props: Sequence[dict]) -> bytes:
    """A MessageBatch body as MessageDecoder.encodeMessages writes it."""
    parts = []
    for body, p in zip(bodies, props):
        text = codec.properties_to_string(p).encode("utf-8")
        parts.append(struct.pack(">iiiii", 22 + len(body) + len(text), 0, 0, 0, len(body)))
        parts.append(body)
        parts.append(struct.pack(">h", len(text)))
        parts.append(text)
    return b"".join(parts)


class AsyncProducer:
    def __init__(self, namesrv_addr: str, group: str = "rmq-producer", timeout: float = 5.0,
                 default_topic_queue_nums: int = DEFAULT_TOPIC_QUEUE_NUMS, api: Optional[MQClientAPI] = None,
                 credentials: Optional[SessionCredentials] = None):
        """credentials: sign every request (brokers with aclEnable=true)."""
        self.group = group
        self.default_topic_queue_nums = default_topic_queue_nums
        self.api = api or MQClientAPI(namesrv_addr, timeout, credentials)
        self._turn = itertools.count()

    async def close(self) -> None:
        await self.api.close()

    async def create_topic(self, topic: str, queue_nums: int) -> list[str]:
        """The topic with queue_nums queues on every broker that allows auto-creation (DefaultMQProducer.createTopic
        with TBW102 as the key): the brokers it was created on."""
        brokers = sorted({q.broker_name for q in await self.api.queues(DEFAULT_TOPIC, readable=False)})
        if not brokers:
            raise MQClientError(17, f"no broker has {DEFAULT_TOPIC} to create {topic!r} on",
                                ";".join(self.api.namesrv_addrs), "topic creation")
        for b in brokers:
            await self.api.create_topic(b, topic, queue_nums, DEFAULT_TOPIC)
        return brokers

    async def write_queues(self, topic: str) -> list[MessageQueue]:
        """The queues a send of the topic may choose from (the topic made first when it has no route yet, as a
        send makes it): what `queue=` takes."""
        return (await self._write_queues(topic))[0]

    def queue_for(self, queues: Sequence[MessageQueue], sharding_key: str) -> MessageQueue:
        """The queue of a sharding key (SelectMessageQueueByHash), as send(sharding_key=...) chooses it."""
        return queues[abs(java_hash(sharding_key)) % len(queues)]

    async def _write_queues(self, topic: str) -> tuple[list[MessageQueue], bool]:
        """The topic's write queues. A new one is made with default_topic_queue_nums queues on every broker that
        allows auto-creation (one rule, whoever sends first); an account without the admin right that takes
        (ACL) has it made by its first send instead, on the broker that send goes to, as RocketMQ's producer does."""
        queues = await self.api.queues(topic, readable=False)
        if queues:
            return queues, False
        defaults = await self.api.queues(DEFAULT_TOPIC, readable=False)
        if not defaults:
            raise MQClientError(17, f"topic {topic!r} has no route and no broker allows auto-creation "
                                    f"({DEFAULT_TOPIC})", ";".join(self.api.namesrv_addrs), "send")
        try:
            await self.create_topic(topic, self.default_topic_queue_nums)
            queues = await self.api.queues(topic, readable=False)
            if queues:
                return queues, False
        except MQClientError as e:
            if e.code != ResponseCode.NO_PERMISSION:
                raise
        by_broker: dict[str, list[MessageQueue]] = {}
        for q in defaults:
            by_broker.setdefault(q.broker_name, []).append(q)
        return [MessageQueue(topic, b, q.queue_id) for b, qs in sorted(by_broker.items())
                for q in qs[:self.default_topic_queue_nums]], True

    async def send(self, topic: str, body: bytes, tags: Optional[str] = None, keys=None,
                   properties: Optional[Mapping[str, str]] = None, sharding_key: Optional[str] = None,
                   queue: Optional[MessageQueue] = None) -> SendResult:
        return await self._send(topic, [body], [message_properties(tags, keys, properties)], sharding_key, queue)

    async def send_batch(self, topic: str, bodies: Sequence[bytes], tags=None, keys=None, properties=None,
                         sharding_key: Optional[str] = None, queue: Optional[MessageQueue] = None) -> SendResult:
        """Many messages to one queue in one SEND_BATCH_MESSAGE; tags/keys/properties: one per message or None."""
        n = len(bodies)
        props = [message_properties(tags[i] if tags else None, keys[i] if keys else None,
                                    properties[i] if properties else None) for i in range(n)]
        return await self._send(topic, list(bodies), props, sharding_key, queue)

    async def _send(self, topic: str, bodies: list, props: list, sharding_key, queue) -> SendResult:
        if not bodies:
            raise ValueError("nothing to send")
        queues, creating = await self._write_queues(topic)
        if queue is not None:
            candidates = [queue]
            creating = creating or all(q.broker_name != queue.broker_name for q in queues)
        elif sharding_key is not None:
            candidates = [self.queue_for(queues, sharding_key)]
        else:
            start = next(self._turn)
            candidates = [queues[(start + i) % len(queues)] for i in range(len(queues))]
        failed: set[str] = set()
        last: Optional[MQClientError] = None
        attempts = 0
        for mq in itertools.cycle(candidates):
            if attempts > RETRY_TIMES_WHEN_SEND_FAILED:
                break
            if mq.broker_name in failed and len(failed) < len({c.broker_name for c in candidates}):
                continue  # another broker first
            attempts += 1
            try:
                return await self._send_to(mq, bodies, props, creating)
            except MQClientError as e:
                last = e
                failed.add(mq.broker_name)
                if e.code in _NOT_RETRIED:
                    break
                self.api.forget_route(topic)
        assert last is not None
        raise last

    async def _send_to(self, mq: MessageQueue, bodies: list, props: list, creating: bool) -> SendResult:
        batch = len(bodies) > 1
        header = {"producerGroup": self.group, "topic": mq.topic, "defaultTopic": DEFAULT_TOPIC,
                  "defaultTopicQueueNums": self.default_topic_queue_nums, "queueId": mq.queue_id, "sysFlag": 0,
                  "bornTimestamp": int(time.time() * 1000), "flag": 0, "reconsumeTimes": 0, "unitMode": False,
                  "batch": batch}
        if batch:
            body = encode_batch(bodies, props)
        else:
            header["properties"] = codec.properties_to_string(props[0])
            body = bodies[0]
        result = await self.api.send(mq, header, body, batch, DEFAULT_TOPIC if creating else None)
        if creating:
            self.api.forget_route(mq.topic)  # the broker registers the new topic: read its own route next time
        return result


class Producer:
    """The blocking face of AsyncProducer."""

    def __init__(self, namesrv_addr: str, group: str = "rmq-producer", timeout: float = 5.0,
                 credentials: Optional[SessionCredentials] = None):
        self.aio = run_blocking(_make_async, namesrv_addr, group, timeout, credentials)

    def close(self) -> None:
        run_blocking(self.aio.close)

    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def send(self, topic: str, body: bytes, tags: Optional[str] = None, keys=None,
             properties: Optional[Mapping[str, str]] = None, sharding_key: Optional[str] = None,
             queue: Optional[MessageQueue] = None) -> SendResult:
        return run_blocking(self.aio.send, topic, body, tags, keys, properties, sharding_key, queue)

    def create_topic(self, topic: str, queue_nums: int) -> list[str]:
        return run_blocking(self.aio.create_topic, topic, queue_nums)

    def write_queues(self, topic: str) -> list[MessageQueue]:
        return run_blocking(self.aio.write_queues, topic)

    def send_batch(self, topic: str, bodies: Sequence[bytes], tags=None, keys=None, properties=None,
                   sharding_key: Optional[str] = None, queue: Optional[MessageQueue] = None) -> SendResult:
        return run_blocking(self.aio.send_batch, topic, bodies, tags, keys, properties, sharding_key, queue)


async def _make_async(namesrv_addr: str, group: str, timeout: float,
                      credentials: Optional[SessionCredentials]) -> AsyncProducer:
    return AsyncProducer(namesrv_addr, group, timeout, credentials=credentials)
