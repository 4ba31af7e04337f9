"""Queues and offsets: which queues a subscription names, where a query starts and ends, and the offset dict
Spark checkpoints: {"topic": {"queueId": nextOffset}}."""
from __future__ import annotations

import logging
from typing import Dict, Iterable, Optional

from store import OffsetStore

from . import option_keys as K
from .data_loss import report_data_loss
from .errors import DataLossError, RmqOptionError
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
from .read_store import DirectoryStore, ReadStore

log = logging.getLogger(__name__)

Positions = Dict[Queue, int]


def open_store(path: str) -> DirectoryStore:
    """Readers never write the store: read-only needs no lock and no recovery, and is safe on a live broker's
    directory. Offsets go through the OffsetStore, which takes its own file lock."""
    return DirectoryStore(path, read_only=True)


def to_offset_dict(positions: Positions) -> dict:
    out: dict = {}
    for (topic, qid), off in sorted(positions.items()):
        out.setdefault(topic, {})[str(qid)] = int(off)
    return out


def from_offset_dict(offsets: Optional[dict]) -> Positions:
    return {(topic, queue_key(qid)): int(off) for topic, queues in (offsets or {}).items()
            for qid, off in queues.items()}


def subscribed_queues(store: ReadStore, sub: Subscription) -> list[Queue]:
    """The queues the subscription names right now (a pattern picks up topics created since the last call)."""
    return sub.queues(store)


def check_against_store(backend, store) -> None:
    """Everything that needs the store to check: topics and queue ids exist, offsets name subscribed queues.
    backend: the SourceBackend the store came from."""
    opts: SourceOptions = backend.opts
    sub = opts.subscription
    _check_queue_keys(opts, backend.wire)
    topics = store.topics()
    if isinstance(sub, Subscribe):
        for t in sub.topics:
            if t not in topics:
                raise RmqOptionError(sub.option, f"unknown topic {t!r}; {backend.describe()} has: "
                                                 f"{', '.join(topics) or 'no topics'}")
    elif isinstance(sub, Assign):
        for t, qs in sub.assign:
            if t not in topics:
                raise RmqOptionError(sub.option, f"unknown topic {t!r}; {backend.describe()} has: "
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


def starting_positions(backend, store, queues: Iterable[Queue], default: StartingOffsets,
                       streaming: bool) -> Positions:
    """Where a fresh query starts on each queue. Timestamps take precedence, then startingOffsets (else
    `default`); queues an explicit JSON does not name start at earliest. A start past a queue's end is an
    error for batch reads, and for streams unless failOnDataLoss=false, which starts at the end (Kafka's
    rule). backend: the SourceBackend the store came from (it knows the group's committed offsets)."""
    opts: SourceOptions = backend.opts
    positions = _starting_positions(backend, store, list(queues), default)
    option = "startingOffsets=group (committed offset)" if isinstance(opts.starting_offsets, GroupOffsets) \
        else K.STARTING_OFFSETS
    return check_past_end(store, positions, option, streaming=streaming, fail_on_data_loss=opts.fail_on_data_loss)


def check_past_end(store: ReadStore, positions: Positions, option: str, *, streaming: bool,
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


def _starting_positions(backend, store, queues: list, default: StartingOffsets) -> Positions:
    opts: SourceOptions = backend.opts
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
        committed = backend.committed_offsets(store, queues)
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


def resolve(store: ReadStore, topic: str, qid: int, off: int) -> int:
    if off == EARLIEST:
        return store.min_offset(topic, qid)
    if off == LATEST:
        return store.max_offset(topic, qid)
    return off


def ending_positions(store: ReadStore, opts: SourceOptions, queues: Iterable[Queue],
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


class OffsetCommitter:
    """Writes a consumer group's offsets into the store's config/consumerOffset.json (RocketMQ's
    ConsumerOffsetManager shape), so `rmq stat --group G` and RocketMQ tools see the query's progress."""

    def __init__(self, path: str, group: str):
        self.path = path
        self.group = group
        self._offset_store: Optional[OffsetStore] = None
        self.last: Optional[Positions] = None

    pending = False  # a local commit never waits for anything

    def commit(self, positions: Positions, store: Optional[ReadStore] = None) -> None:
        """store: an open store of the same path to check against (the reader's), else one is opened."""
        if positions == self.last:
            return
        moved = {mq: off for mq, off in positions.items() if self.last is None or self.last.get(mq) != off}
        self.commit_moved(moved, store)
        self.last = dict(positions)

    def commit_moved(self, moved: Positions, store: Optional[ReadStore] = None) -> None:
        """Commit the positions of the queues that moved (the caller knows which: a stream over many queues)."""
        if store is None:
            with open_store(self.path) as opened:
                self._check(moved, opened)
        else:
            self._check(moved, store)
        if self._offset_store is None:
            self._offset_store = OffsetStore(self.path, self.group)
        for mq, off in sorted(moved.items()):  # the queues whose position moved since the last commit
            # Not increase-only: the Spark checkpoint is the truth, and a query restarted from an older
            # checkpoint really is back there.
            self._offset_store.update_offset(mq, int(off), increase_only=False)
        self._offset_store.persist_all()
        if self.last is not None:
            self.last.update(moved)
        log.info("committed offsets of group %s: %d queue(s) moved", self.group, len(moved))

    def _check(self, moved: Positions, store: ReadStore) -> None:
        for (t, q), off in moved.items():
            mx = store.max_offset(t, q)
            if off > mx:  # never a group offset past what the queue holds: it would skip what comes next
                raise DataLossError(f"refusing to commit offset {off} of group {self.group!r} for topic {t!r} "
                                    f"queue {q}: the queue ends at {mx}")


def check_data_loss(topic: str, qid: int, wanted: int, available: int, fail: bool) -> None:
    """Kafka's failOnDataLoss: an offset below the queue's minimum means retention deleted unread messages."""
    if wanted >= available:
        return
    text = (f"topic {topic!r} queue {qid}: wanted offset {wanted} but the earliest available is {available}; "
            f"messages {wanted}..{available - 1} were deleted (retention) before they were read")
    report_data_loss(text, fail, "continue from the earliest available offset", f"continuing at {available}")



