"""The bulk read path: one queue's messages as Arrow RecordBatches, decoded from the mapped commitlog.

Consume-queue units are read as one array and tag codes filtered as an array; each run of records (one file) is
then decoded by the record decoder (rmq_common/record_decoder.py), with a filter's text mask applied before bodies
and other columns are built.
"""
from __future__ import annotations

import mmap
import sys
from typing import Iterator, Optional, Sequence

import numpy as np
import pyarrow as pa

from rmq_common.record_decoder import SCAN_SCHEMA, decode_records, scan_schema

from .consume_queue import CQ_STORE_UNIT_SIZE
from .message_filter import vectorised


def scan(store, topic: str, queue_id: int, start: int, end: Optional[int], message_filter,
         batch_rows: int, columns: Optional[Sequence[str]] = None,
         release_pages: bool = True) -> Iterator[pa.RecordBatch]:
    schema = scan_schema(columns)
    cq = store.find_consume_queue(topic, queue_id)
    max_off = cq.max_offset()
    end = max_off if end is None else min(end, max_off)
    pos = max(start, cq.min_offset(store.commit_log.min_offset()))
    file_size = store.commit_log.file_size
    # The filter decides from the stored property texts before bodies and other columns are built, so records
    # it rejects cost only their header and properties.
    batch_filter = None if message_filter is None else vectorised(message_filter)
    text_filter = None if batch_filter is None else batch_filter.properties_text_mask
    while pos < end:
        units = cq.units(pos, min(end, pos + batch_rows))
        empty = np.flatnonzero(units["size"] == 0)
        if len(empty):
            units = units[:empty[0]]
            end = pos + len(units)
        if len(units) == 0:
            break
        n_units = len(units)
        queue_offsets = np.arange(pos, pos + n_units, dtype=np.int64)
        offsets = units["offset"].astype(np.int64)
        sizes = units["size"].astype(np.int64)
        codes = units["tags_code"].astype(np.int64)
        del units
        _release_units(cq, pos, pos + n_units)
        store.stats["consume_queue_units_scanned"] += n_units
        if batch_filter is not None:
            keep = np.asarray(batch_filter.consume_queue_mask(codes), dtype=np.bool_)
            offsets, sizes, queue_offsets = offsets[keep], sizes[keep], queue_offsets[keep]
        pos += n_units
        if len(offsets) == 0:
            continue
        store.stats["commit_log_records_read"] += len(offsets)
        batches = []
        file_ids = offsets // file_size
        cuts = np.flatnonzero(np.diff(file_ids)) + 1
        for a, b in zip(np.r_[0, cuts], np.r_[cuts, len(offsets)]):
            view, base = store.commit_log.view_at(int(offsets[a]), unit=True)
            if view is None:
                continue  # the file was removed by retention while we read: those messages are gone
            lo, hi = int(offsets[a] - base), int(offsets[b - 1] + sizes[b - 1] - base)
            if release_pages and hi - lo <= (b - a) * _POPULATE_SPAN:
                _populate(view, lo, hi)
            batches.append(decode_run(view, base, offsets[a:b], sizes[a:b], queue_offsets[a:b], topic, queue_id,
                                      store.commit_log.path_of(int(offsets[a])), text_filter, schema))
            if release_pages:
                _release(view, lo, hi)
        batches = [b for b in batches if b.num_rows]  # a text filter may drop a whole run
        if not batches:
            continue
        batch = batches[0] if len(batches) == 1 else pa.Table.from_batches(batches).combine_chunks().to_batches()[0]
        if batch.num_rows:
            yield batch


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
               queue_id: int, path: str, text_filter=None, schema: pa.Schema = SCAN_SCHEMA) -> pa.RecordBatch:
    """Records at `offsets` (ascending, one file) as a RecordBatch of `schema`'s columns (SCAN_SCHEMA's, or some
    of them); CorruptRecordError if any is invalid. With `text_filter` (property texts -> BooleanArray) only the
    records it accepts are decoded further."""
    return decode_records(np.frombuffer(view, dtype=np.uint8), offsets - base, offsets, sizes, queue_offsets, topic,
                          queue_id, path, text_filter, schema)


