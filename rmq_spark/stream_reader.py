"""spark.readStream.format("rmq"): offsets {"topic": {"queueId": nextOffset}}, one partition per queue range.

initialOffset / latestOffset / partitions / commit run in one long-lived driver-side Python process (the store
handle and the rate-limit clock live there); read() runs in executors on an unpickled copy, so it only uses
what the QueueRange carries.
"""
from __future__ import annotations

import logging
import time
from typing import Optional

import numpy as np
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from store import MessageStore

from .errors import DataLossError
from .offsets import (
    OffsetCommitter,
    Positions,
    check_data_loss,
    from_offset_dict,
    open_source_store,
    starting_positions,
    subscribed_queues,
    to_offset_dict,
)
from .options import LatestOffsets, SourceOptions
from .partition import QueueRange, read_partition, split_ranges
from .rate_limit import limit_by_bytes, split_by_backlog
from .schema import FULL, Selection
from .wire import WireOffsetCommitter, WireRange, read_wire_partition, wire_ranges

log = logging.getLogger(__name__)

POLL_INTERVAL_S = 0.01


class RmqStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: SourceOptions, message_filter, selection: Selection = FULL):
        self.opts = opts
        self.message_filter = message_filter
        self.selection = selection
        self._store: Optional[MessageStore] = None
        self._initial: Optional[dict] = None
        self._target: Optional[Positions] = None      # Trigger.AvailableNow: the queue ends when it started
        self._last_trigger_ms = 0.0                    # for minMessagesPerTrigger / maxTriggerDelay
        self._committer = None
        if opts.commit_offsets:
            self._committer = WireOffsetCommitter(opts.consumer_group) if opts.namesrv_addr else \
                OffsetCommitter(opts.path, opts.consumer_group)

    def __getstate__(self):
        # Executors get a copy of the reader; the driver-side handles stay behind.
        state = dict(self.__dict__)
        state["_store"] = None
        state["_committer"] = None
        return state

    @property
    def store(self):
        if self._store is None:
            self._store = open_source_store(self.opts)
        return self._store

    # -- offsets ---------------------------------------------------------------------------------------------

    def initialOffset(self) -> dict:
        # Spark asks more than once; "latest" must not move between the calls.
        if self._initial is None:
            queues = subscribed_queues(self.store, self.opts.subscription)
            self._initial = to_offset_dict(starting_positions(self.store, self.opts, queues,
                                                              default=LatestOffsets(), streaming=True))
            log.info("rmq stream starts at %s", self._initial)
        return self._initial

    def getDefaultReadLimit(self) -> ReadLimit:
        o = self.opts
        if o.max_messages_per_trigger is not None:
            return ReadMaxRows(o.max_messages_per_trigger)
        if o.max_bytes_per_trigger is not None:
            return ReadMaxBytes(o.max_bytes_per_trigger)
        if o.min_messages_per_trigger is not None:
            return ReadMinRows(o.min_messages_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        queues = subscribed_queues(self.store, self.opts.subscription)
        self._target = {q: self.store.max_offset(*q) for q in queues}
        log.info("rmq availableNow target %s", to_offset_dict(self._target))

    def _available(self) -> Positions:
        if self._target is not None:
            return dict(self._target)
        bounds = self.store.queue_bounds(subscribed_queues(self.store, self.opts.subscription))
        return {q: mx for q, (_, mx) in bounds.items()}

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        start_pos = from_offset_dict(start)
        # `start` is the end of a completed batch: commit it too, because Spark never calls commit() for the
        # last batch of an availableNow run.
        self._commit(start_pos)
        queues, begins, backlog = self._backlog(start_pos)
        if backlog.sum() == 0 and self._target is None and self.opts.poll_timeout_ms > 0:
            self._wait_for_data(begins)
            queues, begins, backlog = self._backlog(start_pos)
        takes = backlog
        if not isinstance(limit, ReadAllAvailable):
            takes = self._apply_limits(queues, begins, backlog, limit)
            if takes is None:
                return start
        end_pos = dict(start_pos)  # queues no longer subscribed keep their offsets
        for q, n in zip(queues, takes.tolist()):
            end_pos[q] = begins[q] + n
        end = to_offset_dict(end_pos)
        if end != start:
            self._last_trigger_ms = time.time() * 1000
        return end

    def _backlog(self, start_pos: Positions):
        """(queues, where each continues, how many messages each has after that)."""
        available = self._available()
        bounds = self.store.queue_bounds(available)  # from memory: the call above just read them
        begins = {}
        for q, mx in available.items():
            b = start_pos.get(q)
            mn = bounds[q][0]
            if b is None:
                b = mn  # a queue that appeared since the query started: from its earliest
            elif b < mn:
                check_data_loss(q[0], q[1], b, mn, self.opts.fail_on_data_loss)
                b = mn
            elif b > mx:  # a checkpoint past the queue's end (the queue was truncated or made anew)
                text = (f"topic {q[0]!r} queue {q[1]}: the query's offset {b} is past the end of the queue "
                        f"({mx}); the messages appended there would never be read")
                if self.opts.fail_on_data_loss:
                    raise DataLossError(f"{text}. Set failOnDataLoss=false to continue at the end.")
                log.warning("%s; continuing at %d (failOnDataLoss=false)", text, mx)
                b = mx
            begins[q] = b
        queues = sorted(available)
        backlog = np.array([max(0, available[q] - begins[q]) for q in queues], dtype=np.int64)
        return queues, begins, backlog

    def _apply_limits(self, queues, begins, backlog: np.ndarray, limit: ReadLimit):
        """Our own rate options (Spark hands back the limit getDefaultReadLimit gave, or ReadAllAvailable)."""
        o = self.opts
        total = int(backlog.sum())
        if o.min_messages_per_trigger is not None and self._target is None and total < o.min_messages_per_trigger:
            waited = time.time() * 1000 - self._last_trigger_ms
            if waited < o.max_trigger_delay_ms:
                return None  # not enough yet: no batch this trigger
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else o.max_messages_per_trigger
        takes = backlog if max_rows is None else split_by_backlog(backlog, max_rows)
        max_bytes = limit.max_bytes if isinstance(limit, ReadMaxBytes) else o.max_bytes_per_trigger
        if max_bytes is not None:
            takes = limit_by_bytes(self.store, queues, np.array([begins[q] for q in queues], dtype=np.int64),
                                   takes, max_bytes)
        return takes

    def _wait_for_data(self, begins: Positions) -> None:
        """pollTimeoutMs: hold the trigger until a message arrives in any subscribed queue (the same cheap
        consume-queue end check the store's long polling makes across processes), or the timeout passes."""
        deadline = time.monotonic() + self.opts.poll_timeout_ms / 1000
        while time.monotonic() < deadline:
            time.sleep(POLL_INTERVAL_S)
            available = self._available()
            if set(available) != set(begins) or any(mx > begins[q] for q, mx in available.items()):
                return

    def reportLatestOffset(self) -> Optional[dict]:
        return to_offset_dict(self._available())

    def partitions(self, start: dict, end: dict):
        start_pos, end_pos = from_offset_dict(start), from_offset_dict(end)
        ranges = []
        bounds = self.store.queue_bounds([q for q, e in end_pos.items() if start_pos.get(q) != e])
        for q, e in sorted(end_pos.items()):
            s = start_pos.get(q)
            if s == e:
                continue  # nothing to read in this queue
            mn = bounds[q][0]
            if s is None:
                s = mn
            elif s < mn and s < e:
                if self.opts.fail_on_data_loss:
                    check_data_loss(q[0], q[1], s, mn, True)
                s = mn  # (with failOnDataLoss=false, latestOffset has logged the loss already: once per queue)
            if s < e:
                ranges.append((q[0], q[1], s, e))
        ranges = split_ranges(ranges, self.opts.min_partitions)
        if self.opts.namesrv_addr:
            return wire_ranges(self.opts, ranges, self.message_filter, selection=self.selection)
        return [QueueRange(self.opts.path, t, qid, s, e, self.message_filter, self.opts.fail_on_data_loss,
                           self.opts.metrics_path, selection=self.selection)
                for t, qid, s, e in ranges]

    def read(self, partition: InputPartition):
        if isinstance(partition, WireRange):
            return read_wire_partition(partition)
        return read_partition(partition)

    def commit(self, end: dict) -> None:
        self._commit(from_offset_dict(end))

    def _commit(self, positions: Positions) -> None:
        if self._committer is not None and positions:
            self._committer.commit(positions, self.store)

    def stop(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
