"""The bulk read path: one queue's messages, or several queues' read together in log order, as Arrow
RecordBatches decoded from the mapped commitlog.

Consume-queue units are read as one array and tag codes filtered as an array; each run of records (one file) is
then decoded by the record decoder (rmq_common/record_decoder.py), with a filter's text mask applied before bodies
and other columns are built.
"""
from __future__ import annotations

import mmap
import sys
from typing import Iterator, Optional, Sequence, Union

import numpy as np
import pyarrow as pa

from rmq_common.record_decoder import SCAN_SCHEMA, decode_records, scan_schema

from .consume_queue import CQ_STORE_UNIT_SIZE
from .message_filter import vectorised

# A round's units of one queue, or of several merged: (queue id, or each unit's; queue offsets, log offsets,
# sizes, tag codes)
Units = tuple[Union[int, np.ndarray], np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def scan(store, topic: str, queue_id: int, start: int, end: Optional[int], message_filter,
         batch_rows: int, columns: Optional[Sequence[str]] = None,
         release_pages: bool = True) -> Iterator[pa.RecordBatch]:
    """One queue's [start, end) (end None: to its last unit), batch_rows units a batch."""
    return scan_queues(store, topic, [(queue_id, start, sys.maxsize if end is None else end)], message_filter,
                       batch_rows, columns, release_pages)


def scan_queues(store, topic: str, pieces: Sequence[tuple[int, int, int]], message_filter, batch_rows: int,
                columns: Optional[Sequence[str]] = None, release_pages: bool = True,
                progress: Optional[dict] = None) -> Iterator[pa.RecordBatch]:
    """Several queues' [start, end) of one topic, (queue_id, start, end) each, read together in log order: each
    batch holds a stretch of the log's records of all of them (a queue's in its offset order), with each record's
    queue id. A topic's queues interleave in the log, so one queue's records are a few in every page; read
    together, each page is mapped and decoded once, its records next to each other. Each round takes up to
    batch_rows / len(pieces) units of every queue, and of those only the ones up to the lowest log position any
    queue with more to read reached: what the log holds before that position is all in this round."""
    schema = scan_schema(columns)
    # The filter decides from the stored property texts before bodies and other columns are built, so records
    # it rejects cost only their header and properties.
    batch_filter = None if message_filter is None else vectorised(message_filter)
    text_filter = None if batch_filter is None else batch_filter.properties_text_mask
    log_min = store.commit_log.min_offset()
    cursors = []  # [consume queue, queue id, next offset, end]
    for queue_id, start, end in pieces:
        cq = store.find_consume_queue(topic, queue_id)
        end = min(end, cq.max_offset())
        pos = max(start, cq.min_offset(log_min))
        if pos < end:
            cursors.append([cq, queue_id, pos, end])
    chunk = max(1, batch_rows // max(1, len(cursors)))
    while cursors:
        got, bound, bounding = [], None, -1
        for i, c in enumerate(cursors):
            cq, _, pos, end = c
            units = cq.units(pos, min(end, pos + chunk))
            empty = np.flatnonzero(units["size"] == 0)
            if len(empty):  # not written yet: this queue ends here for this scan
                units = units[:empty[0]]
                c[3] = pos + len(units)
            if len(units) and pos + len(units) < c[3] and (bound is None or int(units["offset"][-1]) < bound):
                bound, bounding = int(units["offset"][-1]), i
            got.append(units)
        parts: list[Units] = []  # the units this round takes
        for i, (c, units) in enumerate(zip(cursors, got)):
            cq, queue_id, pos, _ = c
            n = len(units) if bound is None or i == bounding else \
                int(np.searchsorted(units["offset"], bound, side="right"))
            if n:
                parts.append((queue_id, np.arange(pos, pos + n, dtype=np.int64), units["offset"][:n].astype(np.int64),
                              units["size"][:n].astype(np.int64), units["tags_code"][:n].astype(np.int64)))
            del units
            _release_units(cq, pos, pos + n)
            c[2] = pos + n
        del got
        reached = {c[1]: c[2] for c in cursors}
        cursors = [c for c in cursors if c[2] < c[3]]
        if parts:
            batch = _decode_units(store, topic, *_in_log_order(parts), batch_filter, text_filter, schema,
                                  release_pages)
            if batch is not None:
                yield batch
        if progress is not None:  # this round's units are all read or filtered out once its batch is taken
            progress.update(reached)


def _in_log_order(parts: list[Units]) -> Units:
    """(queue id, or each unit's, and the units' queue offsets, log offsets, sizes, tag codes) of a round's
    queues merged into log order; one queue's as they are."""
    if len(parts) == 1:
        return parts[0]
    queue_ids = np.concatenate([np.full(len(p[1]), p[0], dtype=np.int32) for p in parts])
    queue_offsets, offsets, sizes, codes = (np.concatenate(a) for a in list(zip(*parts))[1:])
    order = np.argsort(offsets, kind="stable")  # a merge of sorted runs: a few ns a unit
    return queue_ids[order], queue_offsets[order], offsets[order], sizes[order], codes[order]


def _decode_units(store, topic: str, queue_id, queue_offsets: np.ndarray, offsets: np.ndarray, sizes: np.ndarray,
                  codes: np.ndarray, batch_filter, text_filter, schema: pa.Schema,
                  release_pages: bool) -> Optional[pa.RecordBatch]:
    """The records the units point at (ascending offsets) whose tag codes the filter keeps, as one batch decoded
    file by file; None when none is left (the filter took them all, or their files are gone by retention).
    queue_id: the queue's, or an array of each unit's."""
    store.stats["consume_queue_units_scanned"] += len(offsets)
    per_record = isinstance(queue_id, np.ndarray)
    if batch_filter is not None:
        keep = np.asarray(batch_filter.consume_queue_mask(codes), dtype=np.bool_)
        offsets, sizes, queue_offsets = offsets[keep], sizes[keep], queue_offsets[keep]
        queue_id = queue_id[keep] if per_record else queue_id
    if len(offsets) == 0:
        return None
    store.stats["commit_log_records_read"] += len(offsets)
    batches = []
    file_ids = offsets // store.commit_log.file_size
    cuts = np.flatnonzero(np.diff(file_ids)) + 1
    for a, b in zip(np.r_[0, cuts], np.r_[cuts, len(offsets)]):
        view, base = store.commit_log.view_at(int(offsets[a]), unit=True)
        if view is None:
            continue  # the file was removed by retention while we read: those messages are gone
        lo, hi = int(offsets[a] - base), int(offsets[b - 1] + sizes[b - 1] - base)
        if release_pages and hi - lo <= (b - a) * _POPULATE_SPAN:
            _populate(view, lo, hi)
        batches.append(decode_run(view, base, offsets[a:b], sizes[a:b], queue_offsets[a:b], topic,
                                  queue_id[a:b] if per_record else queue_id,
                                  store.commit_log.path_of(int(offsets[a])), text_filter, schema))
        if release_pages:
            _release(view, lo, hi)
    batches = [b for b in batches if b.num_rows]  # a text filter may drop a whole run
    if not batches:
        return None
    batch = batches[0] if len(batches) == 1 else pa.Table.from_batches(batches).combine_chunks().to_batches()[0]
    return batch if batch.num_rows else None


# Linux >= 5.14: map a range's page-cache pages in one call. A queue's records are spread over the whole log
# (queues interleave), so a run touches every page of its range once: one call instead of a page fault every
# 16 pages, and the decoder's prefetches then reach memory instead of stopping at unmapped pages.
_MADV_POPULATE_READ = getattr(mmap, "MADV_POPULATE_READ", 22 if sys.platform.startswith("linux") else None)


_POPULATE_SPAN = 8192  # bytes of log per record read, at most, for a run's pages to be mapped in advance (a
# filter that keeps few records leaves most pages of the span unread)


def _populate(view, lo: int, hi: int) -> None:
    if _MADV_POPULATE_READ is not None:
        _madvise(view, _MADV_POPULATE_READ, lo, hi)


def _release(view, lo: int, hi: int) -> None:
    """Drop the pages just decoded from this process's mapping (they stay in the page cache), so a scan's
    resident memory stays bounded by one batch however much of the log it reads."""
    _madvise(view, getattr(mmap, "MADV_DONTNEED", None), lo, hi)


def _madvise(view, advice, lo: int, hi: int) -> None:
    page = mmap.PAGESIZE
    start = lo - lo % page
    end = min(len(view), hi + (-hi) % page)
    if end > start and advice is not None:
        try:
            view.madvise(advice, start, end - start)
        except (OSError, ValueError, AttributeError):
            pass  # an optimisation only (an older kernel refuses the advice)


def _release_units(cq, start: int, end: int) -> None:
    """Drop the consume-queue pages of units [start, end) from this process's mapping once copied (a queue's
    units would otherwise stay resident: 20 bytes a message for the whole scan)."""
    unit = CQ_STORE_UNIT_SIZE
    while start < end:
        f = cq.files.find(start * unit)
        if f is None:
            return
        first = f.file_from_offset // unit
        stop = min(end, first + cq.units_per_file)
        try:
            view = f.view()
        except FileNotFoundError:
            return
        _release(view, (start - first) * unit, (stop - first) * unit)
        start = stop


def decode_run(view, base: int, offsets: np.ndarray, sizes: np.ndarray, queue_offsets: np.ndarray, topic: str,
               queue_id, path: str, text_filter=None, schema: pa.Schema = SCAN_SCHEMA) -> pa.RecordBatch:
    """Records at `offsets` (ascending, one file) as a RecordBatch of `schema`'s columns (SCAN_SCHEMA's, or some
    of them); CorruptRecordError if any is invalid. With `text_filter` (property texts -> BooleanArray) only the
    records it accepts are decoded further."""
    return decode_records(np.frombuffer(view, dtype=np.uint8), offsets - base, offsets, sizes, queue_offsets, topic,
                          queue_id, path, text_filter, schema)


