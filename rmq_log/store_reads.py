"""StoreReads: LogReads on a store directory, opened read-only (store.MessageStore), the group's offsets in its
config/consumerOffset.json (store.OffsetStore); StoreRange, one queue's offset range, and StoreWindow, the
pieces of a topic's queue ranges that lie in one stretch of the log, read together in log order: each read by an
executor.

The readers' queues are QueueKeys of STORE_BROKER_NAME, named by their queue id alone ("3"); the store below knows
queue ids, so each answer turns one into the other.

read() runs in an executor's Python worker on a separately unpickled range, so it carries all it needs: store
path, topic, queue, [start, end), the filter (a MessageFilter pickles as its expression tree), the data-loss
policy and the columns the query selected (the store's scan builds only those).
"""
from __future__ import annotations

import json
import logging
import os
import time
from typing import Any, Iterator, Optional

import numpy as np
import pyarrow as pa

from store import MessageStore, MissingFileError, OffsetStore, ReadOffsetType

from .queue_key import STORE_BROKER_NAME, QueueKey, split_queue_name
from .reads import LogReads, RangeReader, RangeRuns, ReadPolicy, ReadSettings, check_data_loss

log = logging.getLogger(__name__)

SCAN_BATCH_ROWS = 65536

_STORES: dict = {}  # one read-only store per path per worker process (Python workers are reused)


def open_store(path: str) -> MessageStore:
    """Readers never write the store: read-only needs no lock and no recovery, and is safe on a live broker's
    directory. Offsets go through the OffsetStore, which takes its own file lock."""
    return MessageStore(path, read_only=True)


class StoreReads(LogReads):
    """A store directory's answers, from one read-only MessageStore: its queues are exactly those its files hold."""

    def __init__(self, path: str, settings: ReadSettings):
        self.path, self.settings = path, settings
        self.store = open_store(path)

    def close(self) -> None:
        self.store.close()

    def describe(self) -> str:
        return f"the store at {self.path}"

    def topics(self) -> list[str]:
        return self.store.topics()

    def queue_name(self, queue: QueueKey) -> str:
        return str(queue.queue_id)

    def parse_queue(self, name: str) -> QueueKey:
        broker, queue_id = split_queue_name(name)
        if broker is not None:
            raise ValueError(f"{name} names a broker's queue; that needs namesrvAddr (a store directory's queues "
                             f"are plain ids)")
        return QueueKey(STORE_BROKER_NAME, queue_id)

    def describe_queues(self, queues: list) -> str:
        return f"0..{len(queues) - 1}"  # a store's queue ids are 0 up to the topic's queue count

    def queues(self, topic: str) -> list[QueueKey]:
        return [QueueKey(STORE_BROKER_NAME, qid) for qid in self.store.queues(topic)]

    def assigned(self, topic: str, queue_ids) -> list[QueueKey]:
        return [QueueKey(STORE_BROKER_NAME, qid) for qid in queue_ids]

    def min_offset(self, topic: str, queue: QueueKey) -> int:
        return self.store.min_offset(topic, queue.queue_id)

    def max_offset(self, topic: str, queue: QueueKey) -> int:
        return self.store.max_offset(topic, queue.queue_id)

    def queue_bounds(self, queues) -> dict:
        bounds = self.store.queue_bounds([(t, q.queue_id) for t, q in queues])
        return {(t, q): bounds[(t, q.queue_id)] for t, q in queues}

    def bounds_tracker(self, queues) -> Any:
        return self.store.bounds_tracker([(t, q.queue_id) for t, q in queues])  # its arrays keep the list's order

    def topics_version(self) -> int:
        return self.store.topics_version()

    def keep_checkpointed(self, positions: dict) -> bool:
        return False  # every queue of the directory is listed; one that is gone is gone

    def offset_for_timestamp(self, topic: str, queue: QueueKey, timestamp_ms: int) -> int:
        return self.store.offset_for_timestamp(topic, queue.queue_id, timestamp_ms)

    def record_sizes(self, topic: str, queue: QueueKey, start: int, end: int) -> np.ndarray:
        return self.store.record_sizes(topic, queue.queue_id, start, end)

    def committed_offsets(self, queues: list) -> dict:
        offset_store = OffsetStore(self.path, self.settings.group)
        offset_store.load()
        return {(t, q): offset_store.read_offset((t, q.queue_id), ReadOffsetType.READ_FROM_STORE) for t, q in queues}

    def committer(self) -> "OffsetCommitter":
        return OffsetCommitter(self.path, self.settings.group, self.settings.policy)

    def index_runs(self, ranges: list, key: Optional[str], uniq_key: Optional[str],
                   msg_ids: Optional[frozenset]) -> Optional[list]:
        from .index_runs import lookup_runs
        runs = lookup_runs(self.store, [(t, q.queue_id, s, e) for t, q, s, e in ranges], key, uniq_key, msg_ids)
        return None if runs is None else [(t, QueueKey(STORE_BROKER_NAME, qid), s, e) for t, qid, s, e in runs]

    def range_readers(self, ranges: list, scan_filter, client_filter, residual, selection,
                      fail_on_data_loss: bool) -> list[RangeReader]:
        s = self.settings
        return [StoreRange(self.path, t, q.queue_id, st, e, selection, s.policy, scan_filter, fail_on_data_loss,
                           s.metrics_path, residual) for t, q, st, e in ranges]

    def log_windows(self, readers: list[RangeReader], min_offsets: int) -> list[RangeReader]:
        """A topic's queue ranges of at least min_offsets offsets (two queues or more), cut again into as many
        windows of the log (StoreWindow); the rest as they were. A queue read in pieces (minPartitions) is one
        range again first, then cut with the others."""
        if not self.settings.log_order:
            return readers
        by_topic: dict[str, list[StoreRange]] = {}
        out: list[RangeReader] = []
        for r in readers:
            if type(r) is StoreRange and r.offsets >= max(1, min_offsets):
                by_topic.setdefault(r.topic, []).append(r)
            else:
                out.append(r)
        for topic, rs in by_topic.items():
            spans = _queue_spans(rs)
            if spans is None or len(spans) < 2:
                out.extend(rs)
                continue
            windows = self.store.log_windows(topic, spans, len(rs))
            out.extend(rs[0].piece(*w[0]) if len(w) == 1 else StoreWindow([rs[0].piece(*p) for p in w])
                       for w in windows)
        return out


class OffsetCommitter:
    """Writes a consumer group's offsets into the store's config/consumerOffset.json (RocketMQ's
    ConsumerOffsetManager shape), so `rmq stat --group G` and RocketMQ tools see the query's progress. Positions
    are {(topic, QueueKey): offset}, as the readers hold them."""

    def __init__(self, path: str, group: str, policy: ReadPolicy):
        self.path = path
        self.group = group
        self.policy = policy
        self._offset_store: Optional[OffsetStore] = None
        self.last: Optional[dict] = None

    pending = False  # a local commit never waits for anything

    def commit(self, positions: dict, reads: Optional[StoreReads] = None) -> None:
        """reads: the store of the same path open to check against (the reader's), else one is opened."""
        if positions == self.last:
            return
        moved = {mq: off for mq, off in positions.items() if self.last is None or self.last.get(mq) != off}
        self.commit_moved(moved, reads)
        self.last = dict(positions)

    def commit_moved(self, moved: dict, reads: Optional[StoreReads] = None) -> None:
        """Commit the positions of the queues that moved (the caller knows which: a stream over many queues)."""
        if reads is None:
            with open_store(self.path) as opened:
                self._check(moved, opened)
        else:
            self._check(moved, reads.store)
        if self._offset_store is None:
            self._offset_store = OffsetStore(self.path, self.group)
        for (t, q), off in sorted(moved.items()):  # the queues whose position moved since the last commit
            # Not increase-only: the Spark checkpoint is the truth, and a query restarted from an older
            # checkpoint really is back there.
            self._offset_store.update_offset((t, q.queue_id), int(off), increase_only=False)
        self._offset_store.persist_all()
        if self.last is not None:
            self.last.update(moved)
        log.info("committed offsets of group %s: %d queue(s) moved", self.group, len(moved))

    def _check(self, moved: dict, store: MessageStore) -> None:
        for (t, q), off in moved.items():
            mx = store.max_offset(t, q.queue_id)
            if off > mx:  # never a group offset past what the queue holds: it would skip what comes next
                raise self.policy.lost(f"refusing to commit offset {off} of group {self.group!r} for topic {t!r} "
                                       f"queue {q.queue_id}: the queue ends at {mx}")


class StoreRange(RangeReader):
    """One queue's [start, end) of a store directory."""

    def __init__(self, path: str, topic: str, queue_id: int, start: int, end: int, selection, policy: ReadPolicy,
                 message_filter=None, fail_on_data_loss: bool = True, metrics_path: Optional[str] = None,
                 residual=None):
        self.path = path
        self.topic = topic
        self.queue_id = queue_id
        self.start = start
        self.end = end
        self.message_filter = message_filter
        self.fail_on_data_loss = fail_on_data_loss
        self.metrics_path = metrics_path
        self.residual = residual  # batch reads: pushed position conditions, as one vectorised row mask
        self.selection = selection
        self.policy = policy

    def key(self) -> tuple:
        return self.topic, self.queue_id, self.start, self.end

    def piece(self, queue_id: int, start: int, end: int) -> "StoreRange":
        """A range of the same topic read the same way."""
        return StoreRange(self.path, self.topic, queue_id, start, end, self.selection, self.policy, self.message_filter,
                          self.fail_on_data_loss, self.metrics_path, self.residual)

    def read(self) -> Iterator[pa.RecordBatch]:
        return _read_range(self)

    def __repr__(self) -> str:
        f = "" if self.message_filter is None else f", filter={self.message_filter}"
        return f"StoreRange({self.topic}/{self.queue_id} [{self.start}, {self.end}){f})"


class StoreWindow(RangeRuns):
    """Pieces of several queues of one topic whose records lie in one stretch of the log (MessageStore.log_windows),
    read together in log order (MessageStore.scan_queues): each page of the stretch mapped and decoded once. Its
    ranges are the pieces, StoreRanges alike in all but queue and offsets."""

    def __init__(self, pieces: list[StoreRange]):
        super().__init__(list(pieces))
        self.pieces = pieces

    def read(self) -> Iterator[pa.RecordBatch]:
        return _read_window(self)

    def __repr__(self) -> str:
        return f"StoreWindow({', '.join(repr(r) for r in self.pieces)})"


def _queue_spans(rs: list[StoreRange]) -> Optional[list[tuple[int, int, int]]]:
    """(queue_id, start, end) of each queue the ranges cover, its pieces joined; None if some queue's pieces do
    not meet end to start."""
    spans: dict[int, list[int]] = {}
    for r in sorted(rs, key=lambda r: (r.queue_id, r.start)):
        span = spans.get(r.queue_id)
        if span is None:
            spans[r.queue_id] = [r.start, r.end]
        elif span[1] == r.start:
            span[1] = r.end
        else:
            return None
    return [(q, s, e) for q, (s, e) in spans.items()]


def store_for(path: str):
    """The worker's read-only store for path; a directory deleted and made again at the same path (a new
    inode) gets a fresh one, never mappings of the old files."""
    key: tuple[str, Optional[int]]
    try:
        key = (path, os.stat(path).st_ino)
    except FileNotFoundError:
        key = (path, None)
    store = _STORES.get(key)
    if store is None:
        for old in [k for k in _STORES if k[0] == path]:
            _STORES.pop(old).close()
        store = _STORES[key] = open_store(path)
    return store


def _readable_start(store, p: StoreRange) -> int:
    """Where p's read starts: its start, or the queue's first offset if retention deleted messages before it (the
    loss reported as failOnDataLoss says)."""
    available = store.min_offset(p.topic, p.queue_id)
    if p.start < available:
        check_data_loss(p.topic, p.queue_id, p.start, available, p.fail_on_data_loss, p.policy)
        return available
    return p.start


def _spark_batches(p: StoreRange, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The scan's batches as Spark gets them: the residual's row mask applied (on the store's columns: timestamps
    in ms), empty ones left out."""
    for batch in batches:
        if p.residual is not None:
            batch = batch.filter(p.residual.row_mask(batch))
            if not batch.num_rows:
                continue
        yield p.selection.to_spark_batch(batch)


def _read_range(p: StoreRange) -> Iterator[pa.RecordBatch]:
    store = store_for(p.path)
    start = _readable_start(store, p)
    before = dict(store.stats)
    rows = 0
    t0 = time.monotonic()
    # queue_offset: where to resume after a lost file; the residual's columns: what its mask reads
    needed = ["queue_offset"]
    if p.residual is not None:
        needed += p.residual.columns
    for batch in _spark_batches(p, _scan_past_lost_files(store, p, start, p.selection.scan_columns(*needed))):
        rows += batch.num_rows
        yield batch
    if p.metrics_path:
        _write_metrics(p, store, before, rows, time.monotonic() - t0)


def _read_window(w: StoreWindow) -> Iterator[pa.RecordBatch]:
    first = w.pieces[0]
    store = store_for(first.path)
    pieces = []
    for p in w.pieces:
        start = _readable_start(store, p)
        if start < p.end:
            pieces.append((p.queue_id, start, p.end))
    before = dict(store.stats)
    rows = 0
    t0 = time.monotonic()
    needed = [] if first.residual is None else list(first.residual.columns)
    progress: dict[int, int] = {}
    try:
        for batch in _spark_batches(first, store.scan_queues(first.topic, pieces, first.message_filter,
                                                             SCAN_BATCH_ROWS, first.selection.scan_columns(*needed),
                                                             progress=progress)):
            rows += batch.num_rows
            yield batch
    except MissingFileError:
        # A log file missing inside the window: the rest read queue by queue, which reports the loss as a
        # queue's read does (failOnDataLoss) and skips it otherwise.
        for q, start, end in pieces:
            rest = first.piece(q, progress.get(q, start), end)
            rest.metrics_path = None  # counted in the window's line
            for batch in _read_range(rest):
                rows += batch.num_rows
                yield batch
    if first.metrics_path:
        _write_metrics(first, store, before, rows, time.monotonic() - t0, w.pieces)


def _scan_past_lost_files(store, p: StoreRange, start: int, columns: list) -> Iterator[pa.RecordBatch]:
    """The scan of [start, p.end). A commitlog file missing inside the retained range is data loss: an error
    naming the file with failOnDataLoss (the default), else a warning and the queue's messages in that file
    skipped."""
    pos = start
    while True:
        try:
            for batch in store.scan(p.topic, p.queue_id, pos, p.end, message_filter=p.message_filter,
                                    batch_rows=SCAN_BATCH_ROWS, columns=columns):
                yield batch
                if batch.num_rows:
                    pos = batch.column("queue_offset")[-1].as_py() + 1
            return
        except MissingFileError as e:
            gap: list[int] = []

            def skipping(lost_at: int = e.offset) -> str:
                file_start, file_end = store.commit_log_file_span(lost_at)
                gap_lo = store.queue_offset_at(p.topic, p.queue_id, file_start, pos)
                gap.extend((gap_lo, min(p.end, store.queue_offset_at(p.topic, p.queue_id, file_end, gap_lo))))
                return f"skipping queue offsets {gap[0]}..{gap[1] - 1}"
            p.policy.report_data_loss(f"topic {p.topic!r} queue {p.queue_id}: {e}", p.fail_on_data_loss,
                                      "skip the lost messages", skipping)
            gap_lo, gap_hi = gap
            if gap_lo > pos:  # what lies before the gap, read without touching it
                yield from store.scan(p.topic, p.queue_id, pos, gap_lo, message_filter=p.message_filter,
                                      batch_rows=SCAN_BATCH_ROWS, columns=columns)
            pos = gap_hi


def _write_metrics(p: StoreRange, store, before: dict, rows: int, seconds: float,
                   window: Optional[list[StoreRange]] = None) -> None:
    """Diagnostics (option metricsPath): each partition read appends its scan counters as one JSON line, so
    tests and users can see what the pushdown saved; executors are other processes than the driver. A window of
    the log's line has the lists of its pieces' queue ids, starts and ends."""
    where: dict[str, Any] = {"queue_id": p.queue_id, "start": p.start, "end": p.end} if window is None else \
        {"queue_id": [r.queue_id for r in window], "start": [r.start for r in window], "end": [r.end for r in window]}
    record = {"topic": p.topic, **where, "rows": rows,
              "filter": None if p.message_filter is None else str(p.message_filter), "seconds": round(seconds, 6)}
    record.update({k: store.stats[k] - before.get(k, 0) for k in store.stats})
    assert p.metrics_path is not None
    os.makedirs(p.metrics_path, exist_ok=True)
    line = (json.dumps(record) + "\n").encode("utf-8")
    fd = os.open(os.path.join(p.metrics_path, f"scan-{os.getpid()}.jsonl"), os.O_WRONLY | os.O_CREAT | os.O_APPEND,
                 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)
