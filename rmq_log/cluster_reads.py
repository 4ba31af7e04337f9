"""ClusterReads: LogReads on the brokers of a cluster: the driver asks the name servers for routes and each broker
for its queues' offsets (one GET_TOPIC_STATS_INFO per broker and topic), executors pull their queue ranges from
the broker that holds them (ClusterRange), and the group's offsets go to the brokers with UPDATE_CONSUMER_OFFSET.

A queue is (topic, QueueKey(brokerName, queueId)); it is named "brokerName:queueId" (offsets JSON, messages), so the
same queue id on two brokers is never confused.
"""
from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import time
from typing import Callable, Iterator, Optional, TypeVar

import numpy as np
import pyarrow as pa

from rmq_acl import SessionCredentials
from rmq_client import NAMESRV_HINT, MessageQueue, MQClientError, Subscription, SubscriptionError

from .broker_calls import RETRY_PAUSE_S, consumer_for, refused_by_acl, with_retry
from .broker_wait import BrokerUnavailableError, RetryLog
from .queue_key import QueueKey, split_queue_name
from .reads import LogReads, RangeReader, ReadPolicy, ReadSettings

log = logging.getLogger(__name__)

T = TypeVar("T")
BOUNDS_FRESH_S = 0.2  # a trigger asks the bounds a few times in a row: one round of requests serves them all


class ClusterReads(LogReads):
    """A reader's questions, answered by the brokers of the topics' routes. timeout_ms: how long a broker that
    cannot be reached is waited for (brokerTimeoutMs)."""

    def __init__(self, namesrv: str, credentials: Optional[SessionCredentials], timeout_ms: int,
                 settings: ReadSettings):
        self.path = f"rocketmq://{namesrv}"
        self.namesrv, self.group, self.timeout_ms = namesrv, settings.group, timeout_ms
        self.credentials, self.settings, self.policy = credentials, settings, settings.policy
        self.consumer = consumer_for(namesrv, self.group, credentials)
        self._bounds: dict[str, tuple[float, dict]] = {}
        # every queue seen in a topic's offsets, with its last bounds: a broker that leaves the route (stopped,
        # or not answering) keeps its queues, at those bounds, for brokerTimeoutMs
        self._seen: dict[str, dict[QueueKey, tuple[int, int]]] = {}
        self._away: dict[str, float] = {}  # broker name -> since when it has been away
        self._answered = False  # a name server or broker has answered this store
        self._registered: set[str] = set()  # topics whose brokers had the group's heartbeat

    def _retry(self, call: Callable[[], T], what: str) -> T:
        answer = with_retry(call, self.timeout_ms, what, self.policy, self._refused_at_first_lookup)
        self._answered = True
        return answer

    def _refused_at_first_lookup(self, e: MQClientError) -> Optional[Exception]:
        """Name servers that refuse connections before any answer: a wrong namesrvAddr, not one restarting; the
        query fails at once naming it (a timeout is still waited for: a slow network may answer)."""
        if self._answered or e.address not in self.namesrv.split(";") or "ConnectionRefused" not in (e.remark or ""):
            return None
        return self.policy.setting_error("namesrv", f"no name server listens at {self.namesrv} (connection refused "
                                                    f"at the first lookup); check the address ({NAMESRV_HINT})")

    def close(self) -> None:
        pass  # the consumer is shared by the process

    def describe(self) -> str:
        return f"the cluster of name server(s) {self.namesrv}"

    def queue_name(self, queue: QueueKey) -> str:
        return f"{queue.broker_name}:{queue.queue_id}"

    def parse_queue(self, name: str) -> QueueKey:
        broker, queue_id = split_queue_name(name)
        if broker is None:
            raise ValueError(f"over the wire, name a queue as brokerName:queueId (e.g. \"broker-a:{queue_id}\"), "
                             f"not {name}")
        return QueueKey(broker, queue_id)

    def topics(self) -> list[str]:
        return self._retry(self.consumer.topics, f"topic list from {self.namesrv}")

    def has_topic(self, topic: str) -> bool:
        return bool(self.queues(topic))

    def queues(self, topic: str) -> list[QueueKey]:
        """The queues of the topic's route, and those seen before of brokers that have left it since."""
        mqs = self._retry(lambda: self.consumer.queues(topic), f"route of topic {topic!r}")
        listed = [QueueKey(q.broker_name, q.queue_id) for q in mqs]
        brokers = {q.broker_name for q in listed}
        away = [q for q in self._seen.get(topic, ()) if q.broker_name not in brokers]
        return sorted(listed + away) if away else listed

    def topics_version(self) -> None:
        return None  # the routes carry no version: the queues are listed again each time

    def bounds_tracker(self, queues) -> "RouteBounds":
        return RouteBounds(self, queues)

    def keep_checkpointed(self, positions: dict) -> bool:
        """Queues a query's checkpoint holds on brokers the route does not list now (the query restarted while a
        broker is away) are kept at their checkpointed offsets like queues seen before: the query waits
        brokerTimeoutMs for their broker instead of carrying them unread. True when any was added."""
        added = False
        for (topic, q), off in positions.items():
            seen = self._seen.setdefault(topic, {})
            if q not in seen:
                seen[q] = (off, off)
                added = True
        if added:
            self._bounds.clear()
        return added

    def assigned(self, topic: str, queue_ids) -> list[QueueKey]:
        """assign's queue ids: that queue of every broker of the topic's route."""
        wanted = set(queue_ids)
        return [q for q in self.queues(topic) if q.queue_id in wanted]

    def _topic_bounds(self, topic: str) -> dict:
        cached = self._bounds.get(topic)
        if cached is not None and time.monotonic() - cached[0] < BOUNDS_FRESH_S:
            return cached[1]
        table, unreachable = self._retry(lambda: self.consumer.queue_bounds_of_reachable(topic),
                                         f"offsets of topic {topic!r}")
        bounds = {QueueKey(mq.broker_name, mq.queue_id): b for mq, b in table.items()}
        seen = self._seen.setdefault(topic, {})
        seen.update(bounds)
        answered = {q.broker_name for q in bounds}
        away = sorted({q.broker_name for q in seen} - answered)
        if away:
            # while a broker is away the route is asked again each round: one back in the name server's route
            # is read at once, not after the route's 30 s in the client's cache
            self.consumer.forget_route(topic)
        for broker in away:
            self._broker_away(broker, topic, unreachable.get(broker))
        for q, b in seen.items():
            if q.broker_name not in answered:
                bounds[q] = b
        for broker in sorted(answered & set(self._away)):
            log.warning("broker %r answers again (away %.0f s)", broker, time.monotonic() - self._away.pop(broker))
        self._bounds[topic] = (time.monotonic(), bounds)
        return bounds

    def _broker_away(self, broker: str, topic: str, error: Optional[MQClientError]) -> None:
        """A broker whose queues the query reads is out of the route or not answering: its queues stay at their
        last offsets (the query goes on with the other brokers) for brokerTimeoutMs, then BrokerUnavailableError.
        They are never dropped: that would skip what they hold."""
        now = time.monotonic()
        why = f"not answering ({error})" if error is not None else "not in the route of the name servers"
        since = self._away.get(broker)
        if since is None:
            self._away[broker] = since = now
            log.warning("broker %r (topic %r) is %s; its queues keep their offsets and the query goes on with the "
                        "other brokers, for up to brokerTimeoutMs=%d", broker, topic, why, self.timeout_ms)
        if now - since >= self.timeout_ms / 1000:
            raise BrokerUnavailableError(f"broker {broker!r} (topic {topic!r}) has been {why} for more than "
                                         f"brokerTimeoutMs={self.timeout_ms}; its queues hold unread offsets of the "
                                         f"query. Restart the query from its checkpoint once the broker is back "
                                         f"(nothing is lost or read twice)")

    def queue_bounds(self, queues) -> dict:
        out = {}
        for t, q in queues:
            b = self._topic_bounds(t).get(q)
            if b is None:  # a queue that left the route (its broker is gone): asked again, then waited for
                self._bounds.pop(t, None)
                b = self._wait_for_queue(t, q)
            out[(t, q)] = b
        return out

    def _wait_for_queue(self, topic: str, q: QueueKey) -> tuple[int, int]:
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

    def min_offset(self, topic: str, q: QueueKey) -> int:
        return self.queue_bounds([(topic, q)])[(topic, q)][0]

    def max_offset(self, topic: str, q: QueueKey) -> int:
        return self.queue_bounds([(topic, q)])[(topic, q)][1]

    def offset_for_timestamp(self, topic: str, q: QueueKey, timestamp_ms: int) -> int:
        mq = MessageQueue(topic, q.broker_name, q.queue_id)
        return self._retry(lambda: self.consumer.offset_by_timestamp(mq, timestamp_ms),
                           f"offset by time of {topic}/{q}")

    def record_sizes(self, topic: str, q: QueueKey, start: int, end: int) -> None:
        return None  # a pull's answer is the only size a broker tells (maxBytesPerTrigger is a directory's option)

    def committed_offset(self, topic: str, q: QueueKey) -> Optional[int]:
        mq = MessageQueue(topic, q.broker_name, q.queue_id)
        return self._retry(lambda: self.consumer.query_offset(mq), f"group offset of {topic}/{q}")

    def committed_offsets(self, queues: list) -> dict:
        # QUERY_CONSUMER_OFFSET of each queue, from its broker
        return {(t, q): self.committed_offset(t, q) for t, q in queues}

    def committer(self) -> "ClusterOffsetCommitter":
        return ClusterOffsetCommitter(self.group)

    def note_batch_plan(self, queues: list) -> None:
        by_broker: dict = {}
        for _, q in queues:
            by_broker[q.broker_name] = by_broker.get(q.broker_name, 0) + 1
        log.warning("batch read through %s: the route lists broker(s) %s; a stopped broker's queues are not in the "
                    "read", self.describe(), ", ".join(f"{b} ({n} queue(s))" for b, n in sorted(by_broker.items()))
                    or "none")

    def range_readers(self, ranges: list, scan_filter, client_filter, residual, selection,
                      fail_on_data_loss: bool) -> list[RangeReader]:
        """client_filter: a batch read's filters Spark pushed, checked on the client with the tags the broker
        does not take (it takes one expression)."""
        from filters import MessageFilter

        s = self.settings
        subscription, client_tags = broker_subscription(s.tags, s.sql)
        checked = MessageFilter.both(MessageFilter.by_tags(client_tags) if client_tags else None, client_filter)
        return [ClusterRange(self.namesrv, self.group, t, q, st, e, subscription, checked, residual,
                             fail_on_data_loss, s.pull_batch_size, s.pulls_in_flight, self.timeout_ms, selection,
                             self.policy, self.credentials, s.query_key)
                for t, q, st, e in ranges]

    def commit_offsets(self, positions: dict) -> dict[str, MQClientError]:
        """UPDATE_CONSUMER_OFFSET of each queue, to the broker that holds it (RemoteBrokerOffsetStore), asked once:
        {broker name: its error} for the brokers that could not be reached (the rest of their queues are not
        tried). A refusal (a response code) raises. The group is registered with the topics' brokers first (one
        heartbeat per topic, again after a broker could not be reached), so that RocketMQ's admin tools see it."""
        failed: dict[str, MQClientError] = {}
        new_topics = sorted({t for t, _ in positions} - self._registered)
        if new_topics:
            try:
                self.consumer.register_group(new_topics)
                self._registered.update(new_topics)
            except MQClientError as e:
                if not e.unreachable:
                    raise refused_by_acl(e, f"heartbeat of group {self.group}", self.policy) from None
        for (t, q), off in sorted(positions.items()):
            if q.broker_name in failed:
                continue
            mq = MessageQueue(t, q.broker_name, q.queue_id)
            try:
                try:
                    self.consumer.commit_offset(mq, int(off))
                except SubscriptionError:
                    # A slave promoted to master (5.x controller mode) may not hold the group yet: a slave copies
                    # its master's subscription groups only every few seconds. The heartbeat creates it there
                    # (autoCreateSubscriptionGroup), as the Java consumer's periodic heartbeat does.
                    self.consumer.register_group([t])
                    self.consumer.commit_offset(mq, int(off))
            except MQClientError as e:
                if not e.unreachable:
                    raise refused_by_acl(e, f"offset commit of {t}/{q}", self.policy) from None
                failed[q.broker_name] = e
        return failed


class RouteBounds:
    """The bounds of a fixed list of queues as arrays, every queue asked of its broker at each update (one
    GET_TOPIC_STATS_INFO per broker and topic, shared by the updates of a trigger: BOUNDS_FRESH_S)."""

    def __init__(self, store: ClusterReads, queues: list):
        self.store, self.queues = store, queues
        self.mins = np.zeros(len(queues), dtype=np.int64)
        self.maxs = np.zeros(len(queues), dtype=np.int64)
        self.updates = 0

    def update(self) -> None:
        bounds = self.store.queue_bounds(self.queues)
        for i, q in enumerate(self.queues):
            self.mins[i], self.maxs[i] = bounds[q]
        self.updates += 1


class ClusterOffsetCommitter:
    """The group's offsets to the brokers after each microbatch: only the queues that moved. They are a report for
    outside tools (the checkpoint is the truth), so a broker that cannot be reached never stops the query: the
    failure is logged once per broker and failure spell, with the lag it leaves, and its queues are sent again with
    the next commit."""

    def __init__(self, group: str):
        self.group = group
        self.last: Optional[dict] = None
        self._pending: dict = {}                    # positions not yet on their broker
        self._held: dict = {}                       # what each queue's broker holds from us
        self._failing: dict[str, float] = {}        # broker name -> when its failure spell began

    def commit(self, positions: dict, store: ClusterReads) -> None:
        moved = {mq: off for mq, off in positions.items() if self.last is None or self.last.get(mq) != off}
        if not moved and not self.pending:
            return
        self.commit_moved(moved, store)
        self.last = dict(positions)

    @property
    def pending(self) -> bool:
        """Positions wait for a broker that could not be reached: the next commit sends them even if none moved."""
        return bool(self._pending)

    def commit_moved(self, moved: dict, store: ClusterReads) -> None:
        """Commit the positions of the queues that moved (the caller knows which), and any left from a failure."""
        todo = {**self._pending, **moved}
        failed = store.commit_offsets(todo)
        self._pending = {mq: off for mq, off in todo.items() if mq[1].broker_name in failed}
        self._held.update({mq: off for mq, off in todo.items() if mq not in self._pending})
        for broker in sorted(set(self._failing) - set(failed)):
            log.warning("offset commits of group %s to broker %r work again (after %.0f s); the group's offsets "
                        "there are the query's again", self.group, broker, time.monotonic() - self._failing.pop(broker))
        for broker, e in sorted(failed.items()):
            if broker not in self._failing:
                self._failing[broker] = time.monotonic()
                log.warning("offset commit of group %s to broker %r failed (%s): %s; the query goes on (its checkpoint "
                            "is the truth) and the commit is tried again with each microbatch", self.group, broker, e,
                            self._lag(broker))
        if self.last is not None:
            self.last.update(moved)
        log.info("committed offsets of group %s to the brokers: %d queue(s) moved%s", self.group, len(moved),
                 f", {len(self._pending)} waiting for broker(s) {', '.join(sorted(failed))}" if failed else "")

    def _lag(self, broker: str) -> str:
        """What a broker's group offsets miss: messages behind the query where it holds our earlier commit."""
        queues = [(mq, off) for mq, off in self._pending.items() if mq[1].broker_name == broker]
        known = [off - self._held[mq] for mq, off in queues if mq in self._held]
        text = f"its {len(queues)} queue(s) keep older offsets"
        if known:
            text += f", {sum(known)} message(s) behind the query"
        if len(known) < len(queues):
            text += f" ({len(queues) - len(known)} never committed by this query)"
        return text


class ClusterRange(RangeReader):
    """One queue's [start, end) on one broker, and everything an executor needs to pull it."""

    def __init__(self, namesrv: str, group: str, topic: str, queue: QueueKey, start: int, end: int,
                 subscription: Subscription, client_filter, residual, fail_on_data_loss: bool, pull_batch_size: int,
                 in_flight: int, timeout_ms: int, selection, policy: ReadPolicy,
                 credentials: Optional[SessionCredentials] = None, query_key: str = ""):
        """credentials: pickled without a secret that came from RMQ_SECRET_KEY (the executor reads its own).
        query_key: the reader's, for what is logged once per query ("": once per process)."""
        self.policy = policy
        self.credentials, self.query_key = credentials, query_key
        self.namesrv, self.group, self.topic = namesrv, group, topic
        self.queue: tuple[str, int] = (queue.broker_name, queue.queue_id)
        self.start, self.end = start, end
        self.subscription, self.client_filter, self.residual = subscription, client_filter, residual
        self.fail_on_data_loss = fail_on_data_loss
        self.pull_batch_size, self.in_flight, self.timeout_ms = pull_batch_size, in_flight, timeout_ms
        self.selection = selection  # the query's columns (decoded alone unless a client-side filter reads others)

    def key(self) -> tuple:
        return self.topic, f"{self.queue[0]}:{self.queue[1]}", self.start, self.end

    def read(self) -> Iterator[pa.RecordBatch]:
        return _read_range(self)

    def __repr__(self) -> str:
        return f"ClusterRange({self.topic}/{self.queue[0]}:{self.queue[1]} [{self.start}, {self.end}))"


def _read_range(p: ClusterRange) -> Iterator[pa.RecordBatch]:
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
        p.policy.report_data_loss(text, p.fail_on_data_loss, "skip them",
                                  f"continuing at {min(max(wanted, mn), p.end)}")
        return min(max(wanted, mn), p.end) if wanted < mn else p.end

    # only the selected columns are decoded, unless a client-side filter reads others
    columns = None if p.client_filter is not None or p.residual is not None else \
        p.selection.scan_columns("queue_offset")
    unfiltered = p.subscription.matches_everything
    pos = p.start
    short_pulls = 0  # in a row: one short pull is a consume-queue file's end, a cap shortens every pull
    deadline: Optional[float] = None

    def pulled(asked: int, got: int) -> None:
        nonlocal short_pulls
        if unfiltered:  # cut short by the broker, not by the range's end
            short_pulls = short_pulls + 1 if got < asked and got * 4 <= p.pull_batch_size else 0
            if short_pulls >= 2:
                _note_capped_pull(broker, got, p)

    retries = RetryLog(f"pull of {where} from broker {broker!r}")
    while pos < p.end:
        try:
            for batch in consumer.read_range(mq, pos, p.end, p.subscription, p.pull_batch_size, p.in_flight,
                                             offset_moved, columns, pulled):
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
                raise refused_by_acl(e, f"pull of {where}", p.policy) from None
            now = time.monotonic()
            deadline = deadline or now + p.timeout_ms / 1000
            if now >= deadline:
                raise BrokerUnavailableError(f"{where}: broker {broker!r} gave no answer within brokerTimeoutMs="
                                             f"{p.timeout_ms} ({e}); restart the query from its checkpoint once "
                                             f"it is back") from None
            retries.failed(e, f"retrying from offset {pos} for up to brokerTimeoutMs={p.timeout_ms}")
            time.sleep(RETRY_PAUSE_S)


_CAPPED: set[tuple[str, str]] = set()  # (query key, broker) whose capped pulls this process has logged
CAPPED_MARKS = os.path.join(tempfile.gettempdir(), "rmq-spark-capped")  # the same, across this machine's workers


def _first_capped_note(query_key: str, broker: str) -> bool:
    """True for the first capped pull of the query from the broker on this machine: its Python workers (and the
    tasks of every microbatch) share a mark file named by the query's key and the broker."""
    if (query_key, broker) in _CAPPED:
        return False
    _CAPPED.add((query_key, broker))
    if not query_key:
        return True
    mark = os.path.join(CAPPED_MARKS, hashlib.sha1(f"{query_key}/{broker}".encode()).hexdigest()[:20])
    try:
        os.makedirs(CAPPED_MARKS, exist_ok=True)
        os.close(os.open(mark, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except FileExistsError:
        return False
    except OSError:
        return True  # no mark possible: logged once per worker instead
    _prune_capped_marks(time.time() - CAPPED_MARK_DAYS * 86400)
    return True


CAPPED_MARK_DAYS = 7  # a query's mark outlives its runs by this much (a restarted query warns no more than once)


def _prune_capped_marks(before: float) -> None:
    """Remove marks older than `before` (epoch seconds): one empty file per query and broker would otherwise
    gather in the temporary directory for as long as the machine runs queries."""
    try:
        with os.scandir(CAPPED_MARKS) as entries:
            for entry in entries:
                try:
                    if entry.stat().st_mtime < before:
                        os.remove(entry.path)
                except OSError:
                    pass
    except OSError:
        pass


def _note_capped_pull(broker: str, got: int, p: "ClusterRange") -> None:
    """Pulls of every message that came back with far fewer than pullBatchSize twice in a row, the range going on:
    the broker caps its pulls (RocketMQ's defaults: 32 messages, 256 KiB). Logged once per query and broker."""
    if not _first_capped_note(p.query_key, broker):
        return
    log.warning("pulls from broker %r come back with %d messages, far below pullBatchSize=%d: the broker caps them "
                "(logged once per query). On the broker: raise maxTransferCountOnMessageInMemory (e.g. 4096) and "
                "maxTransferBytesOnMessageInMemory (e.g. 8388608) in its broker.conf for a read several times "
                "faster (`rmq serve` ships those; a stock broker's defaults are 32 and 262144). Where the broker "
                "cannot change: raise pullsInFlight (now %d, e.g. 16) so more capped pulls of each partition are "
                "under way at once; pullBatchSize only asks, the broker's cap wins", broker, got, p.pull_batch_size,
                p.in_flight)


def broker_subscription(tags: Optional[str], sql: Optional[str]) -> tuple[Subscription, Optional[str]]:
    """What the broker filters with (TAG or SQL92, next to the data), and tags left to the client when both are
    given (one expression per pull)."""
    if sql is not None:
        return Subscription(sql, "SQL92"), tags
    return Subscription(tags if tags is not None else "*", "TAG"), None
