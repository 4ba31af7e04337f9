"""Apache RocketMQ's per-message transactions for the wire sink: which brokers take them, and ending half messages
exactly once.

An Apache RocketMQ broker commits a half as often as END_TRANSACTION tells it to (EndTransactionProcessor appends
the message again each time), so a half is ended again only when it is known not to be committed: the commit
records each target queue's end before it sends any END, and a half whose END got no answer (its broker killed,
the connection lost, the driver killed) is looked for by its UNIQ_KEY in its queue past that end before it is
ended again.

A broker's check-back never names the half the sink sent: it copies an unanswered half to the end of the half
queue and asks about the copy (TransactionalMessageServiceImpl.putBackHalfMsgQueue), so the checker rolls back
every copy at once (transaction_log.answer_copy) and the driver alone commits the halves it sent, by their own
offsets (a copy rolled back leaves its half as it was). Ending
the original does not depend on the check window: a broker finds a half by its commit log offset for as long as
its commit log file is kept (fileReservedTime).

The halves carry no CHECK_IMMUNITY_TIME_IN_SECONDS: with it, a 5.x broker refuses a producer's END that comes
after that time (EndTransactionProcessor.rejectCommitOrRollback, "wait check") and leaves the half to its checks,
which would commit a copy at a time the sink does not know; and every check round copies each unanswered half
younger than it, where without it a round stops at the first half younger than transactionTimeOut.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rmq_client import AsyncTransactionProducer, MessageHalves, MessageQueue, MQClientError, TransactionState
from rmq_client.mq_client_api import MQClientAPI
from rmq_client.pull_consumer import AsyncPullConsumer
from rmq_common.message_codec import PROPERTY_UNIQ_KEY
from rmq_common.properties_column import map_lookup

from .broker_wait import BrokerUnavailableError

log = logging.getLogger(__name__)

SCAN_GROUP = "rmq-sink-commit-check"  # the pulls that look for committed halves commit no offset
_APACHE: dict[str, bool] = {}  # broker address -> Apache RocketMQ's (per-message transactions)


async def per_message_broker(api: MQClientAPI, mq: MessageQueue) -> bool:
    """Whether mq's broker takes transactions a message at a time: Apache RocketMQ's brokers refuse a
    transactional batch (MESSAGE_ILLEGAL); `rmq serve` takes both and gets half batches."""
    addr = await api.broker_addr(mq.topic, mq.broker_name)
    apache = _APACHE.get(addr)
    if apache is None:
        apache = _APACHE[addr] = (await api.broker_kind(addr)).is_apache_rocketmq
    return apache


def queue_key(h: MessageHalves) -> str:
    return f"{h.topic}\t{h.broker_name}\t{h.queue_id}"


def _queue(key: str) -> MessageQueue:
    topic, broker, queue_id = key.split("\t")
    return MessageQueue(topic, broker, int(queue_id))


async def queue_ends(api: MQClientAPI, groups: Sequence[MessageHalves], timeout_ms: int) -> dict[str, int]:
    """The end of every target queue of these halves, before any of them is committed: where their committed
    messages can first be. A broker that does not answer is waited for up to timeout_ms."""
    keys = sorted({queue_key(g) for g in groups})
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_ms / 1000
    while True:
        try:
            ends = await asyncio.gather(*(api.max_offset(_queue(k)) for k in keys))
            return dict(zip(keys, ends))
        except MQClientError as e:
            if not e.unreachable or loop.time() >= deadline:
                raise BrokerUnavailableError(f"the ends of the queues the sink committed to: {e}") from None
            await asyncio.sleep(0.5)


async def _committed(api: MQClientAPI, groups: Sequence[MessageHalves], ends: dict) -> list[np.ndarray]:
    """For each group, which of its halves are committed: their UNIQ_KEY in their queue past `ends`."""
    consumer = AsyncPullConsumer(";".join(api.namesrv_addrs), SCAN_GROUP, api=api)
    found: dict[str, pa.Array] = {}
    for key in sorted({queue_key(g) for g in groups}):
        mq = _queue(key)
        wanted = pa.array([k for g in groups if queue_key(g) == key for k in g.uniq_keys], pa.string())
        start, end = int(ends.get(key, 0)), await api.max_offset(mq)
        hits = []
        async for batch in consumer.read_range(mq, start, end, columns=("queue_offset", "properties")):
            keys = map_lookup(batch.column("properties"), PROPERTY_UNIQ_KEY)
            hits.append(keys.filter(pc.fill_null(pc.is_in(keys, value_set=wanted), False)))
        found[key] = pa.concat_arrays(hits) if hits else pa.array([], pa.string())
    return [pc.fill_null(pc.is_in(pa.array(g.uniq_keys, pa.string()), value_set=found[queue_key(g)]),
                         False).to_numpy(zero_copy_only=False) for g in groups]


async def commit_messages(producer: AsyncTransactionProducer, groups: Sequence[MessageHalves], ends: dict,
                          timeout_ms: int, look_first: bool) -> int:
    """Commit every half of `groups` once; `ends`: their queues' ends recorded before any END was sent.
    look_first: an earlier commit may have ended some (a restarted query's replay): those are looked for first.
    Returns how many were committed now. A broker that does not answer is waited for up to timeout_ms."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_ms / 1000
    pending = [g for g in groups if len(g)]
    committed, look = 0, look_first
    while pending:
        if look:
            try:
                found = await _committed(producer.api, pending, ends)
            except MQClientError as e:
                if not e.unreachable:
                    raise
                found = None
            if found is not None:
                pending = [g.take(~f) for g, f in zip(pending, found) if not f.all()]
                look = False
                continue
        else:
            results = await asyncio.gather(*(producer.end_half_messages(g, TransactionState.COMMIT_MESSAGE)
                                             for g in pending), return_exceptions=True)
            rest = []
            for g, r in zip(pending, results):
                if isinstance(r, MQClientError) and not r.unreachable:
                    raise RuntimeError(f"the broker refused to commit half messages of {g.topic}/{g.broker_name}/"
                                       f"{g.queue_id} ({r}); their rows are not in the topic") from r
                if isinstance(r, BaseException) and not isinstance(r, MQClientError):
                    raise r
                if isinstance(r, np.ndarray):
                    committed += int(r.sum())
                    if not r.all():
                        rest.append(g.take(~r))
                else:
                    rest.append(g)
            pending, look = rest, True  # an END without an answer may have been carried out: look before again
            if not pending:
                break
        if loop.time() >= deadline:
            where = ", ".join(sorted({f"{g.topic}/{g.broker_name}" for g in pending}))
            raise BrokerUnavailableError(f"committing {sum(len(g) for g in pending)} half messages ({where}): no "
                                         f"answer within brokerTimeoutMs={timeout_ms}; restart the query once the "
                                         f"broker is back: the decision is in the checkpoint")
        log.info("%d half messages not committed yet (a broker did not answer); trying again",
                 sum(len(g) for g in pending))
        await asyncio.sleep(0.5)
    return committed


async def roll_back_messages(producer: AsyncTransactionProducer, groups: Sequence[MessageHalves]) -> None:
    """Roll back half messages (a failed task attempt's, an aborted batch's); where a broker does not answer, its
    checks end them (the checker answers ROLLBACK for a decided microbatch's copies)."""
    results = await asyncio.gather(*(producer.end_half_messages(g, TransactionState.ROLLBACK_MESSAGE)
                                     for g in groups if len(g)), return_exceptions=True)
    for r in results:
        if isinstance(r, MQClientError):
            log.warning("rolling back half messages failed (%s); the broker's checks will end them", r)
        elif isinstance(r, BaseException):
            raise r
