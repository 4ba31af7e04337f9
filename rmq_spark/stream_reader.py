"""spark.readStream.format("rmq"): offsets {"topic": {"queueId": nextOffset}}, one partition per queue range (small
ranges packed together: partition.pack_small_ranges).

initialOffset / latestOffset / partitions / commit run in one long-lived driver-side Python process (the store
handle and the rate-limit clock live there); read() runs in executors on an unpickled copy, so it only uses
what its partition's range reader carries.
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

from rmq_log.reads import Committer, LogReads

from .backend import backend_for
from .data_loss import report_data_loss
from .offset_arrays import OffsetDicts, Parsed, QueueLayout, patched
from .offsets import (
    Positions,
    check_data_loss,
    from_offset_dict,
    starting_positions,
    subscribed_queues,
    to_offset_dict,
)
from .options import LatestOffsets, SourceOptions
from .partition import pack_small_ranges, split_ranges
from .rate_limit import limit_by_bytes, split_by_backlog
from .schema import FULL, Selection

log = logging.getLogger(__name__)

POLL_INTERVAL_S = 0.01


class RmqStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: SourceOptions, message_filter, selection: Selection = FULL):
        self.opts = opts
        self.message_filter = message_filter
        self.selection = selection
        self.backend = backend_for(opts)
        self._store: Optional[LogReads] = None
        self._initial: Optional[dict] = None
        # Trigger.AvailableNow: the queues and their ends when it started
        self._target: Optional[tuple[QueueLayout, np.ndarray]] = None
        self._layout: Optional[QueueLayout] = None    # the subscribed queues, kept while the topics stay
        self._dicts = OffsetDicts()                    # offsets dicts seen lately, parsed
        self._committed: Optional[Parsed] = None       # the offsets last committed to the group
        self._reported: Optional[tuple] = None         # reportLatestOffset's last answer
        self._last_trigger_ms = 0.0                    # for minMessagesPerTrigger / maxTriggerDelay
        self._committer: Optional[Committer] = None   # the group's offsets' writer, once there is one to write

    def __getstate__(self):
        # Executors get a copy of the reader; the driver-side handles and caches stay behind.
        state = dict(self.__dict__)
        state.update(_store=None, _committer=None, _target=None, _layout=None, _dicts=OffsetDicts(),
                     _committed=None, _reported=None)
        return state

    @property
    def store(self) -> LogReads:
        if self._store is None:
            self._store = self.backend.open()
        return self._store

    # -- offsets ---------------------------------------------------------------------------------------------

    def initialOffset(self) -> dict:
        # Spark asks more than once; "latest" must not move between the calls.
        if self._initial is None:
            queues = self._layout_now().queues
            self._initial = to_offset_dict(self.store, starting_positions(self.opts, self.store, queues,
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
        layout = self._layout_now()
        self._target = (layout, layout.bounds()[1].copy())
        log.info("rmq availableNow target %s", to_offset_dict(self.store, self._available()))

    def _layout_now(self) -> QueueLayout:
        """The subscribed queues: made again only when the store's topic table changed (two stats when it did
        not), so a pattern picks up topics created since by any process; fixed by an availableNow target."""
        if self._target is not None:
            return self._target[0]
        version = self.store.topics_version()
        layout = self._layout
        if layout is not None and version is not None and version == layout.version:
            return layout
        queues = sorted(subscribed_queues(self.store, self.opts.subscription))
        if layout is not None and queues == layout.queues:
            layout.version = version
        else:
            layout = self._layout = QueueLayout(self.store, queues, version)
        return layout

    def _keep_checkpointed(self, start: dict, layout: QueueLayout) -> bool:
        """The checkpoint's queues of subscribed topics that the store does not list now (over the wire: a broker
        away at a restart) handed to the store to keep; True when the layout changes."""
        topics = {t for t, _ in layout.queues}
        return self.store.keep_checkpointed({k: v for k, v in from_offset_dict(self.store, start).items()
                                             if k[0] in topics})

    def _bounds_now(self, layout: QueueLayout) -> tuple[np.ndarray, np.ndarray]:
        mins, maxs = layout.bounds()
        if self._target is not None:
            maxs = self._target[1]
        return mins, maxs

    def _available(self) -> Positions:
        layout = self._layout_now()
        maxs = self._bounds_now(layout)[1]
        return dict(zip(layout.queues, maxs.tolist()))

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        layout = self._layout_now()
        parsed = self._dicts.parse(start, layout)
        if parsed.extra and self._keep_checkpointed(start, layout):
            layout = self._layout_now()
            parsed = self._dicts.parse(start, layout)
        # `start` is the end of a completed batch: commit it too, because Spark never calls commit() for the
        # last batch of an availableNow run.
        self._commit(start, parsed)
        begins, backlog, maxs = self._backlog(parsed)
        if backlog.sum() == 0 and self._target is None and self.opts.poll_timeout_ms > 0:
            self._wait_for_data(layout, begins)
            layout = self._layout_now()
            parsed = self._dicts.parse(start, layout)
            begins, backlog, maxs = self._backlog(parsed)
        takes = backlog
        if not isinstance(limit, ReadAllAvailable):
            takes = self._apply_limits(layout.queues, begins, backlog, limit)
            if takes is None:
                return start
        ends = begins + takes
        moved = np.flatnonzero(~parsed.present | (ends != parsed.values))
        if not len(moved):
            return start
        # queues no longer subscribed keep their offsets: they are carried in `start`'s dict
        end = patched(self.store, start or {}, layout.queues, moved, ends)
        self._dicts.remember(Parsed(end, layout, ends, np.ones(len(ends), dtype=bool), parsed.extra))
        self._last_trigger_ms = time.time() * 1000
        return end

    def _backlog(self, parsed: Parsed) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(where each subscribed queue continues, how many messages it has after that, its end), by the
        layout's order."""
        layout = parsed.layout
        mins, maxs = self._bounds_now(layout)
        begins = np.where(parsed.present, parsed.values, mins)  # a queue that appeared since: from its earliest
        below = np.flatnonzero(parsed.present & (parsed.values < mins))
        past = np.flatnonzero(parsed.present & (parsed.values >= mins) & (parsed.values > maxs))
        for i in below.tolist():
            t, q = layout.queues[i]
            check_data_loss(self.store, t, q, int(parsed.values[i]), int(mins[i]), self.opts.fail_on_data_loss)
            begins[i] = mins[i]
        for i in past.tolist():  # a checkpoint past the queue's end (the queue was truncated or made anew)
            t, q = layout.queues[i]
            text = (f"topic {t!r} queue {self.store.queue_name(q)}: the query's offset {int(parsed.values[i])} is "
                    f"past the end of the queue ({int(maxs[i])}); the messages appended there would never be read")
            report_data_loss(text, self.opts.fail_on_data_loss, "continue at the end", f"continuing at {int(maxs[i])}")
            begins[i] = maxs[i]
        return begins, np.maximum(maxs - begins, 0), maxs

    def _apply_limits(self, queues, begins: np.ndarray, backlog: np.ndarray, limit: ReadLimit):
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
            takes = limit_by_bytes(self.store, queues, begins, takes, max_bytes)
        return takes

    def _wait_for_data(self, layout: QueueLayout, begins: np.ndarray) -> None:
        """pollTimeoutMs: hold the trigger until a message arrives in any subscribed queue (the same cheap
        consume-queue end check the store's long polling makes across processes), a topic is created, or the
        timeout passes."""
        deadline = time.monotonic() + self.opts.poll_timeout_ms / 1000
        while time.monotonic() < deadline:
            time.sleep(POLL_INTERVAL_S)
            if self._layout_now() is not layout or (layout.bounds()[1] > begins).any():
                return

    def reportLatestOffset(self) -> Optional[dict]:
        layout = self._layout_now()
        maxs = self._bounds_now(layout)[1]
        key = (layout, layout.tracker.updates, self._target is not None)
        if self._reported is None or self._reported[0] != key:  # the same dict while nothing changed
            self._reported = (key, to_offset_dict(self.store, dict(zip(layout.queues, maxs.tolist()))))
        return self._reported[1]

    def partitions(self, start: dict, end: dict):
        layout = self._layout_now()
        s, e = self._dicts.parse(start, layout), self._dicts.parse(end, layout)
        if s.extra or e.extra:  # queues outside the subscription: the general path
            ranges = self._ranges(from_offset_dict(self.store, start), from_offset_dict(self.store, end))
        else:
            moved = np.flatnonzero(e.present & (~s.present | (e.values != s.values)))
            queues = [layout.queues[i] for i in moved.tolist()]
            ranges = self._ranges({q: int(s.values[i]) for q, i in zip(queues, moved.tolist()) if s.present[i]},
                                  {q: int(e.values[i]) for q, i in zip(queues, moved.tolist())})
        if self.opts.min_partitions:  # the user's count of partitions wins
            ranges = split_ranges(ranges, self.opts.min_partitions)
        parts = self.backend.partitions(self.store, ranges, self.message_filter, self.message_filter, None,
                                        self.selection)
        return parts if self.opts.min_partitions else pack_small_ranges(parts, self.opts.min_offsets_per_partition)

    def _ranges(self, start_pos: Positions, end_pos: Positions) -> list:
        """(topic, queue, from, to) of each queue whose position moved."""
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
                    check_data_loss(self.store, q[0], q[1], s, mn, True)
                s = mn  # (with failOnDataLoss=false, latestOffset has logged the loss already: once per queue)
            if s < e:
                ranges.append((q[0], q[1], s, e))
        return ranges

    def read(self, partition: InputPartition):
        return self.backend.read(partition)

    def commit(self, end: dict) -> None:
        self._commit(end)

    def _commit(self, offsets: dict, parsed: Optional[Parsed] = None) -> None:
        """The group's offsets: only the queues that moved since the last commit are compared and written."""
        if not self.opts.commit_offsets or not offsets:
            return
        if self._committer is None:
            self._committer = self.store.committer()
        if parsed is None:
            parsed = self._dicts.parse(offsets, self._layout_now())
        last = self._committed
        if parsed.extra or last is None or last.layout is not parsed.layout or last.extra:
            self._committer.commit(from_offset_dict(self.store, offsets), self.store)
        elif last is not parsed or self._committer.pending:
            moved = np.flatnonzero(parsed.present & (~last.present | (parsed.values != last.values)))
            if len(moved) or self._committer.pending:
                queues = parsed.layout.queues
                self._committer.commit_moved({queues[i]: int(parsed.values[i]) for i in moved.tolist()},
                                             self.store)
        self._committed = parsed

    def stop(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
