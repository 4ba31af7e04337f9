"""spark.read.format("rmq"): [startingOffsets, endingOffsets) of every subscribed queue, one partition per queue.

Two classes because of how pyspark 4.3 plans a Python batch scan: with spark.sql.python.filterPushdown.enabled
it calls pushFilters in its pushdown planner; with the setting off, a reader that merely *overrides* pushFilters
fails planning with DATA_SOURCE_PUSHDOWN_DISABLED. So RmqBatchReader does not override it, and
RmqPushdownBatchReader (used only when the pushdown planner asks for a reader) does.
"""
from __future__ import annotations

import logging
from typing import Optional

from pyspark.sql.datasource import DataSourceReader, InputPartition

from rmq_log.reads import LogReads, RangeRuns

from .backend import backend_for
from .offsets import ending_positions, starting_positions, subscribed_queues
from .options import EarliestOffsets, SourceOptions
from .partition import LogPartition, split_ranges
from .pushdown import PushdownResult, translate
from .schema import FULL, Selection

log = logging.getLogger(__name__)


class RmqBatchReader(DataSourceReader):
    def __init__(self, opts: SourceOptions, message_filter, selection: Selection = FULL):
        self.opts = opts
        self.message_filter = message_filter
        self.selection = selection
        self.backend = backend_for(opts)
        self.pushed: Optional[PushdownResult] = None  # once pushFilters ran

    def planned_ranges(self) -> list:
        ranges, _ = self._plan()
        return ranges

    def _plan(self, store: Optional[LogReads] = None) -> tuple[list, bool]:
        """(ranges, whether they are runs an index lookup found), asked of `store` (else of one opened for it)."""
        if store is None:
            with self.backend.open() as opened:
                return self._plan(opened)
        queues = subscribed_queues(store, self.opts.subscription)
        store.note_batch_plan(queues)
        queues = self._prune_queues(queues)
        starts = starting_positions(self.opts, store, queues, default=EarliestOffsets(), streaming=False)
        ends = ending_positions(store, self.opts, queues, starts)
        ranges = []
        for q in queues:
            s, e = self._narrow(store, q, starts[q], ends[q])
            if s < e:
                ranges.append((q[0], q[1], s, e))
        runs = self._index_runs(store, ranges)
        if runs is not None:
            return runs, True
        return split_ranges(ranges, self.opts.min_partitions), False

    def _index_runs(self, store: LogReads, ranges: list) -> Optional[list]:
        if not self.opts.use_index:
            return None
        return store.index_runs(ranges, self.opts.key, self.opts.uniq_key,
                                None if self.pushed is None else self.pushed.msg_ids)

    def partitions(self):
        pushed = None if self.pushed is None else self.pushed.message_filter
        with self.backend.open() as store:
            ranges, looked_up = self._plan(store)
            parts = self.backend.partitions(store, ranges, self._scan_filter(), pushed, self._residual(),
                                            self.selection, log_order=not looked_up)
        if looked_up:  # a few rows per run: runs grouped into a few partitions
            per = max(1, -(-len(parts) // max(1, self.opts.min_partitions or 2)))
            parts = [LogPartition(RangeRuns([p.reader for p in parts[i:i + per]]))
                     for i in range(0, len(parts), per)]
        return parts

    def read(self, partition: InputPartition):
        return self.backend.read(partition)

    # -- pushdown hooks (no-ops without pushFilters) ---------------------------------------------------------

    def _scan_filter(self):
        if self.pushed is None or self.pushed.message_filter is None:
            return self.message_filter
        from filters import MessageFilter
        return MessageFilter.both(self.message_filter, self.pushed.message_filter)

    def _prune_queues(self, queues: list) -> list:
        if self.pushed is None:
            return queues
        if self.pushed.is_empty:
            return []
        topics, qids = self.pushed.topics, self.pushed.queue_ids
        qr = self.pushed.range_of("queue_id")
        return [(t, q) for t, q in queues
                if (topics is None or t in topics) and (qids is None or q.queue_id in qids) and qr.contains(q.queue_id)]

    def _narrow(self, store, q, s: int, e: int) -> tuple[int, int]:
        if self.pushed is None:
            return s, e
        r = self.pushed.queue_offset_range
        if r.low is not None:
            s = max(s, r.low)
        if r.high is not None:
            e = min(e, r.high + 1)
        ts = self.pushed.store_timestamp_range
        # Store timestamps rise along a queue (appends are serialised under the store lock), so offsets by
        # time bound the range; the residual mask below keeps the result exact anyway.
        if s < e and ts.low is not None:
            s = max(s, store.offset_for_timestamp(q[0], q[1], ts.low))
        if s < e and ts.high is not None:
            e = min(e, store.offset_for_timestamp(q[0], q[1], ts.high + 1))
        return s, e

    def _residual(self):
        """What the scan's filter does not apply by itself: position conditions (msg_id, timestamps, ...),
        checked with one vectorised mask per batch. None when the narrowing is all there is."""
        key, uniq = self.opts.key, self.opts.uniq_key
        if (self.pushed is None or not (self.pushed.ranges or self.pushed.value_sets)) and key is None and \
                uniq is None:
            return None
        if self.pushed is None:
            return PushdownResult(key=key, uniq_key=uniq)
        return PushdownResult(ranges=dict(self.pushed.ranges), value_sets=dict(self.pushed.value_sets), key=key,
                              uniq_key=uniq)


class RmqPushdownBatchReader(RmqBatchReader):
    def pushFilters(self, filters):
        result = translate(filters)
        self.pushed = result
        log.info("rmq pushdown: took %s; left to Spark %s; scan filter %s", result.accepted, result.unsupported,
                 self._scan_filter())
        return iter(result.unsupported)
