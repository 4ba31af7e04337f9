"""One Spark partition = one queue's offset range (or a few small ones read in turn), and the function executors
run to read it.

read() runs in an executor's Python worker on a separately unpickled reader, so the partition carries all it
needs: store path, topic, queue, [start, end), the filter (a MessageFilter pickles as its expression tree), the
data-loss policy and the columns the query selected (the store's scan builds only those).
"""
from __future__ import annotations

import json
import logging
import math
import os
import time
from typing import Iterator, Optional

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from store import MissingFileError

from .data_loss import report_data_loss
from .offsets import check_data_loss, open_store
from .schema import FULL, Selection

log = logging.getLogger(__name__)

SCAN_BATCH_ROWS = 65536

_STORES: dict = {}  # one read-only store per path per worker process (Python workers are reused)


class QueueRange(InputPartition):
    def __init__(self, path: str, topic: str, queue_id: int, start: int, end: int, message_filter=None,
                 fail_on_data_loss: bool = True, metrics_path: Optional[str] = None, residual=None,
                 selection: Selection = FULL):
        super().__init__((topic, queue_id, start, end))
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

    def __repr__(self) -> str:
        f = "" if self.message_filter is None else f", filter={self.message_filter}"
        return f"QueueRange({self.topic}/{self.queue_id} [{self.start}, {self.end}){f})"


def split_ranges(ranges: list, min_partitions: Optional[int]) -> list:
    """Kafka's minPartitions: cut the largest ranges into pieces (each still in queue order) until there are
    at least min_partitions."""
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    total = sum(e - s for _, _, s, e in ranges)
    out = []
    for topic, qid, s, e in ranges:
        pieces = max(1, min(e - s, math.ceil((e - s) * min_partitions / total)))
        step, extra = divmod(e - s, pieces)
        pos = s
        for i in range(pieces):
            n = step + (1 if i < extra else 0)
            out.append((topic, qid, pos, pos + n))
            pos += n
    return out


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


class QueueRuns(InputPartition):
    """Several queue ranges read one after another, each as its own partition would be: the runs an index lookup
    found, or a small microbatch's ranges (pack_small_ranges). Holds QueueRanges or WireRanges."""

    def __init__(self, ranges: list):
        super().__init__(tuple(r.value for r in ranges))
        self.ranges = ranges

    def __repr__(self) -> str:
        return f"QueueRuns({', '.join(map(repr, self.ranges))})"


def pack_small_ranges(parts: list, min_offsets: int) -> list:
    """The partitions of a microbatch with its ranges of fewer than min_offsets offsets packed into QueueRuns of
    at least min_offsets offsets in all (near-equal shares), so a small microbatch is one wave of a few tasks:
    each task costs Spark a round trip to a Python worker that is far longer than reading a few thousand offsets.
    Ranges keep the plan's order (a queue's pieces stay in offset order); larger ranges stay partitions of their
    own."""
    small = [p for p in parts if p.end - p.start < min_offsets]
    total = sum(p.end - p.start for p in small)
    groups = max(1, total // max(1, min_offsets))
    if len(small) < 2 or groups >= len(small):
        return parts
    packed: list = [[]]
    done = 0
    for p in small:
        if packed[-1] and len(packed) < groups and done >= total * len(packed) / groups:
            packed.append([])
        packed[-1].append(p)
        done += p.end - p.start
    return [p for p in parts if p.end - p.start >= min_offsets] + \
        [QueueRuns(g) if len(g) > 1 else g[0] for g in packed]


def read_partition(p: InputPartition) -> Iterator[pa.RecordBatch]:
    if isinstance(p, QueueRuns):
        for r in p.ranges:
            yield from read_partition(r)
        return
    if not isinstance(p, QueueRange):
        return  # a plan with no ranges: Spark still runs one partition of its own, which holds nothing
    store = store_for(p.path)
    start = p.start
    available = store.min_offset(p.topic, p.queue_id)
    if start < available:
        check_data_loss(p.topic, p.queue_id, start, available, p.fail_on_data_loss)
        start = available
    before = dict(store.stats)
    rows = 0
    t0 = time.monotonic()
    # queue_offset: where to resume after a lost file; the residual's columns: what its mask reads
    needed = ["queue_offset"]
    if p.residual is not None:
        needed += p.residual.columns
    columns = p.selection.scan_columns(*needed)
    for batch in _scan_past_lost_files(store, p, start, columns):
        if p.residual is not None:
            batch = batch.filter(p.residual.row_mask(batch))  # on the store's columns (timestamps in ms)
            if not batch.num_rows:
                continue
        rows += batch.num_rows
        yield p.selection.to_spark_batch(batch)
    if p.metrics_path:
        _write_metrics(p, store, before, rows, time.monotonic() - t0)


def _scan_past_lost_files(store, p: QueueRange, start: int, columns: list) -> Iterator[pa.RecordBatch]:
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
            report_data_loss(f"topic {p.topic!r} queue {p.queue_id}: {e}", p.fail_on_data_loss,
                             "skip the lost messages", skipping)
            gap_lo, gap_hi = gap
            if gap_lo > pos:  # what lies before the gap, read without touching it
                yield from store.scan(p.topic, p.queue_id, pos, gap_lo, message_filter=p.message_filter,
                                      batch_rows=SCAN_BATCH_ROWS, columns=columns)
            pos = gap_hi


def _write_metrics(p: QueueRange, store, before: dict, rows: int, seconds: float) -> None:
    """Diagnostics (option metricsPath): each partition read appends its scan counters as one JSON line, so
    tests and users can see what the pushdown saved; executors are other processes than the driver."""
    record = {"topic": p.topic, "queue_id": p.queue_id, "start": p.start, "end": p.end, "rows": rows,
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
