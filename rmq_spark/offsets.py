"""Queues and offsets: which queues a subscription names, where a query starts and ends, and the offset dict
Spark checkpoints: {"topic": {queue's name: nextOffset}}, each queue named as its place names it (LogReads.queue_name:
"3" in a store directory, "broker-a:3" on brokers)."""
from __future__ import annotations

import logging
from typing import Dict, Iterable, Optional

from rmq_log import QueueKey
from rmq_log import reads as log_reads
from rmq_log.reads import LogReads

from . import option_keys as K
from .data_loss import report_data_loss
from .errors import RmqOptionError
from .options import (
    EARLIEST,
    LATEST,
    Assign,
    EarliestOffsets,
    GroupOffsets,
    Queue,
    SourceOptions,
    SpecificOffsets,
    StartingOffsets,
    Subscribe,
    SubscribePattern,
    Subscription,
)
from .read_policy import POLICY

log = logging.getLogger(__name__)

Positions = Dict[Queue, int]


def to_offset_dict(store: LogReads, positions: Positions) -> dict:
    out: dict = {}
    for (topic, q), off in sorted(positions.items()):
        out.setdefault(topic, {})[store.queue_name(q)] = int(off)
    return out


def from_offset_dict(store: LogReads, offsets: Optional[dict]) -> Positions:
    return {(topic, store.parse_queue(name)): int(off) for topic, queues in (offsets or {}).items()
            for name, off in queues.items()}


def subscribed_queues(store: LogReads, sub: Subscription) -> list[Queue]:
    """The queues the subscription names right now (a pattern picks up topics created since the last call)."""
    return sub.queues(store)


def check_against_store(opts: SourceOptions, store: LogReads) -> None:
    """Everything that needs the store to check: topics and queue ids exist, offsets name subscribed queues."""
    sub = opts.subscription
    given = _offset_options(opts, store)
    topics = store.topics()
    if isinstance(sub, Subscribe):
        for t in sub.topics:
            if t not in topics:
                raise RmqOptionError(sub.option, f"unknown topic {t!r}; {store.describe()} has: "
                                                 f"{', '.join(topics) or 'no topics'}")
    elif isinstance(sub, Assign):
        for t, qs in sub.assign:
            if t not in topics:
                raise RmqOptionError(sub.option, f"unknown topic {t!r}; {store.describe()} has: "
                                                 f"{', '.join(topics) or 'no topics'}")
            have = store.queues(t)
            ids = {q.queue_id for q in have}
            for qid in qs:
                if qid not in ids:
                    raise RmqOptionError(sub.option, f"topic {t!r} has queues {store.describe_queues(have)}; "
                                                     f"queue {qid} does not exist")
    subscribed = None if isinstance(sub, SubscribePattern) else set(subscribed_queues(store, sub))
    for opt in (K.STARTING_OFFSETS, K.STARTING_OFFSETS_BY_TIMESTAMP, K.ENDING_OFFSETS, K.ENDING_OFFSETS_BY_TIMESTAMP):
        for t, qs in given.get(opt, {}).items():
            if t not in topics:
                raise RmqOptionError(opt, f"unknown topic {t!r}")
            if isinstance(sub, SubscribePattern) and not sub.matches(t):
                raise RmqOptionError(opt, f"topic {t!r} does not match subscribePattern {sub.pattern!r}")
            have = store.queues(t)
            for q in qs:
                if q not in have:
                    raise RmqOptionError(opt, f"topic {t!r} has queues {store.describe_queues(have)}; queue "
                                              f"{store.queue_name(q)} does not exist")
                if subscribed is not None and (t, q) not in subscribed:
                    raise RmqOptionError(opt, f"{t!r} queue {store.queue_name(q)} is not among the subscribed "
                                              f"queues ({sub.describe()})")


def _offset_options(opts: SourceOptions, store: LogReads) -> dict[str, dict]:
    """The per-queue offset and timestamp options given, {option: {topic: {queue: value}}}, their queues as the
    place's: each names a queue the way its place does, else that option's error says how."""
    given = {K.STARTING_OFFSETS: opts.starting_offsets, K.ENDING_OFFSETS: opts.ending_offsets,
             K.STARTING_OFFSETS_BY_TIMESTAMP: opts.starting_offsets_by_timestamp,
             K.ENDING_OFFSETS_BY_TIMESTAMP: opts.ending_offsets_by_timestamp}
    return {opt: _in_place_queues(store, opt, value) for opt, value in given.items()
            if isinstance(value, (SpecificOffsets, dict))}


def _in_place_queues(store: LogReads, option: str, spec) -> dict[str, dict[QueueKey, int]]:
    """An offsets option's {topic: {queue: value}} with the place's queues. Options are parsed before the place is
    known: they keep each queue's name ("3" or "broker-a:3") for the place to parse."""
    offsets = spec.offsets if isinstance(spec, SpecificOffsets) else spec
    out: dict[str, dict[QueueKey, int]] = {}
    for t, qs in offsets.items():
        inner = out[t] = {}
        for q, value in qs.items():
            try:
                inner[store.parse_queue(q)] = value
            except ValueError as e:
                raise RmqOptionError(option, f"topic {t!r}: {e}") from None
    return out


def starting_positions(opts: SourceOptions, store: LogReads, queues: Iterable[Queue], default: StartingOffsets,
                       streaming: bool) -> Positions:
    """Where a fresh query starts on each queue. Timestamps take precedence, then startingOffsets (else
    `default`); queues an explicit JSON does not name start at earliest. A start past a queue's end is an
    error for batch reads, and for streams unless failOnDataLoss=false, which starts at the end (Kafka's
    rule)."""
    positions = _starting_positions(opts, store, list(queues), default)
    option = "startingOffsets=group (committed offset)" if isinstance(opts.starting_offsets, GroupOffsets) \
        else K.STARTING_OFFSETS
    return check_past_end(store, positions, option, streaming=streaming, fail_on_data_loss=opts.fail_on_data_loss)


def check_past_end(store: LogReads, positions: Positions, option: str, *, streaming: bool,
                   fail_on_data_loss: bool) -> Positions:
    """positions with every offset past its queue's end refused (batch reads; streams with failOnDataLoss)
    or moved to the end with a warning (streams with failOnDataLoss=false)."""
    out = dict(positions)
    for (t, q), off in positions.items():
        mx = store.max_offset(t, q)
        if off <= mx:
            continue
        text = (f"topic {t!r} queue {store.queue_name(q)}: offset {off} is past the end of the queue, which holds "
                f"offsets {store.min_offset(t, q)}..{mx - 1} (the next message gets {mx})")
        if not streaming:
            raise RmqOptionError(option, text)
        report_data_loss(text, fail_on_data_loss, "start at the end instead", f"starting at {mx}",
                         error=lambda message: RmqOptionError(option, message))
        out[(t, q)] = mx
    return out


def _starting_positions(opts: SourceOptions, store: LogReads, queues: list, default: StartingOffsets) -> Positions:
    if opts.starting_timestamp is not None or opts.starting_offsets_by_timestamp is not None:
        by_queue = _in_place_queues(store, K.STARTING_OFFSETS_BY_TIMESTAMP, opts.starting_offsets_by_timestamp or {})
        out = {}
        for t, q in queues:
            ts = opts.starting_timestamp if opts.starting_timestamp is not None else by_queue.get(t, {}).get(q)
            out[(t, q)] = store.min_offset(t, q) if ts is None else store.offset_for_timestamp(t, q, ts)
        return out
    how = opts.starting_offsets if opts.starting_offsets is not None else default
    if isinstance(how, GroupOffsets):
        committed = store.committed_offsets(queues)
        return {q: store.min_offset(*q) if committed[q] is None or committed[q] < 0 else int(committed[q])
                for q in queues}
    given = _in_place_queues(store, K.STARTING_OFFSETS, how) if isinstance(how, SpecificOffsets) else None
    out = {}
    for t, q in queues:
        if given is not None:
            off = given.get(t, {}).get(q, EARLIEST)
        else:
            off = EARLIEST if isinstance(how, EarliestOffsets) else LATEST
        out[(t, q)] = resolve(store, t, q, off)
    return out


def resolve(store: LogReads, topic: str, queue: QueueKey, off: int) -> int:
    if off == EARLIEST:
        return store.min_offset(topic, queue)
    if off == LATEST:
        return store.max_offset(topic, queue)
    return off


def ending_positions(store: LogReads, opts: SourceOptions, queues: Iterable[Queue],
                     starts: Optional[Positions] = None) -> Positions:
    """endingOffsets of a batch read: an explicit offset past the queue's end, or below where the read starts,
    is an error naming the queue."""
    how = opts.ending_offsets
    given = _in_place_queues(store, K.ENDING_OFFSETS, how) if isinstance(how, SpecificOffsets) else {}
    by_queue = _in_place_queues(store, K.ENDING_OFFSETS_BY_TIMESTAMP, opts.ending_offsets_by_timestamp or {})
    out = {}
    by_time = opts.ending_timestamp is not None or opts.ending_offsets_by_timestamp is not None
    for t, q in queues:
        if by_time:  # Kafka's rule: before the first message at or after the time; the queue's end if none
            ts = opts.ending_timestamp if opts.ending_timestamp is not None else by_queue.get(t, {}).get(q)
            out[(t, q)] = store.max_offset(t, q) if ts is None else store.offset_for_timestamp(t, q, ts)
            start = None if starts is None else starts.get((t, q))
            if start is not None and out[(t, q)] < start:
                out[(t, q)] = start  # nothing to read in this queue: it ends before the read starts
            continue
        off = given.get(t, {}).get(q, LATEST)
        out[(t, q)] = resolve(store, t, q, off)
        if off in (LATEST, EARLIEST):
            continue
        start = None if starts is None else starts.get((t, q))
        if start is not None and out[(t, q)] < start:
            raise RmqOptionError(K.ENDING_OFFSETS, f"topic {t!r} queue {store.queue_name(q)}: ending offset {off} "
                                                  f"is below the starting offset {start}")
    return check_past_end(store, out, K.ENDING_OFFSETS, streaming=False, fail_on_data_loss=True)


def check_data_loss(store: LogReads, topic: str, queue: QueueKey, wanted: int, available: int, fail: bool) -> None:
    """Kafka's failOnDataLoss: an offset below the queue's minimum means retention deleted unread messages."""
    log_reads.check_data_loss(topic, store.queue_name(queue), wanted, available, fail, POLICY)
