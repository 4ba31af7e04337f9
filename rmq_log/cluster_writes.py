"""ClusterWrites: a cluster's two-phase writes (writes.LogWrites). Tasks send their rows to the queues of the
topic's route; exactly once (the default) as transactional halves, which the driver's commit of the batch commits
with END_TRANSACTION (after recording a stream's decision in its checkpoint, transaction_log.py) and its abort rolls
back. At least once they are plain sends, visible at once.

The transactional protocol is chosen per broker: an Apache RocketMQ broker (4.x, 5.x) takes RocketMQ's own, a half
per message (SEND_MESSAGE_V2) and an END_TRANSACTION per half (half_messages.py); `rmq serve` takes half batches
(SEND_BATCH_MESSAGE), each ended whole by one END_TRANSACTION.

Queue choice, as a store directory's: queue_id numbers the topic's write queues across its brokers in the
route's order (brokerName, then queueId; with one broker it is the queue id), sharding_key hashes over them as
RocketMQ's SelectMessageQueueByHash, and other rows are spread over all of them in contiguous runs.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import threading
from dataclasses import dataclass
from typing import Callable, Collection, Iterable, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rmq_client import (
    AsyncTransactionProducer,
    BrokerBusyError,
    EndOutcome,
    HalfBatch,
    MessageHalves,
    MessageQueue,
    MQClientError,
    TransactionState,
)
from rmq_client.event_loop import run_blocking, run_in_background
from rmq_client.message_batch import encode_message_batch, properties_text
from rmq_client.producer import DEFAULT_TOPIC_QUEUE_NUMS, AsyncProducer
from rmq_client.transaction_producer import (
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TRANSACTION_BATCH,
    PROPERTY_TRANSACTION_PREPARED,
    new_transaction_id,
)
from rmq_common.message_codec import PROPERTY_KEYS, PROPERTY_TAGS
from rmq_common.numpy_arrow import from_numpy, null_mask, values
from store.record_encoder import java_hash_codes

from .broker_wait import BrokerUnavailableError, RetryLog
from .errors import RowError
from .half_messages import commit_messages, per_message_broker, queue_ends, roll_back_messages
from .staged_rows import validate_staged
from .transaction_log import PROPERTY_SINK_BATCH, Decision, TransactionLog, answer_copy
from .writes import BatchId, LogWrites, WriteOptionError, WriteOptions, WriteRefused, task_label, with_task_label

log = logging.getLogger(__name__)

MAX_MESSAGE_SIZE = 4 * 1024 * 1024   # a broker's default maxMessageSize, which also bounds a batch's body
SEND_BYTES = 3 * 1024 * 1024         # one SEND_BATCH_MESSAGE's body, kept under the broker's limit
SEND_MESSAGES = 16384                # and its messages
FLUSH_ROWS = 65536                   # rows a task collects before sending
SENDS_IN_FLIGHT = 4                  # per task
ENDS_IN_FLIGHT = 16                  # per commit
AVOID_S = 30.0                       # a broker that failed a send is left out of movable sends this long
MOVE_AFTER_S = 3.0                   # a movable send without answers for this long moves (the Java sendMsgTimeout)

# Observers of a commit's named steps (before_decision, inside_commit, after_commit), each called with the
# decisions' directory and the batch id: none in production; the fault tests' plugin (tests/faults) adds one that
# pauses or kills the driver there.
COMMIT_STEPS: list[Callable[[str, str, int], None]] = []

# broker name -> loop time until which movable sends avoid it (per process, as a Java producer's fault strategy)
_AVOID: dict[str, float] = {}


def _other_queue(mq: MessageQueue, queues: list[MessageQueue], now: float) -> Optional[MessageQueue]:
    """A queue of the topic on a broker that has not failed a send lately, mq's broker excluded; the next one in
    the route's order after mq, so that moved sends spread rather than all landing on one queue."""
    usable = [q for q in queues if q.broker_name != mq.broker_name and _AVOID.get(q.broker_name, 0.0) <= now]
    if not usable:
        return None
    after = [q for q in usable if (q.broker_name, q.queue_id) > (mq.broker_name, mq.queue_id)]
    return (after or usable)[0]


@dataclass
class SentReceipt:
    """One task attempt's sends: the half batches (rmq serve) and half messages (Apache RocketMQ) to end, exactly
    once, and its row count."""
    halves: tuple
    rows: int
    partition: int
    attempt: int
    messages: tuple = ()


_PRODUCERS: dict[tuple, AsyncTransactionProducer] = {}
_PRODUCERS_LOCK = threading.Lock()


def _producer(options: WriteOptions, decisions: Optional[TransactionLog] = None) -> AsyncTransactionProducer:
    """One client per process, producer group and account (Python workers are reused across tasks). It answers the
    brokers' check-backs it gets: from `decisions` when given; without them, a copy of a half message is rolled
    back and a half batch left unknown (a df.write has no decisions: its commit is the job's)."""
    key = (options.namesrv, options.producer_group, options.credentials, decisions.dir if decisions else None)

    async def answer(request) -> TransactionState:
        if decisions is not None:
            state = decisions.answer(request)
        else:
            state = answer_copy(request) or TransactionState.UNKNOW
        log.info("check-back of transaction %s from %s: %s", request.transaction_id, request.broker_address,
                 state.name)
        return state

    async def make() -> AsyncTransactionProducer:
        return AsyncTransactionProducer(options.namesrv, options.producer_group, credentials=options.credentials,
                                        checker=answer)
    with _PRODUCERS_LOCK:
        p = _PRODUCERS.get(key)
        if p is None:
            p = _PRODUCERS[key] = run_blocking(make)
        return p


class ClusterWrites(LogWrites):
    """Writes through the brokers of the name servers options.namesrv_addr. A row's born_timestamp is refused (a
    batch frame carries one born timestamp for all its messages)."""

    def __init__(self, options: WriteOptions, columns: Collection[str]):
        super().__init__(options)
        if "born_timestamp" in columns:
            raise WriteOptionError("namesrv_addr", "the born_timestamp column is not sent through brokers (a batch "
                                                   "frame carries one born timestamp for all its messages); drop the "
                                                   "column or write to a store directory")
        if options.stream and options.exactly_once:
            os.makedirs(TransactionLog(options.checkpoint or "").dir, exist_ok=True)

    def stage(self, rows: Iterable[pa.RecordBatch], batch_id: BatchId, partition: int, attempt: int
              ) -> SentReceipt:
        batch_id = "0" if batch_id is None else batch_id
        producer = _producer(self.options)
        halves: list = []  # HalfBatch and MessageHalves
        pending: list[pa.RecordBatch] = []
        count = 0
        # One flush is sent while the next rows are gathered (the broker's work overlaps Spark's), at most one.
        sending: list[concurrent.futures.Future] = []

        def sent() -> None:
            while sending:
                halves.extend(sending.pop().result())

        def flush() -> None:
            sent()
            if pending:
                table = pa.Table.from_batches(pending).combine_chunks()
                pending.clear()
                sending.append(run_in_background(self._send_table, producer, table, partition, str(batch_id)))

        try:
            for staged in rows:
                try:
                    validate_staged(staged, MAX_MESSAGE_SIZE, count)
                except RowError as e:
                    raise with_task_label(e, self.options, batch_id, partition) from None
                pending.append(staged)
                count += staged.num_rows
                if sum(b.num_rows for b in pending) >= FLUSH_ROWS:
                    flush()
            flush()
            sent()
        except BaseException:
            try:
                sent()  # the flush under way: its halves are rolled back with the others
            except BaseException:
                pass  # it failed: it rolled back what it had sent
            if halves:  # this attempt's halves will not be committed: say so now rather than at the broker's check
                try:
                    run_blocking(_roll_back, producer, halves, self.options.broker_timeout_ms)
                except Exception as e:
                    log.warning("%s: rolling back this attempt's halves failed (%s); the brokers' checks will",
                                task_label(self.options, batch_id, partition), e)
            raise
        return SentReceipt(tuple(h.to_json() for h in halves if isinstance(h, HalfBatch)), count, partition, attempt,
                           tuple(h.to_json() for h in halves if isinstance(h, MessageHalves)))

    def commit(self, receipts: list, batch_id: int) -> None:
        if not self.options.exactly_once:
            return
        if not self.options.stream:
            commit_write(self.options, receipts)
            return
        outcome = commit_halves(self.options, receipts, int(batch_id))
        log.info("sink %s batch %d over the wire: %s", self.options.sink_id, batch_id, outcome)

    def abort(self, receipts: list, batch_id: int) -> None:
        if self.options.exactly_once:
            abort_halves(self.options, receipts)

    async def _send_table(self, producer: AsyncTransactionProducer, table: pa.Table, partition: int,
                          batch_id: str) -> list:
        topics = table.column("topic").combine_chunks()
        enc = pc.dictionary_encode(topics)
        names = enc.dictionary.to_pylist()
        queue_lists = [await self._queues(producer, name) for name in names]
        tidx = values(enc.indices).astype(np.int64)
        nq = np.array([len(q) for q in queue_lists], dtype=np.int64)[tidx]
        n = table.num_rows
        qcol, skey = table.column("queue_id").combine_chunks(), table.column("sharding_key").combine_chunks()
        qidx = ((np.int64(partition) + (np.arange(n, dtype=np.int64) * nq) // max(n, 1)) % nq)
        if skey.null_count < n:
            hashed = np.abs(java_hash_codes(skey, n)) % nq
            qidx = np.where(null_mask(skey), qidx, hashed)
        if qcol.null_count < n:
            given = np.where(null_mask(qcol), -1, values(qcol)).astype(np.int64)
            bad = (given >= nq)
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise RowError(f"row {i}: queue_id {int(given[i])} is outside topic {names[tidx[i]]!r}'s "
                               f"{int(nq[i])} write queues (numbered across its brokers)")
            qidx = np.where(given >= 0, given, qidx)
        key = tidx * 2048 + qidx
        order = np.argsort(key, kind="stable")
        skey_sorted = key[order]
        cuts = np.flatnonzero(np.diff(skey_sorted)) + 1
        starts = np.concatenate([[0], cuts]) if n else np.array([], dtype=np.int64)
        ends = np.concatenate([cuts, [n]]) if n else np.array([], dtype=np.int64)
        body_len = values(pc.binary_length(table.column("body").combine_chunks()))
        # rows the writer placed itself (no queue_id, no sharding_key) may move to another broker's queue when
        # theirs fails; rows placed by the user stay on their queue and wait for its broker
        free = np.ones(n, dtype=bool)
        if qcol.null_count < n:
            free &= null_mask(qcol)
        if skey.null_count < n:
            free &= null_mask(skey)
        jobs = []
        for s, e in zip(starts, ends):
            rows = order[s:e]
            mq = queue_lists[int(tidx[rows[0]])][int(qidx[rows[0]])]
            sizes = np.cumsum(body_len[rows] + 200)  # + the frame and properties of a message, roughly
            at = 0
            while at < len(rows):
                stop = min(len(rows), at + SEND_MESSAGES,
                           max(at + 1, int(np.searchsorted(sizes, (sizes[at - 1] if at else 0) + SEND_BYTES))))
                part = rows[at:stop]
                jobs.append((mq, part, queue_lists[int(tidx[rows[0]])] if free[part].all() else []))
                at = stop
        gate = asyncio.Semaphore(SENDS_IN_FLIGHT)

        async def one(mq: MessageQueue, rows: np.ndarray, others: list[MessageQueue]):
            async with gate:
                return await self._send_rows(producer, mq, table.take(from_numpy(rows)), batch_id, others)
        done = await asyncio.gather(*(one(*job) for job in jobs), return_exceptions=True)
        failed = [d for d in done if isinstance(d, BaseException)]
        sent = [d for d in done if isinstance(d, (HalfBatch, MessageHalves))]
        if failed:
            if sent:
                await _roll_back(producer, sent, self.options.broker_timeout_ms)
            raise failed[0]
        return sent

    async def _queues(self, producer: AsyncTransactionProducer, topic: str) -> list[MessageQueue]:
        queues = await producer.api.queues(topic, readable=False)
        if not queues:  # a new topic: created on every broker that allows it, as a producer's first send does
            maker = AsyncProducer(self.options.namesrv, self.options.producer_group, api=producer.api)
            await maker.create_topic(topic, maker.default_topic_queue_nums)
            queues = await producer.api.queues(topic, readable=False)
            if not queues:
                raise MQClientError(17, f"topic {topic!r} has no write queues after its creation",
                                    self.options.namesrv, "send")
        return sorted(queues, key=lambda q: (q.broker_name, q.queue_id))

    async def _send_rows(self, producer: AsyncTransactionProducer, mq: MessageQueue, t: pa.Table,
                         batch_id: str, others: Optional[list[MessageQueue]] = None):
        """The rows to mq: a half batch (rmq serve), half messages (an Apache RocketMQ broker), or plain sends
        (at_least_once; None). With `others` (the topic's queues, for rows the writer placed itself) a send that
        cannot reach mq's broker goes on at once to a queue of another broker, and that broker is avoided by
        movable sends for AVOID_S, as the Java producer retries another broker; without, it is retried on mq
        until brokerTimeoutMs. Nothing of a failed send is listed for the commit: a half the dead broker stored
        without answering is rolled back by its check when the broker returns (the decision does not list it),
        and a moved half batch gets a new transaction id, so such a check never commits a moved row twice. Halves
        the master stored but could not replicate or flush (a SYNC_MASTER without its slave: SLAVE_NOT_AVAILABLE)
        are rolled back and sent again the same way; at_least_once takes such a plain send as sent, as the Java
        producer does."""
        n = t.num_rows
        props = t.column("properties").combine_chunks()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.options.broker_timeout_ms / 1000
        if others and _AVOID.get(mq.broker_name, 0.0) > loop.time():
            mq = _other_queue(mq, others, loop.time()) or mq
        extra: dict = {}
        txn = ""
        body = None
        what = ""
        busy: Optional[RetryLog] = None

        def to(queue: MessageQueue) -> None:
            nonlocal extra, txn, body, what
            extra = {PROPERTY_TAGS: t.column("tags").combine_chunks(),
                     PROPERTY_KEYS: t.column("keys").combine_chunks()}
            txn, body = new_transaction_id(), None
            what = f"sending {n} rows to {queue.topic}/{queue.broker_name}/{queue.queue_id}"
        to(mq)
        while True:
            try:
                if self.options.exactly_once and await per_message_broker(producer.api, mq):
                    extra.update({PROPERTY_TRANSACTION_PREPARED: "true",
                                  PROPERTY_PRODUCER_GROUP: self.options.producer_group, PROPERTY_SINK_BATCH: batch_id})
                    keys = t.column("uniq_key").combine_chunks()
                    return await producer.send_half_messages(
                        mq, t.column("body").combine_chunks().to_pylist(), properties_text(props, n, extra).to_pylist(),
                        tuple(keys.to_pylist()), min(deadline, loop.time() + MOVE_AFTER_S) if others else deadline)
                if self.options.exactly_once:
                    extra.update({PROPERTY_TRANSACTION_PREPARED: "true",
                                  PROPERTY_PRODUCER_GROUP: self.options.producer_group,
                                  PROPERTY_TRANSACTION_BATCH: txn, PROPERTY_SINK_BATCH: batch_id})
                if body is None:
                    body = encode_message_batch(t.column("body").combine_chunks(), properties_text(props, n, extra))
                if self.options.exactly_once:
                    return await producer.send_halves(mq, body, n, txn)
                await producer.api.send(mq, {
                    "producerGroup": self.options.producer_group, "topic": mq.topic, "defaultTopic": "TBW102",
                    "defaultTopicQueueNums": DEFAULT_TOPIC_QUEUE_NUMS, "queueId": mq.queue_id, "sysFlag": 0,
                    "bornTimestamp": 0, "flag": 0, "reconsumeTimes": 0, "unitMode": False, "batch": True}, body, True)
                return None
            except MQClientError as e:
                if e.not_stored_ok and not self.options.exactly_once:
                    # in the master's commit log, not yet on its slave or disk: sent, as the Java producer's
                    # send returns such a SendResult (retryAnotherBrokerWhenNotStoreOK=false)
                    log.warning("%s: stored on the master only (%s)", what, e)
                    return None
                if isinstance(e, BrokerBusyError) and loop.time() < deadline:
                    # the broker's flow control (a request waited too long in its send queue, or the queue is
                    # full; SERVICE_NOT_AVAILABLE: a store not writable now): a plain send refused so stored
                    # nothing, as a Java producer sends it again; halves stored before their deadline are left to
                    # the broker's checks, as a failed send's
                    busy = busy or RetryLog(what)
                    busy.failed(e, "sending them again")
                    to(mq)
                    await asyncio.sleep(0.5)
                    continue
                again = e.unreachable or e.not_stored_ok  # halves not stored OK were rolled back: send again
                if again and others:
                    _AVOID[mq.broker_name] = loop.time() + AVOID_S
                    moved = _other_queue(mq, others, loop.time())
                    if moved is not None:
                        log.warning("%s: %s; sending them to %s/%s instead", what, e, moved.broker_name,
                                    moved.queue_id)
                        mq = moved
                        to(mq)
                        deadline = loop.time() + self.options.broker_timeout_ms / 1000  # bounded: each move avoids one
                        continue
                if not again or loop.time() >= deadline:
                    if e.unreachable:
                        raise BrokerUnavailableError(f"{what}: no answer within brokerTimeoutMs="
                                                     f"{self.options.broker_timeout_ms} ({e})") from None
                    if e.not_stored_ok:
                        raise BrokerUnavailableError(f"{what}: not stored as the broker's role asks within "
                                                     f"brokerTimeoutMs={self.options.broker_timeout_ms} (a SYNC_MASTER "
                                                     f"without its slave answers SLAVE_NOT_AVAILABLE; {e})") from None
                    raise WriteRefused(e, what) from None  # the caller names the option of an ACL refusal
                log.warning("%s: %s; retrying", what, e)
                await asyncio.sleep(0.5)


async def _end_all(producer: AsyncTransactionProducer, halves: list[HalfBatch], state: TransactionState,
                   timeout_ms: int) -> list[EndOutcome]:
    """END_TRANSACTION for every half batch, several in flight, each retried while its broker cannot be reached
    (up to timeout_ms)."""
    gate = asyncio.Semaphore(ENDS_IN_FLIGHT)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_ms / 1000

    async def one(h: HalfBatch) -> EndOutcome:
        async with gate:
            while True:
                try:
                    return await producer.end(h, state)
                except MQClientError as e:
                    if not e.unreachable:
                        raise
                    if loop.time() >= deadline:
                        raise BrokerUnavailableError(
                            f"{state.name} of transaction {h.transaction_id} (halves [{h.offset}, +{h.count}) of "
                            f"{h.topic}/{h.broker_name}/{h.queue_id}): no answer within {timeout_ms} ms ({e}); "
                            f"restart the query once the broker is back: the decision is in the checkpoint") from None
                    await asyncio.sleep(0.5)
    return list(await asyncio.gather(*(one(h) for h in halves)))


async def _roll_back(producer: AsyncTransactionProducer, sent: list, timeout_ms: int) -> None:
    """Roll back half batches and half messages (a failed task attempt's, an aborted batch's)."""
    batches = [h for h in sent if isinstance(h, HalfBatch)]
    if batches:
        await _end_all(producer, batches, TransactionState.ROLLBACK_MESSAGE, timeout_ms)
    await roll_back_messages(producer, [h for h in sent if isinstance(h, MessageHalves)])


def _sent(messages) -> tuple[dict[int, list[HalfBatch]], dict[int, list[MessageHalves]]]:
    """The tasks' commit messages read once: {partition: its half batches}, {partition: its half messages}."""
    batches: dict[int, list[HalfBatch]] = {}
    singles: dict[int, list[MessageHalves]] = {}
    for m in messages:
        if m is not None:
            batches.setdefault(m.partition, []).extend(HalfBatch.from_json(h) for h in m.halves)
            singles.setdefault(m.partition, []).extend(MessageHalves.from_json(h) for h in m.messages)
    return batches, singles


# -- the driver's side: commit, abort, and the checker --------------------------------------------------------------

def _checker(options: WriteOptions, decisions: Optional[TransactionLog], topics: list[str]
             ) -> AsyncTransactionProducer:
    """The driver-side producer: it sends the ENDs and, registered with the brokers by heartbeat, answers their
    check-backs (from the checkpoint's decisions, for a stream) for as long as its process lives (Spark runs each
    commit in a Python worker that may be reused for the next one)."""
    p = _producer(options, decisions)
    try:
        run_blocking(p.heartbeat, topics)
    except MQClientError as e:
        log.info("heartbeat of %s failed: %s", options.producer_group, e)
    return p


def _step(tlog: TransactionLog, point: str, batch_id: int) -> None:
    for observer in COMMIT_STEPS:
        observer(tlog.dir, point, batch_id)


def commit_halves(options: WriteOptions, messages, batch_id: int) -> str:
    """Commit microbatch batch_id's halves once: the decision first (in the checkpoint), then END_TRANSACTION
    COMMIT for each. A batch decided before (a restarted query replaying it) commits the decided halves again
    (half messages that a killed commit ended already are found in their queues and left alone) and rolls back the
    new ones; a partition whose decided half batches the brokers rolled back meanwhile (no answer to their checks
    within their check window) commits its new ones instead."""
    tlog = TransactionLog(options.checkpoint or "")
    new, new_messages = _sent(messages)
    prior = tlog.read(batch_id)
    topics = sorted({h.topic for hs in new.values() for h in hs}
                    | {h.topic for hs in new_messages.values() for h in hs})
    if not topics and prior is not None:
        topics = sorted({h.topic for hs in prior.halves.values() for h in hs}
                        | {h.topic for hs in prior.messages.values() for h in hs})
    producer = _checker(options, tlog, topics)
    if prior is None:
        _step(tlog, "before_decision", batch_id)
        sent = [h for hs in new_messages.values() for h in hs]
        decision = Decision(new, new_messages,
                            run_blocking(queue_ends, producer.api, sent, options.broker_timeout_ms) if sent else {})
        tlog.write(batch_id, decision)
        todo: list[HalfBatch] = [h for hs in new.values() for h in hs]
        drop: list = []
        outcome = "committed"
    else:
        decision = prior
        again = [h for hs in prior.halves.values() for h in hs]
        results = run_blocking(_end_all, producer, again, TransactionState.COMMIT_MESSAGE, options.broker_timeout_ms)
        by_half = dict(zip(again, results))
        todo, drop, replaced = [], [], dict(prior.halves)
        for p, hs in new.items():
            old = [by_half[h] for h in prior.halves.get(p, [])]
            if old and all(r is EndOutcome.OPPOSITE for r in old):
                todo.extend(hs)  # the broker rolled the decided halves back: this attempt's rows replace them
                replaced[p] = hs
            elif all(r is EndOutcome.DONE for r in old):
                drop.extend(hs)
            else:
                raise RuntimeError(f"sink {options.sink_id} batch {batch_id} partition {p}: of its decided halves "
                                   f"some were committed and some rolled back by the brokers; not committing "
                                   f"again (the partition's rows may be partly in the topic)")
        drop.extend(h for hs in new_messages.values() for h in hs)
        if todo:
            decision = Decision(replaced, prior.messages, prior.queue_ends)
            tlog.write(batch_id, decision)
        outcome = f"replayed: decided halves committed again, {len(drop)} new half batches rolled back" + \
            (f", {len(todo)} replacing rolled-back ones" if todo else "")
    if drop:
        run_blocking(_roll_back, producer, drop, options.broker_timeout_ms)
    decided_messages = [h for hs in decision.messages.values() for h in hs]
    half = len(todo) // 2
    results = run_blocking(_end_all, producer, todo[:half], TransactionState.COMMIT_MESSAGE, options.broker_timeout_ms)
    first = decided_messages[:len(decided_messages) // 2]
    run_blocking(commit_messages, producer, first, decision.queue_ends, options.broker_timeout_ms, prior is not None)
    _step(tlog, "inside_commit", batch_id)
    results += run_blocking(_end_all, producer, todo[half:], TransactionState.COMMIT_MESSAGE, options.broker_timeout_ms)
    run_blocking(commit_messages, producer, decided_messages[len(first):], decision.queue_ends,
                 options.broker_timeout_ms, prior is not None)
    _step(tlog, "after_commit", batch_id)
    lost = [h for h, r in zip(todo, results) if r is EndOutcome.OPPOSITE]
    if lost:
        raise RuntimeError(f"sink {options.sink_id} batch {batch_id}: the brokers rolled back {len(lost)} half "
                           f"batches before the commit reached them (first: {lost[0].topic}/{lost[0].broker_name} "
                           f"[{lost[0].offset}, +{lost[0].count})): the batch took longer than their check window "
                           f"(transactionTimeOut + transactionCheckMax x transactionCheckInterval); restart the query "
                           f"to send it again")
    tlog.prune()
    return outcome


def abort_halves(options: WriteOptions, messages) -> None:
    batches, singles = _sent(messages)
    halves: list = [h for hs in batches.values() for h in hs]
    halves += [h for hs in singles.values() for h in hs]
    if halves:
        producer = _producer(options)
        try:
            run_blocking(_roll_back, producer, halves, options.broker_timeout_ms)
        except (MQClientError, BrokerUnavailableError) as e:
            log.warning("abort: rolling back failed (%s); the brokers roll back unanswered halves themselves", e)


def commit_write(options: WriteOptions, messages) -> None:
    """A batch write's halves committed together (it keeps no decisions: the job's commit is its own)."""
    batches, singles = _sent(messages)
    halves = [h for hs in batches.values() for h in hs]
    sent = [h for hs in singles.values() for h in hs]
    producer = _checker(options, None, sorted({h.topic for h in halves} | {h.topic for h in sent}))
    if sent:
        ends = run_blocking(queue_ends, producer.api, sent, options.broker_timeout_ms)
        run_blocking(commit_messages, producer, sent, ends, options.broker_timeout_ms, False)
    results = run_blocking(_end_all, producer, halves, TransactionState.COMMIT_MESSAGE,
                           options.broker_timeout_ms)
    if any(r is EndOutcome.OPPOSITE for r in results):
        raise RuntimeError("the brokers rolled back part of this write before its commit (it took longer than "
                           "their check window); write it again")

