"""format("rmq") through brokers (option namesrvAddr): the driver asks the name servers for routes and each broker
for its queues' offsets (one GET_TOPIC_STATS_INFO per broker and topic), executors pull their queue ranges from
the broker that holds them, and the group's offsets go to the brokers with UPDATE_CONSUMER_OFFSET.

A queue is (topic, BrokerQueue(brokerName, queueId)); in offsets JSON it is "brokerName:queueId", so the same
queue id on two brokers is never confused. WireStore gives the reader code the store methods it asks of a local
store (topics, queues, min/max offset, queue_bounds, offset by time), answered by the brokers.
"""
from __future__ import annotations

import logging
import time
from typing import Callable, Iterator, Optional, TypeVar

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from acl import SessionCredentials
from remoting import ResponseCode
from rmq_client import MessageQueue, MQClientError, PullConsumer, Subscription

from . import option_keys as K
from .errors import DataLossError, RmqOptionError
from .options import BrokerQueue
from .schema import FULL, Selection

log = logging.getLogger(__name__)

T = TypeVar("T")
BOUNDS_FRESH_S = 0.2  # a trigger asks the bounds a few times in a row: one round of requests serves them all
RETRY_PAUSE_S = 0.5


class BrokerUnavailableError(RuntimeError):
    """A broker did not answer within brokerTimeoutMs: names the broker and the queue or request."""


# the remarks of a broker's ACL refusal (PlainPermissionManager's words), and the option to fix for each
_ACL_REFUSALS = (("Check signature failed", K.SECRET_KEY), ("No acl config for", K.ACCESS_KEY),
                 ("No accessKey is configured", K.ACCESS_KEY), ("No permission for", K.ACCESS_KEY),
                 ("Need admin permission", K.ACCESS_KEY))


def refused_by_acl(e: MQClientError, what: str) -> Exception:
    """A broker's ACL refusal as the error of the option to fix (secretKey for a signature that does not check);
    any other error as it is."""
    if e.code != ResponseCode.NO_PERMISSION:
        return e
    option = next((o for words, o in _ACL_REFUSALS if (e.remark or "").startswith(words)), None)
    if option is None:
        return e
    return RmqOptionError(option, f"{what}: the broker at {e.address} refused it (NO_PERMISSION, aclEnable=true): "
                                  f"{e.remark}")


def with_retry(call: Callable[[], T], timeout_ms: int, what: str) -> T:
    """call() again while its broker cannot be reached (down, restarting, not yet registered), up to timeout_ms;
    then BrokerUnavailableError naming what was asked. A broker's refusal (a response code) is not retried; an
    ACL refusal names the option to fix."""
    deadline = time.monotonic() + timeout_ms / 1000
    while True:
        try:
            return call()
        except MQClientError as e:
            if not e.unreachable:
                raise refused_by_acl(e, what) from None
            if time.monotonic() >= deadline:
                raise BrokerUnavailableError(f"{what}: no answer within brokerTimeoutMs={timeout_ms} ({e}); the "
                                             f"query can be restarted from its checkpoint once the broker is back "
                                             f"(nothing is lost or read twice)") from None
            log.warning("%s: %s; retrying", what, e)
            time.sleep(RETRY_PAUSE_S)


_CONSUMERS: dict[tuple[str, str, Optional[SessionCredentials]], PullConsumer] = {}


def consumer_for(namesrv: str, group: str, credentials: Optional[SessionCredentials] = None) -> PullConsumer:
    """One client per name server list, group and account per process (Python workers are reused across tasks)."""
    c = _CONSUMERS.get((namesrv, group, credentials))
    if c is None:
        c = _CONSUMERS[(namesrv, group, credentials)] = PullConsumer(namesrv, group, credentials=credentials)
    return c


class WireStore:
    """The local store's read interface, answered by the brokers of the topics' routes."""

    def __init__(self, namesrv: str, group: str, timeout_ms: int, credentials: Optional[SessionCredentials] = None):
        self.path = f"rocketmq://{namesrv}"
        self.namesrv, self.group, self.timeout_ms = namesrv, group, timeout_ms
        self.consumer = consumer_for(namesrv, group, credentials)
        self._bounds: dict[str, tuple[float, dict]] = {}
        self._registered: set[str] = set()  # topics whose brokers had the group's heartbeat

    def _retry(self, call: Callable[[], T], what: str) -> T:
        return with_retry(call, self.timeout_ms, what)

    def close(self) -> None:
        pass  # the consumer is shared by the process

    def __enter__(self) -> "WireStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def topics(self) -> list[str]:
        return self._retry(self.consumer.topics, f"topic list from {self.namesrv}")

    def has_topic(self, topic: str) -> bool:
        return bool(self.queues(topic))

    def queues(self, topic: str) -> list[BrokerQueue]:
        mqs = self._retry(lambda: self.consumer.queues(topic), f"route of topic {topic!r}")
        return [BrokerQueue(q.broker_name, q.queue_id) for q in mqs]

    def assigned(self, topic: str, queue_ids) -> list[BrokerQueue]:
        """assign's queue ids: that queue of every broker of the topic's route."""
        wanted = set(queue_ids)
        return [q for q in self.queues(topic) if q.queue_id in wanted]

    def _topic_bounds(self, topic: str) -> dict:
        cached = self._bounds.get(topic)
        if cached is not None and time.monotonic() - cached[0] < BOUNDS_FRESH_S:
            return cached[1]
        table = self._retry(lambda: self.consumer.queue_bounds(topic), f"offsets of topic {topic!r}")
        bounds = {BrokerQueue(mq.broker_name, mq.queue_id): b for mq, b in table.items()}
        self._bounds[topic] = (time.monotonic(), bounds)
        return bounds

    def queue_bounds(self, queues) -> dict:
        out = {}
        for t, q in queues:
            b = self._topic_bounds(t).get(q)
            if b is None:  # a queue that left the route (its broker is gone): asked again, then waited for
                self._bounds.pop(t, None)
                b = self._wait_for_queue(t, q)
            out[(t, q)] = b
        return out

    def _wait_for_queue(self, topic: str, q: BrokerQueue) -> tuple[int, int]:
        deadline = time.monotonic() + self.timeout_ms / 1000
        while True:
            b = self._topic_bounds(topic).get(q)
            if b is not None:
                return b
            if time.monotonic() >= deadline:
                raise BrokerUnavailableError(f"topic {topic!r} queue {q}: broker {q.broker_name!r} is not in the "
                                             f"topic's route within brokerTimeoutMs={self.timeout_ms}")
            time.sleep(RETRY_PAUSE_S)
            self._bounds.pop(topic, None)

    def min_offset(self, topic: str, q: BrokerQueue) -> int:
        return self.queue_bounds([(topic, q)])[(topic, q)][0]

    def max_offset(self, topic: str, q: BrokerQueue) -> int:
        return self.queue_bounds([(topic, q)])[(topic, q)][1]

    def offset_for_timestamp(self, topic: str, q: BrokerQueue, timestamp_ms: int) -> int:
        mq = MessageQueue(topic, q.broker_name, q.queue_id)
        return self._retry(lambda: self.consumer.offset_by_timestamp(mq, timestamp_ms),
                           f"offset by time of {topic}/{q}")

    def committed_offset(self, topic: str, q: BrokerQueue) -> Optional[int]:
        mq = MessageQueue(topic, q.broker_name, q.queue_id)
        return self._retry(lambda: self.consumer.query_offset(mq), f"group offset of {topic}/{q}")

    def commit_offsets(self, positions: dict) -> None:
        """UPDATE_CONSUMER_OFFSET of each queue, to the broker that holds it (RemoteBrokerOffsetStore); the group is
        registered with the topics' brokers first (once per topic), so that RocketMQ's admin tools see it."""
        new_topics = sorted({t for t, _ in positions} - self._registered)
        if new_topics:
            self._retry(lambda: self.consumer.register_group(new_topics), f"heartbeat of group {self.group}")
            self._registered.update(new_topics)
        for (t, q), off in sorted(positions.items()):
            mq = MessageQueue(t, q.broker_name, q.queue_id)
            self._retry(lambda: self.consumer.commit_offset(mq, int(off)), f"offset commit of {t}/{q}")


class WireOffsetCommitter:
    """The group's offsets to the brokers after each microbatch: only the queues that moved."""

    def __init__(self, group: str):
        self.group = group
        self.last: Optional[dict] = None

    def commit(self, positions: dict, store: WireStore) -> None:
        moved = {mq: off for mq, off in positions.items() if self.last is None or self.last.get(mq) != off}
        if not moved:
            return
        self.commit_moved(moved, store)
        self.last = dict(positions)

    def commit_moved(self, moved: dict, store: WireStore) -> None:
        """Commit the positions of the queues that moved (the caller knows which)."""
        store.commit_offsets(moved)
        if self.last is not None:
            self.last.update(moved)
        log.info("committed offsets of group %s to the brokers: %d queue(s) moved", self.group, len(moved))


class WireRange(InputPartition):
    """One queue's [start, end) on one broker, and everything an executor needs to pull it."""

    def __init__(self, namesrv: str, group: str, topic: str, queue: BrokerQueue, start: int, end: int,
                 subscription: Subscription, client_filter=None, residual=None, fail_on_data_loss: bool = True,
                 pull_batch_size: int = 1024, in_flight: int = 4, timeout_ms: int = 60_000,
                 selection: Selection = FULL, credentials: Optional[SessionCredentials] = None):
        """credentials: pickled without a secret that came from RMQ_SECRET_KEY (the executor reads its own)."""
        super().__init__((topic, str(queue), start, end))
        self.credentials = credentials
        self.namesrv, self.group, self.topic = namesrv, group, topic
        self.queue: tuple[str, int] = (queue[0], queue[1])
        self.start, self.end = start, end
        self.subscription, self.client_filter, self.residual = subscription, client_filter, residual
        self.fail_on_data_loss = fail_on_data_loss
        self.pull_batch_size, self.in_flight, self.timeout_ms = pull_batch_size, in_flight, timeout_ms
        self.selection = selection  # the query's columns (decoded alone unless a client-side filter reads others)

    def __repr__(self) -> str:
        return f"WireRange({self.topic}/{self.queue[0]}:{self.queue[1]} [{self.start}, {self.end}))"


def read_wire_partition(p: WireRange) -> Iterator[pa.RecordBatch]:
    consumer = consumer_for(p.namesrv, p.group, p.credentials)
    broker, qid = p.queue
    mq = MessageQueue(p.topic, broker, qid)
    where = f"topic {p.topic!r} queue {broker}:{qid}"

    def offset_moved(wanted: int, mn: int, mx: int) -> int:
        if wanted < mn:
            text = f"{where}: wanted offset {wanted} but the earliest available is {mn}; messages {wanted}..{mn - 1} " \
                   f"were deleted (retention) before they were read"
        else:
            text = f"{where}: offset {wanted} is past the queue's end {mx} on broker {broker!r}"
        if p.fail_on_data_loss:
            raise DataLossError(f"{text}. Set failOnDataLoss=false to skip them.")
        log.warning("%s; continuing at %d (failOnDataLoss=false)", text, min(max(wanted, mn), p.end))
        return min(max(wanted, mn), p.end) if wanted < mn else p.end

    # only the selected columns are decoded, unless a client-side filter reads others
    columns = None if p.client_filter is not None or p.residual is not None else \
        p.selection.scan_columns("queue_offset")
    pos = p.start
    deadline: Optional[float] = None
    while pos < p.end:
        try:
            for batch in consumer.read_range(mq, pos, p.end, p.subscription, p.pull_batch_size, p.in_flight,
                                             offset_moved, columns):
                if batch.num_rows:
                    pos = batch.column("queue_offset")[-1].as_py() + 1
                    deadline = None
                if p.client_filter is not None and batch.num_rows:
                    batch = batch.filter(p.client_filter.commit_log_mask(batch))
                if p.residual is not None and batch.num_rows:
                    batch = batch.filter(p.residual.row_mask(batch))
                if batch.num_rows:
                    yield p.selection.to_spark_batch(batch)
            return
        except MQClientError as e:
            if not e.unreachable:
                raise refused_by_acl(e, f"pull of {where}") from None
            now = time.monotonic()
            deadline = deadline or now + p.timeout_ms / 1000
            if now >= deadline:
                raise BrokerUnavailableError(f"{where}: broker {broker!r} gave no answer within brokerTimeoutMs="
                                             f"{p.timeout_ms} ({e}); restart the query from its checkpoint once "
                                             f"it is back") from None
            log.warning("%s: %s; retrying from offset %d", where, e, pos)
            time.sleep(RETRY_PAUSE_S)


def broker_subscription(tags: Optional[str], sql: Optional[str]) -> tuple[Subscription, Optional[str]]:
    """What the broker filters with (TAG or SQL92, next to the data), and tags left to the client when both are
    given (one expression per pull)."""
    if sql is not None:
        return Subscription(sql, "SQL92"), tags
    return Subscription(tags if tags is not None else "*", "TAG"), None


def wire_ranges(opts, ranges: list, pushed_filter=None, residual=None, selection: Selection = FULL) -> list:
    """WireRange partitions of (topic, BrokerQueue, start, end) ranges. pushed_filter: a batch read's filters
    Spark pushed (checked on the client: the broker takes one expression)."""
    from filters import MessageFilter

    subscription, client_tags = broker_subscription(opts.tags, opts.sql)
    client_filter = MessageFilter.both(MessageFilter.by_tags(client_tags) if client_tags else None, pushed_filter)
    return [WireRange(opts.namesrv_addr, opts.consumer_group, t, q, s, e, subscription, client_filter, residual,
                      opts.fail_on_data_loss, opts.pull_batch_size, opts.pulls_in_flight, opts.broker_timeout_ms,
                      selection, opts.credentials)
            for t, q, s, e in ranges]
