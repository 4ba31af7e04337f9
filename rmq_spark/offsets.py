"""Queues and offsets: which queues a subscription names, where a query starts and ends, and the offset dict
Spark checkpoints: {"topic": {"queueId": nextOffset}}."""
from __future__ import annotations

import logging
from typing import Dict, Iterable, Optional

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
    queue_key,
)
from .read_policy import POLICY

log = logging.getLogger(__name__)

Positions = Dict[Queue, int]


def to_offset_dict(positions: Positions) -> dict:
    out: dict = {}
    for (topic, qid), off in sorted(positions.items()):
        out.setdefault(topic, {})[str(qid)] = int(off)
    return out


def from_offset_dict(offsets: Optional[dict]) -> Positions:
    return {(topic, queue_key(qid)): int(off) for topic, queues in (offsets or {}).items()
            for qid, off in queues.items()}


def subscribed_queues(store: LogReads, sub: Subscription) -> list[Queue]:
    """The queues the subscription names right now (a pattern picks up topics created since the last call)."""
    return sub.queues(store)


def check_against_store(opts: SourceOptions, store: LogReads) -> None:
    """Everything that needs the store to check: topics and queue ids exist, offsets name subscribed queues."""
    sub = opts.subscription
    _check_queue_keys(opts, store.names_brokers)
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
            ids = {getattr(q, "queue_id", q) for q in have}
            for q in qs:
                if q not in ids:
                    raise RmqOptionError(sub.option, f"topic {t!r} has queues {_describe_queues(have)}; queue {q} "
                                                     f"does not exist")
    subscribed = None if isinstance(sub, SubscribePattern) else set(subscribed_queues(store, sub))
    by_time = opts.starting_offsets_by_timestamp
    end_by_time = opts.ending_offsets_by_timestamp
    for opt, spec in ((K.STARTING_OFFSETS, opts.starting_offsets),
                      (K.STARTING_OFFSETS_BY_TIMESTAMP, None if by_time is None else SpecificOffsets(by_time)),
                      (K.ENDING_OFFSETS, opts.ending_offsets),
                      (K.ENDING_OFFSETS_BY_TIMESTAMP, None if end_by_time is None else SpecificOffsets(end_by_time))):
        if not isinstance(spec, SpecificOffsets):
            continue
        for t, qs in spec.offsets.items():
            if t not in topics:
                raise RmqOptionError(opt, f"unknown topic {t!r}")
            if isinstance(sub, SubscribePattern) and not sub.matches(t):
                raise RmqOptionError(opt, f"topic {t!r} does not match subscribePattern {sub.pattern!r}")
            have = store.queues(t)
            for q in qs:
                if q not in have:
                    raise RmqOptionError(opt, f"topic {t!r} has queues {_describe_queues(have)}; queue {q} does "
                                              f"not exist")
                if subscribed is not None and (t, q) not in subscribed:
                    raise RmqOptionError(opt, f"{t!r} queue {q} is not among the subscribed queues "
                                              f"({sub.describe()})")


def _describe_queues(have: list) -> str:
    if have and not isinstance(have[0], int):
        return ", ".join(map(str, have))
    return f"0..{len(have) - 1}"


def _check_queue_keys(opts: SourceOptions, wire: bool) -> None:
    """Offsets JSON names a broker's queue as brokerName:queueId over the wire, a plain queue id otherwise."""
    given = [(K.STARTING_OFFSETS, opts.starting_offsets), (K.ENDING_OFFSETS, opts.ending_offsets),
             (K.STARTING_OFFSETS_BY_TIMESTAMP, SpecificOffsets(opts.starting_offsets_by_timestamp or {})),
             (K.ENDING_OFFSETS_BY_TIMESTAMP, SpecificOffsets(opts.ending_offsets_by_timestamp or {}))]
    for opt, spec in given:
        if not isinstance(spec, SpecificOffsets):
            continue
        for t, qs in spec.offsets.items():
            for q in qs:
                if wire and isinstance(q, int):
                    raise RmqOptionError(opt, f"topic {t!r}: over the wire, name a queue as brokerName:queueId "
                                              f"(e.g. \"broker-a:{q}\"), not {q}")
                if not wire and not isinstance(q, int):
                    raise RmqOptionError(opt, f"topic {t!r}: {q} names a broker's queue; that needs namesrvAddr "
                                              f"(a store directory's queues are plain ids)")


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
        text = (f"topic {t!r} queue {q}: offset {off} is past the end of the queue, which holds offsets "
                f"{store.min_offset(t, q)}..{mx - 1} (the next message gets {mx})")
        if not streaming:
            raise RmqOptionError(option, text)
        report_data_loss(text, fail_on_data_loss, "start at the end instead", f"starting at {mx}",
                         error=lambda message: RmqOptionError(option, message))
        out[(t, q)] = mx
    return out


def _starting_positions(opts: SourceOptions, store: LogReads, queues: list, default: StartingOffsets) -> Positions:
    if opts.starting_timestamp is not None or opts.starting_offsets_by_timestamp is not None:
        out = {}
        for t, q in queues:
            if opts.starting_timestamp is not None:
                ts = opts.starting_timestamp
            else:
                ts = (opts.starting_offsets_by_timestamp or {}).get(t, {}).get(q)
            out[(t, q)] = store.min_offset(t, q) if ts is None else store.offset_for_timestamp(t, q, ts)
        return out
    how = opts.starting_offsets if opts.starting_offsets is not None else default
    if isinstance(how, GroupOffsets):
        committed = store.committed_offsets(queues)
        return {q: store.min_offset(*q) if committed[q] is None or committed[q] < 0 else int(committed[q])
                for q in queues}
    out = {}
    for t, q in queues:
        if isinstance(how, SpecificOffsets):
            off = how.get(t, q, EARLIEST)
        else:
            off = EARLIEST if isinstance(how, EarliestOffsets) else LATEST
        out[(t, q)] = resolve(store, t, q, off)
    return out


def resolve(store: LogReads, topic: str, qid: int, off: int) -> int:
    if off == EARLIEST:
        return store.min_offset(topic, qid)
    if off == LATEST:
        return store.max_offset(topic, qid)
    return off


def ending_positions(store: LogReads, opts: SourceOptions, queues: Iterable[Queue],
                     starts: Optional[Positions] = None) -> Positions:
    """endingOffsets of a batch read: an explicit offset past the queue's end, or below where the read starts,
    is an error naming the queue."""
    how = opts.ending_offsets
    out = {}
    by_time = opts.ending_timestamp is not None or opts.ending_offsets_by_timestamp is not None
    for t, q in queues:
        if by_time:  # Kafka's rule: before the first message at or after the time; the queue's end if none
            ts = opts.ending_timestamp if opts.ending_timestamp is not None else \
                (opts.ending_offsets_by_timestamp or {}).get(t, {}).get(q)
            out[(t, q)] = store.max_offset(t, q) if ts is None else store.offset_for_timestamp(t, q, ts)
            start = None if starts is None else starts.get((t, q))
            if start is not None and out[(t, q)] < start:
                out[(t, q)] = start  # nothing to read in this queue: it ends before the read starts
            continue
        off = how.get(t, q, LATEST) if isinstance(how, SpecificOffsets) else LATEST
        out[(t, q)] = resolve(store, t, q, off)
        if off in (LATEST, EARLIEST):
            continue
        start = None if starts is None else starts.get((t, q))
        if start is not None and out[(t, q)] < start:
            raise RmqOptionError(K.ENDING_OFFSETS, f"topic {t!r} queue {q}: ending offset {off} is below the "
                                                  f"starting offset {start}")
    return check_past_end(store, out, K.ENDING_OFFSETS, streaming=False, fail_on_data_loss=True)


def check_data_loss(topic: str, qid: int, wanted: int, available: int, fail: bool) -> None:
    """Kafka's failOnDataLoss: an offset below the queue's minimum means retention deleted unread messages."""
    log_reads.check_data_loss(topic, qid, wanted, available, fail, POLICY)
