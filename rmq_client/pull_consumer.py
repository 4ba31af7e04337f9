"""A pull consumer (RocketMQ's DefaultMQPullConsumer with PullAPIWrapper.processPullResult): pulls a queue from an
offset with a TAG or SQL92 expression, decodes the records into an Arrow RecordBatch with the store's compiled
decoder (a pull's body is commitlog records, the same bytes), and re-checks the exact tags, since the broker
compares only their hash codes. `AsyncPullConsumer` is the asyncio form; `PullConsumer` its blocking face."""
from __future__ import annotations

import asyncio
import enum
import json
import logging
import time
import uuid
from dataclasses import dataclass
from typing import AsyncIterator, Iterator, Optional, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from remoting import RemotingCommand, RequestCode, ResponseCode
from remoting.admin_bodies import ResetOffsetBody
from rmq_acl import SessionCredentials
from rmq_common import message_codec as codec
from rmq_common.numpy_arrow import empty_batch
from rmq_common.record_decoder import SCAN_SCHEMA, decode_pulled, scan_schema

from .event_loop import run_blocking
from .mq_client_api import MessageQueue, MQClientAPI, MQClientError

TAG, SQL92 = "TAG", "SQL92"
CLIENT_VERSION = 407  # MQVersion V4_9_7: the protocol this consumer speaks, as its heartbeat declares it
log = logging.getLogger(__name__)


class PullStatus(enum.Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


_STATUS: dict[int, PullStatus] = {
    ResponseCode.SUCCESS: PullStatus.FOUND, ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL}


@dataclass
class PullResult:
    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: pa.RecordBatch  # SCAN_SCHEMA (the store scan's columns)


@dataclass(frozen=True)
class Subscription:
    expression: str = "*"
    expression_type: str = TAG

    def __post_init__(self):
        if self.expression_type not in (TAG, SQL92):
            raise ValueError(f"expression type {self.expression_type!r} must be TAG or SQL92")

    @property
    def matches_everything(self) -> bool:
        return self.expression_type == TAG and self.expression.strip() in ("", "*")

    def tag_filter(self):
        """What the client re-checks: the exact tags (the broker matched their hash codes only)."""
        if self.expression_type != TAG or self.expression.strip() in ("", "*"):
            return None
        from filters import MessageFilter
        return MessageFilter.by_tags(self.expression)


_EMPTY = empty_batch(SCAN_SCHEMA)
DECODE_OFFSETS = 16384  # a range's pulls decoded together up to this many offsets (4 pulls of 4,096)


class AsyncPullConsumer:
    def __init__(self, namesrv_addr: str, group: str, timeout: float = 5.0, api: Optional[MQClientAPI] = None,
                 credentials: Optional[SessionCredentials] = None):
        """credentials: sign every request (brokers with aclEnable=true)."""
        self.group = group
        self.api = api or MQClientAPI(namesrv_addr, timeout, credentials)
        self._tag_filters: dict[Subscription, object] = {}
        # RESET_CONSUMER_CLIENT_OFFSET from a broker (mqadmin resetOffsetByTime while this consumer is registered):
        # where each queue was reset to, committed at once; read and cleared with take_reset
        self.resets: dict[MessageQueue, int] = {}
        self._resetting: set[asyncio.Task] = set()
        self.client_id = f"{codec.local_host_address().hex()}@{uuid.uuid4().hex[:12]}"  # RocketMQ's clientID form
        self._subscriptions: list[dict] = []  # as the last register_group sent them
        self._started_ms = int(time.time() * 1000)
        if self.api.on_request is None:
            self.api.on_request = self._on_request

    async def _on_request(self, client, cmd: RemotingCommand) -> None:
        """A broker's request on one of this consumer's connections: RESET_CONSUMER_CLIENT_OFFSET is taken as the
        Java push consumer takes it (MQClientInstance.resetOffset): each queue's offset becomes the one sent and is
        committed to the broker; the next pulls start there (take_reset). Others are ignored."""
        if cmd.code == RequestCode.GET_CONSUMER_RUNNING_INFO and cmd.ext_fields.get("consumerGroup") == self.group:
            await client.invoke_oneway(cmd.response(ResponseCode.SUCCESS, body=self._running_info()))
            return
        if cmd.code != RequestCode.RESET_CONSUMER_CLIENT_OFFSET or cmd.ext_fields.get("group") != self.group:
            return
        try:
            table = ResetOffsetBody.decode(cmd.body).offsetTable
        except ValueError as e:
            log.warning("a RESET_CONSUMER_CLIENT_OFFSET from %s:%s does not parse: %s", client.host, client.port, e)
            return
        self.resets.update(table)
        # committed off the connection's reader: the commits' answers come through it
        task = asyncio.ensure_future(self._commit_resets(dict(table)))
        self._resetting.add(task)
        task.add_done_callback(self._resetting.discard)

    async def _commit_resets(self, table: dict) -> None:
        for mq, offset in sorted(table.items()):
            try:
                await self.commit_offset(mq, offset)
            except MQClientError as e:
                log.warning("the reset offset of %s/%s/%d not committed: %s", mq.topic, mq.broker_name, mq.queue_id, e)

    def take_reset(self, mq: MessageQueue) -> Optional[int]:
        """The offset a broker told this consumer to reset the queue to since the last call, None if none."""
        return self.resets.pop(mq, None)

    def _running_info(self) -> bytes:
        """ConsumerRunningInfo, as a Java consumer answers GET_CONSUMER_RUNNING_INFO (mqadmin consumerStatus): how
        it consumes and what it subscribes to; a pull consumer has no process queues to show."""
        return json.dumps({"properties": {
            "PROP_NAMESERVER_ADDR": ";".join(self.api.namesrv_addrs), "PROP_CONSUME_TYPE": "CONSUME_ACTIVELY",
            "PROP_CONSUMEORDERLY": "false", "PROP_THREADPOOL_CORE_SIZE": "-1", "PROP_CLIENT_VERSION": "V4_9_7",
            "PROP_CONSUMER_START_TIMESTAMP": str(self._started_ms)},
            "subscriptionSet": self._subscriptions, "mqTable": {}, "statusTable": {}}).encode()

    async def close(self) -> None:
        await self.api.close()

    async def queues(self, topic: str) -> list[MessageQueue]:
        return await self.api.queues(topic)

    async def forget_route(self, topic: str) -> None:
        self.api.forget_route(topic)

    async def pull(self, mq: MessageQueue, offset: int, subscription: Subscription = Subscription(),
                   max_nums: int = 32, suspend_ms: int = 0, columns: Optional[Sequence[str]] = None) -> PullResult:
        """columns: the scan columns to decode (all of them for None); the tag re-check adds what it reads."""
        raw = await self.api.pull(mq, offset, self.group, subscription.expression, subscription.expression_type,
                                  max_nums, suspend_ms)
        status = _STATUS[raw.code]
        batch = _EMPTY
        if status is PullStatus.FOUND and len(raw.body):
            batch = self._decode(mq, raw.body, offset, subscription, columns)
        return PullResult(status, raw.next_begin_offset, raw.min_offset, raw.max_offset, batch)

    def _decode(self, mq: MessageQueue, body, offset: int, subscription: Subscription,
                columns: Optional[Sequence[str]]) -> pa.RecordBatch:
        """Records pulled from the queue from `offset` on (one pull's body, or several pulls' back to back) as a
        batch of `columns`, the exact tags re-checked."""
        if subscription not in self._tag_filters:
            self._tag_filters[subscription] = subscription.tag_filter()
        tag_filter = self._tag_filters[subscription]
        decoded = columns
        if columns is not None and tag_filter is not None and "properties" not in columns:
            decoded = [*columns, "properties"]
        batch = decode_pulled(body, mq.topic, mq.queue_id, f"pull of {mq.topic}/{mq.broker_name}/{mq.queue_id} at "
                                                           f"{offset}", scan_schema(decoded))
        if tag_filter is not None and batch.num_rows:
            batch = batch.filter(tag_filter.commit_log_mask(batch))  # type: ignore[attr-defined]
        if decoded is not columns:
            batch = batch.select(list(columns or ()))
        return batch

    async def read_range(self, mq: MessageQueue, start: int, end: int, subscription: Subscription = Subscription(),
                         max_nums: int = 32, in_flight: int = 4, on_offset_moved=None,
                         columns: Optional[Sequence[str]] = None, on_pull=None) -> AsyncIterator[pa.RecordBatch]:
        """The queue's messages in [start, end), in queue order, as batches; without a filter the range is cut into
        chunks pulled `in_flight` at a time; with one, pulls follow nextBeginOffset.
        PULL_OFFSET_MOVED calls on_offset_moved(offset, min_offset, max_offset), which returns where to go on (or
        raises); without it, a ValueError names the queue and the offsets. columns: as pull's (queue_offset among
        them). on_pull(asked, got): called for each pull that found messages, with the offsets it asked for and
        those it covered (a batch holds several pulls)."""
        # A filter's matches are not where offsets say: a pull past a chunk's end would scan and send what the next
        # chunk reads again, so a filtered range is one chunk, its pulls following nextBeginOffset.
        chunk = max(max_nums, 1) * 4 if subscription.matches_everything else max(end - start, 1)
        bounds = [(s, min(s + chunk, end)) for s in range(start, end, chunk)]
        tasks: list[asyncio.Task] = []
        try:
            nxt = 0
            while nxt < len(bounds) or tasks:
                while nxt < len(bounds) and len(tasks) < in_flight:
                    tasks.append(asyncio.ensure_future(self._read_chunk(mq, *bounds[nxt], subscription, max_nums,
                                                                        on_offset_moved, columns, on_pull)))
                    nxt += 1
                for batch in await tasks.pop(0):
                    yield batch
        finally:
            for t in tasks:
                t.cancel()
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)

    async def _read_chunk(self, mq: MessageQueue, start: int, end: int, subscription: Subscription, max_nums: int,
                          on_offset_moved, columns, on_pull=None) -> list[pa.RecordBatch]:
        """The chunk's pulls, their bodies decoded together up to DECODE_OFFSETS offsets at a time: a decode has a
        fixed cost of its own (the columns' arrays), which pulls of a few thousand messages would pay each."""
        out: list[pa.RecordBatch] = []
        bodies: list[bytes | bytearray] = []
        pos = first = start

        def decode() -> None:
            if not bodies:
                return
            batch = self._decode(mq, bodies[0] if len(bodies) == 1 else b"".join(bodies), first, subscription,
                                 columns)
            bodies.clear()
            if batch.num_rows and batch.column("queue_offset")[-1].as_py() >= end:
                batch = batch.filter(pc.less(batch.column("queue_offset"), end))
            if batch.num_rows:
                out.append(batch)

        while pos < end:
            if pos - first >= DECODE_OFFSETS:
                decode()
            if not bodies:
                first = pos
            asked = min(max_nums, end - pos)
            raw = await self.api.pull(mq, pos, self.group, subscription.expression, subscription.expression_type,
                                      asked, 0)
            status = _STATUS[raw.code]
            if status is PullStatus.OFFSET_ILLEGAL:
                if on_offset_moved is None:
                    raise ValueError(f"{mq.topic}/{mq.broker_name}/{mq.queue_id}: offset {pos} is outside the queue "
                                     f"[{raw.min_offset}, {raw.max_offset})")
                decode()  # what was pulled before the move, then the pulls go on where it says
                pos = on_offset_moved(pos, raw.min_offset, raw.max_offset)
                continue
            if status is PullStatus.NO_NEW_MSG and raw.next_begin_offset <= pos:
                raise ValueError(f"{mq.topic}/{mq.broker_name}/{mq.queue_id}: the broker has no messages at {pos}, "
                                 f"before the range's end {end} (queue [{raw.min_offset}, {raw.max_offset}))")
            if status is PullStatus.FOUND and len(raw.body):
                bodies.append(raw.body)
                if on_pull is not None:
                    on_pull(asked, raw.next_begin_offset - pos)
            if raw.next_begin_offset <= pos:
                raise ValueError(f"{mq.topic}/{mq.broker_name}/{mq.queue_id}: the broker answered offset "
                                 f"{raw.next_begin_offset} to a pull at {pos}")
            pos = raw.next_begin_offset
        decode()
        return out

    async def query_offset(self, mq: MessageQueue) -> Optional[int]:
        return await self.api.query_consumer_offset(mq, self.group)

    async def commit_offset(self, mq: MessageQueue, offset: int) -> None:
        await self.api.update_consumer_offset(mq, self.group, offset)

    async def register_group(self, topics: Sequence[str]) -> None:
        """One HEART_BEAT with the group as a pull consumer (CONSUME_ACTIVELY) of `topics` (and those of earlier
        calls) to every master of their routes, as RocketMQ's pull consumers send: a broker then keeps the group's
        subscription config and creates its %RETRY% topic, which RocketMQ's admin (examineConsumeStats, mqadmin
        consumerProgress) looks up to find the group's brokers. Offsets committed without it are stored but
        invisible to those tools."""
        known = {sub["topic"] for sub in self._subscriptions}
        self._subscriptions += [{"topic": t, "subString": "*", "tagsSet": [], "codeSet": [], "classFilterMode": False,
                                 "subVersion": int(time.time() * 1000), "expressionType": "TAG"}
                                for t in dict.fromkeys(topics) if t not in known]
        subs = self._subscriptions  # this client's every subscription, as a Java client's heartbeat carries them
        body = json.dumps({"clientID": self.client_id,
                           "producerDataSet": [],
                           "consumerDataSet": [{"groupName": self.group, "consumeType": "CONSUME_ACTIVELY",
                                                "messageModel": "CLUSTERING",
                                                "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                                                "subscriptionDataSet": subs, "unitMode": False}]}).encode()
        addrs = set()
        for topic in topics:
            route = await self.api.route(topic)
            addrs |= {str(b.master_addr()) for b in (route.broker_datas if route else []) if b.master_addr()}
        for addr in sorted(addrs):
            beat = RemotingCommand.request(RequestCode.HEART_BEAT, body=body)
            beat.version = CLIENT_VERSION  # a broker tells a client this old of offset resets (else refused)
            await self.api.checked(addr, beat, "heartbeat")

    async def max_offset(self, mq: MessageQueue) -> int:
        return await self.api.max_offset(mq)

    async def min_offset(self, mq: MessageQueue) -> int:
        return await self.api.min_offset(mq)

    async def offset_by_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return await self.api.offset_by_timestamp(mq, timestamp_ms)

    async def queue_bounds(self, topic: str) -> dict[MessageQueue, tuple[int, int]]:
        """(min, max) offset of every queue of the topic: one GET_TOPIC_STATS_INFO per broker, not one per queue."""
        out, unreachable = await self.queue_bounds_of_reachable(topic)
        for e in unreachable.values():
            raise e
        return out

    async def queue_bounds_of_reachable(self, topic: str) -> tuple[dict[MessageQueue, tuple[int, int]],
                                                                   dict[str, MQClientError]]:
        """queue_bounds of the brokers that answer, and {broker name: its error} of those that cannot be reached
        (the route is asked again next time: a broker stopped cleanly leaves it). A refusal raises."""
        route = await self.api.route(topic)
        if route is None:
            return {}, {}
        names = sorted({q.broker_name for q in route.queue_datas})
        tables = await asyncio.gather(*(self.api.topic_stats(topic, b) for b in names), return_exceptions=True)
        out, unreachable = {}, {}
        for name, table in zip(names, tables):
            if isinstance(table, MQClientError) and table.unreachable:
                unreachable[name] = table
                continue
            if isinstance(table, BaseException):
                raise table
            for mq, o in table.offsetTable.items():
                out[MessageQueue(mq.topic, name, mq.queue_id)] = (o.minOffset, o.maxOffset)
        if unreachable:
            self.api.forget_route(topic)
        return out, unreachable


class PullConsumer:
    """The blocking face: each method runs its AsyncPullConsumer counterpart on the client's event-loop thread."""

    def __init__(self, namesrv_addr: str, group: str, timeout: float = 5.0,
                 credentials: Optional[SessionCredentials] = None):
        self.timeout = timeout
        self.aio = run_blocking(_make_async, namesrv_addr, group, timeout, credentials)

    def close(self) -> None:
        run_blocking(self.aio.close)

    def __enter__(self) -> "PullConsumer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def topics(self) -> list[str]:
        return run_blocking(self.aio.api.topics)

    def queues(self, topic: str) -> list[MessageQueue]:
        return run_blocking(self.aio.queues, topic)

    def forget_route(self, topic: str) -> None:
        """The topic's route is asked of the name servers again when next needed (it is cached for 30 s)."""
        run_blocking(self.aio.forget_route, topic)

    def pull(self, mq: MessageQueue, offset: int, subscription: Subscription = Subscription(), max_nums: int = 32,
             suspend_ms: int = 0) -> PullResult:
        return run_blocking(self.aio.pull, mq, offset, subscription, max_nums, suspend_ms)

    def read_range(self, mq: MessageQueue, start: int, end: int, subscription: Subscription = Subscription(),
                   max_nums: int = 32, in_flight: int = 4, on_offset_moved=None,
                   columns: Optional[Sequence[str]] = None, on_pull=None) -> Iterator[pa.RecordBatch]:
        agen = self.aio.read_range(mq, start, end, subscription, max_nums, in_flight, on_offset_moved, columns,
                                   on_pull)
        try:
            while True:
                try:
                    yield run_blocking(agen.__anext__)
                except StopAsyncIteration:
                    return
        finally:
            run_blocking(agen.aclose)

    def query_offset(self, mq: MessageQueue) -> Optional[int]:
        return run_blocking(self.aio.query_offset, mq)

    def commit_offset(self, mq: MessageQueue, offset: int) -> None:
        run_blocking(self.aio.commit_offset, mq, offset)

    def register_group(self, topics: Sequence[str]) -> None:
        run_blocking(self.aio.register_group, list(topics))

    def take_reset(self, mq: MessageQueue) -> Optional[int]:
        return self.aio.take_reset(mq)

    @property
    def resets(self) -> dict[MessageQueue, int]:
        return dict(self.aio.resets)

    @property
    def client_id(self) -> str:
        return self.aio.client_id

    def max_offset(self, mq: MessageQueue) -> int:
        return run_blocking(self.aio.max_offset, mq)

    def min_offset(self, mq: MessageQueue) -> int:
        return run_blocking(self.aio.min_offset, mq)

    def offset_by_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return run_blocking(self.aio.offset_by_timestamp, mq, timestamp_ms)

    def queue_bounds(self, topic: str) -> dict[MessageQueue, tuple[int, int]]:
        return run_blocking(self.aio.queue_bounds, topic)

    def queue_bounds_of_reachable(self, topic: str) -> tuple[dict[MessageQueue, tuple[int, int]],
                                                             dict[str, MQClientError]]:
        return run_blocking(self.aio.queue_bounds_of_reachable, topic)


async def _make_async(namesrv_addr: str, group: str, timeout: float,
                      credentials: Optional[SessionCredentials]) -> AsyncPullConsumer:
    return AsyncPullConsumer(namesrv_addr, group, timeout, credentials=credentials)
