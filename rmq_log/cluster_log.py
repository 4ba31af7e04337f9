"""ClusterLog: a MessageLog on RocketMQ brokers found through name servers (rmq_client: Admin, PullConsumer,
Producer; a client for each request), requests signed with the account's credentials when given. A broker's
refusal or silence is Refused, with its code and remark."""
from __future__ import annotations

import asyncio
import functools
import sys
from typing import TYPE_CHECKING, Any, Callable, Collection, Optional, TypeVar

from rmq_acl import SessionCredentials
from rmq_client import AsyncProducer, MessageQueue, MQClientError, Producer, PullConsumer, PullStatus, Subscription
from rmq_client.admin import Admin
from rmq_client.event_loop import run_blocking
from rmq_client.producer import DEFAULT_TOPIC

from .broker_wait import DEFAULT_BROKER_TIMEOUT_MS
from .errors import Failure, PartialFlush, Refused, UsageError
from .message_log import (
    DEFAULT_GROUP,
    FOREVER,
    Consume,
    Emit,
    LineWriter,
    MessageLog,
    QueueKey,
    QueueStat,
    Sent,
    TopicChange,
)

if TYPE_CHECKING:
    from .reads import LogReads, ReadSettings
    from .writes import LogWrites, WriteOptions

T = TypeVar("T", bound=Callable[..., Any])

MAX_MESSAGE_SIZE = 4 * 1024 * 1024  # the most a RocketMQ producer sends in one message (maxMessageSize)
BATCH_BYTES = 1024 * 1024  # a SEND_BATCH_MESSAGE's bodies at most this: far within a broker's maxMessageSize
FILE_ROUND = 8  # --file sends batch-size x this many lines at a time, each queue's share as batches


def _refusals(method: T) -> T:
    """A broker's refusal or silence as Refused; a value the client rejects as a usage error."""
    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except MQClientError as e:
            raise Refused(str(e)) from None
        except ValueError as e:
            raise UsageError(str(e)) from None
    return wrapper  # type: ignore[return-value]


def _key(mq: MessageQueue) -> QueueKey:
    return QueueKey(mq.broker_name, mq.queue_id)


class ClusterLog(MessageLog):
    names_brokers = True
    knows_members = True

    def __init__(self, namesrv: str, access_key: Optional[str] = None, secret_key: Optional[str] = None,
                 account: Optional[SessionCredentials] = None, timeout_ms: int = DEFAULT_BROKER_TIMEOUT_MS):
        """account: the account resolved by the caller (a Spark query's), used as it is; timeout_ms: how long a
        read waits for a broker that cannot be reached."""
        self.namesrv, self.access_key, self.secret_key = namesrv, access_key, secret_key
        self.account, self.timeout_ms = account, timeout_ms

    def credentials(self) -> Optional[SessionCredentials]:
        """The caller's account, else --access-key / --secret-key, else $RMQ_ACCESS_KEY / $RMQ_SECRET_KEY; None:
        requests go unsigned."""
        if self.account is not None:
            return self.account
        return SessionCredentials.resolve(self.access_key, self.secret_key, names=("--access-key", "--secret-key"))

    def _admin(self) -> Admin:
        return Admin(self.namesrv, credentials=self.credentials())

    def _consumer(self, group: Optional[str]) -> PullConsumer:
        return PullConsumer(self.namesrv, group or DEFAULT_GROUP, credentials=self.credentials())

    def _producer(self) -> Producer:
        return Producer(self.namesrv, credentials=self.credentials())

    def where(self) -> dict:
        return {"namesrv": self.namesrv}

    def commit_log_bounds(self) -> Optional[dict]:
        return None  # each broker has its own

    @_refusals
    def topics(self) -> list[dict]:
        with self._consumer(None) as c:
            rows = []
            for topic in c.topics():
                bounds = c.queue_bounds(topic)
                if not bounds:
                    continue
                rows.append({"topic": topic, "queues": len(bounds),
                             "brokers": sorted({q.broker_name for q in bounds}),
                             "messages": sum(mx - mn for mn, mx in bounds.values())})
        return rows

    @_refusals
    def queue_stats(self, topic: Optional[str], group: Optional[str]) -> list[QueueStat]:
        """Per queue of every broker; a group's committed offset and lag as the brokers keep them
        (QUERY_CONSUMER_OFFSET, the lag a RocketMQ admin sees with consumerProgress)."""
        with self._consumer(group) as c:
            rows: list[QueueStat] = []
            for t in ([topic] if topic else c.topics()):
                for mq, (lo, hi) in sorted(c.queue_bounds(t).items()):
                    row = QueueStat(t, _key(mq), lo, hi)
                    if group:
                        row.committed = c.query_offset(mq)
                        row.lag = None if row.committed is None else hi - row.committed
                    rows.append(row)
        return rows

    @_refusals
    def create_topic(self, topic: str, queues: int, cluster: Optional[str]) -> TopicChange:
        with self._admin() as admin:
            return TopicChange(topic, queues, brokers=admin.create_topic(topic, queues, cluster))

    @_refusals
    def delete_topic(self, topic: str, cluster: Optional[str]) -> TopicChange:
        with self._admin() as admin:
            return TopicChange(topic, 0, brokers=admin.delete_topic(topic, cluster))

    @_refusals
    def groups(self) -> list[dict]:
        with self._admin() as admin:
            return [dict(r.__dict__) for r in admin.groups()]

    @_refusals
    def reset_offsets(self, group: str, topic: str, when: int) -> tuple[list[dict], str]:
        with self._admin() as admin:
            result = admin.reset_offsets(group, topic, when)
        rows = [{"broker_name": r.queue.broker_name, "queue_id": r.queue.queue_id, "old": r.old, "new": r.new}
                for r in result.queues]
        how = []
        if result.told_brokers:
            how.append(f"online members told by {', '.join(result.told_brokers)}")
        if result.set_brokers:
            how.append(f"offsets committed on {', '.join(result.set_brokers)} (no member online)")
        return rows, "; ".join(how)

    @_refusals
    def send(self, topic: str, bodies: list[bytes], tags: Optional[str], keys: Optional[str],
             properties: Optional[dict], sharding_key: Optional[str],
             queue: Optional[tuple[Optional[str], int]], on_sent: Callable[[Sent], None]) -> None:
        with self._producer() as p:
            mq = None
            if queue is not None:
                broker, qid = queue
                queues = run_blocking(_Queues(p.aio).known, topic)
                mq = _chosen_queue(topic, queues, broker, qid, f"--queue {broker or ''}{':' if broker else ''}{qid}",
                                   "--queue BROKER:N")
            for body in bodies:
                r = p.send(topic, body, tags=tags, keys=keys, properties=properties, sharding_key=sharding_key,
                           queue=mq)
                on_sent(Sent("SEND_OK", topic, _key(r.queue), r.queue_offset, r.msg_id))

    @_refusals
    def line_writer(self, batch_size: int) -> LineWriter:
        return _ClusterWriter(self._producer(), batch_size)

    @_refusals
    def consume(self, request: Consume, emit: Emit) -> None:
        """Every queue of the topic in turn (or the queue id on every broker)."""
        if request.sql is not None:
            sub = Subscription(request.sql, "SQL92")
        else:
            sub = Subscription(request.tags or "*", "TAG")
        remaining = request.max
        with self._consumer(request.group) as c:
            queues = c.queues(request.topic)
            if not queues:
                raise MQClientError(17, f"topic {request.topic!r} has no route", self.namesrv, "consume")
            if request.queue_id is not None:
                queues = [q for q in queues if q.queue_id == request.queue_id]
            kind, value = request.start
            for mq in queues:
                if kind == "earliest":
                    pos = c.min_offset(mq)
                elif kind == "latest":
                    pos = c.max_offset(mq)
                elif kind == "offset":
                    assert value is not None
                    pos = value
                elif kind == "time":
                    assert value is not None
                    pos = c.offset_by_timestamp(mq, value)
                else:
                    committed = c.query_offset(mq)
                    pos = committed if committed is not None and committed >= 0 else c.min_offset(mq)
                while remaining is None or remaining > 0:
                    r = c.pull(mq, pos, sub, 32 if remaining is None else min(32, remaining))
                    if r.status is PullStatus.OFFSET_ILLEGAL:
                        print(f"rmq: warning: offset {pos} is outside {request.topic}/{mq.key()} [{r.min_offset}, "
                              f"{r.max_offset})", file=sys.stderr)
                        pos = r.max_offset if pos > r.max_offset else r.min_offset
                        continue
                    for row in r.messages.to_pylist():
                        m = _Row(row)
                        emit(m, _key(mq))
                        if remaining is not None:
                            remaining -= 1
                            if remaining == 0:
                                pos = m.queue_offset + 1
                                break
                    else:
                        pos = max(pos, r.next_begin_offset)
                    if r.status is PullStatus.NO_NEW_MSG or r.next_begin_offset >= r.max_offset:
                        break
                sys.stdout.flush()
                if request.commit:
                    c.commit_offset(mq, pos)

    @_refusals
    def find_by_key(self, topic: str, key: str, max_count: int, begin: int, end: int) -> list:
        with self._producer() as p:
            return run_blocking(p.aio.api.query_message, topic, key, max_count, begin, end)

    @_refusals
    def find_by_msg_id(self, topic: str, msg_id: str) -> list:
        with self._producer() as p:
            return run_blocking(p.aio.api.query_message, topic, msg_id, 1, 0, FOREVER, True)

    @_refusals
    def find_by_offset_msg_id(self, offset_msg_id: str) -> list:
        with self._producer() as p:
            try:
                return [run_blocking(p.aio.api.view_message, offset_msg_id)]
            except MQClientError as e:
                if e.retriable:  # no answer, or a broker busy: not a message that is not there
                    raise
                return []

    def writes(self, options: WriteOptions, columns: Collection[str]) -> LogWrites:
        from .cluster_writes import ClusterWrites
        return ClusterWrites(options, columns)

    def reads(self, settings: ReadSettings) -> LogReads:
        from .cluster_reads import ClusterReads
        return ClusterReads(self.namesrv, self.credentials(), self.timeout_ms, settings)


class _Row:
    """A pulled row with the attributes the store's messages have (timestamps in ms)."""

    queue_offset: int

    def __init__(self, row: dict):
        self.__dict__.update(row)
        self.keys = row["keys"] or []
        self.properties = dict(row["properties"] or [])
        for name in ("born_timestamp", "store_timestamp"):
            setattr(self, name, int(row[name].timestamp() * 1000))


def _chosen_queue(topic: str, queues: list[MessageQueue], broker: Optional[str], qid: int, where: str,
                  name_broker: str) -> MessageQueue:
    """The queue a line's "broker_name"/"queue_id" (or --queue) names among the topic's write queues; UsageError
    starting with `where` when it names none, or a queue id that more than one broker has."""
    if broker is not None:
        mq = MessageQueue(topic, broker, qid)
        if mq not in queues:
            raise UsageError(f"{where}: topic {topic!r} has no write queue {mq.key()} (it has "
                             f"{_queue_names(queues)})")
        return mq
    same = [q for q in queues if q.queue_id == qid]
    if not same:
        raise UsageError(f"{where}: topic {topic!r} has no write queue {qid} (it has {_queue_names(queues)})")
    if len(same) > 1:
        raise UsageError(f"{where}: topic {topic!r} has a queue {qid} on {len(same)} brokers "
                         f"({', '.join(q.broker_name for q in same)}); name one with {name_broker}")
    return same[0]


def _queue_names(queues: list[MessageQueue]) -> str:
    by_broker: dict[str, list[int]] = {}
    for q in sorted(queues):
        by_broker.setdefault(q.broker_name, []).append(q.queue_id)
    return ", ".join(f"{b}:{ids[0]}..{ids[-1]}" if ids == list(range(ids[0], ids[-1] + 1)) and len(ids) > 1
                     else ", ".join(f"{b}:{i}" for i in ids) for b, ids in by_broker.items())


class _Queues:
    """Each topic's write queues, and the queue of each message as the producer chooses it: the line's
    broker_name/queue_id, else its sharding key's, else round robin over the topic's queues."""

    def __init__(self, aio: AsyncProducer):
        self.aio = aio
        self.queues: dict[str, list[MessageQueue]] = {}
        self.made: set[str] = set()
        self.turn: dict[str, int] = {}

    async def known(self, topic: str) -> list[MessageQueue]:
        """The write queues the topic has, or will have when its first send makes it (asks nothing to change)."""
        if topic not in self.queues:
            queues = await self.aio.api.queues(topic, readable=False)
            if not queues:
                defaults = await self.aio.api.queues(DEFAULT_TOPIC, readable=False)
                if not defaults:
                    raise MQClientError(17, f"topic {topic!r} has no route and no broker allows auto-creation "
                                            f"({DEFAULT_TOPIC})", ";".join(self.aio.api.namesrv_addrs), "send")
                queues = [MessageQueue(topic, b, i) for b in sorted({q.broker_name for q in defaults})
                          for i in range(self.aio.default_topic_queue_nums)]
            self.queues[topic] = queues
        return self.queues[topic]

    async def made_queues(self, topic: str) -> list[MessageQueue]:
        """The write queues, the topic made first when it has no route yet."""
        if topic not in self.made:
            self.queues[topic] = await self.aio.write_queues(topic)
            self.made.add(topic)
        return self.queues[topic]

    def choose(self, m, lineno: int, queues: list[MessageQueue]) -> MessageQueue:
        if m.queue_id is not None:
            return _chosen_queue(m.topic, queues, m.broker_name, m.queue_id, f"line {lineno}",
                                 '"broker_name" in the line')
        if m.broker_name is not None:
            raise UsageError(f'line {lineno}: "broker_name" {m.broker_name!r} needs a "queue_id"')
        if m.sharding_key:
            return self.aio.queue_for(queues, m.sharding_key)
        turn = self.turn.get(m.topic, 0)
        self.turn[m.topic] = turn + 1
        return queues[turn % len(queues)]


class _ClusterWriter(LineWriter):
    """`produce --file` through brokers: each message's queue chosen, and each queue's messages sent as
    SEND_BATCH_MESSAGE batches of up to batch_size messages (and BATCH_BYTES), the queues' batches at once, in
    input order within a queue."""

    def __init__(self, producer: Producer, batch_size: int):
        self.producer = producer.__enter__()
        self.chooser = _Queues(producer.aio)
        self.batch_size = batch_size
        self.lines_per_flush = batch_size * FILE_ROUND

    @_refusals
    def close(self) -> None:
        self.producer.__exit__(None, None, None)

    @_refusals
    def check(self, m: Any, lineno: int) -> None:
        if len(m.body) > MAX_MESSAGE_SIZE:
            raise UsageError(f"line {lineno}: body is {len(m.body)} bytes, more than a RocketMQ producer "
                             f"sends ({MAX_MESSAGE_SIZE}, maxMessageSize)")
        if m.queue_id is not None or m.broker_name is not None:
            self.chooser.choose(m, lineno, run_blocking(self.chooser.known, m.topic))

    @_refusals
    def flush(self, batch: list, first_line: int) -> None:
        try:
            run_blocking(_send_round, self.chooser, batch, first_line, self.batch_size)
        except MQClientError as e:
            raise Failure(str(e)) from None
        except PartialFlush as e:
            if isinstance(e.cause, MQClientError):
                e.cause = Failure(str(e.cause))
            raise


async def _send_round(chooser: _Queues, batch: list, first_line: int, batch_size: int) -> None:
    per_queue: dict[MessageQueue, list] = {}
    for i, m in enumerate(batch):
        queues = await chooser.made_queues(m.topic)
        per_queue.setdefault(chooser.choose(m, first_line + i, queues), []).append(m)
    sent = dict.fromkeys(per_queue, 0)

    async def send_queue(mq: MessageQueue, messages: list) -> None:
        start = 0
        while start < len(messages):
            end, size = start, 0
            while end < len(messages) and end - start < batch_size and (end == start or size < BATCH_BYTES):
                size += len(messages[end].body)
                end += 1
            chunk = messages[start:end]
            await chooser.aio.send_batch(mq.topic, [m.body for m in chunk], tags=[m.tags for m in chunk],
                                         keys=[m.keys for m in chunk], properties=[m.properties for m in chunk],
                                         queue=mq)
            sent[mq] += len(chunk)
            start = end

    results = await asyncio.gather(*(send_queue(mq, ms) for mq, ms in per_queue.items()), return_exceptions=True)
    failures = [r for r in results if isinstance(r, BaseException)]
    if not failures:
        return
    total = sum(sent.values())
    if not total:
        raise failures[0]
    detail = f"{total} ({', '.join(f'{n} to {mq.topic}/{mq.key()}' for mq, n in sorted(sent.items()) if n)})"
    raise PartialFlush(failures[0] if isinstance(failures[0], Exception) else RuntimeError(str(failures[0])),
                       total, detail)
