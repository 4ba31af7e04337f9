"""The (min, max) offsets of many queues, for a caller that asks the same queues again and again (a streaming
query's triggers over tens of thousands of queues): remembered between calls, and after appends only the queues
the records appended since went to are read again, so the Python work follows what changed, not the number of
queues. QueueBounds answers a dict (MessageStore.queue_bounds); QueueBoundsTracker keeps two arrays of a fixed
list of queues up to date in place.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

# how far the records appended since are walked to find the queues they went to, before every queue is read again
BOUNDS_WALK_BYTES = 1 << 20


def appended_queues(store, start: int, end: int) -> Optional[set[tuple[str, int]]]:
    """The queues of the records committed in [start, end), or None when that is too much to walk."""
    if end < start or end - start > BOUNDS_WALK_BYTES:
        return None
    queues: set[tuple[str, int]] = set()
    for rec in store.commit_log.walk(start, check_crc=False):
        if rec.offset >= end:
            return queues
        queues.add((rec.topic, rec.queue_id))
    if store.commit_log.walk_end < end:
        return None  # the walk stopped short of what was committed: read every queue
    return queues


def _committed_end(store) -> Optional[int]:
    """What was committed, as far as this process can tell (None: a store without our committed end)."""
    return store.lock_file.committed_end() if store.appender.write_pos is None else store.commit_log_max_offset()


class QueueBounds:
    """MessageStore.queue_bounds' memory."""

    def __init__(self, store):
        self.store = store
        self.cache: dict[tuple[str, int], tuple[int, int]] = {}
        self._end: Optional[int] = None
        self._log_min: Optional[int] = None

    def bounds(self, queues) -> dict[tuple[str, int], tuple[int, int]]:
        store = self.store
        end = _committed_end(store)
        log_min = store.commit_log.min_offset()
        cache = self.cache
        if end is None or log_min != self._log_min:
            cache.clear()
        elif end != self._end:
            changed = appended_queues(store, self._end, end) if self._end is not None else None
            if changed is None:
                cache.clear()
            else:
                for q in changed:
                    cache.pop(q, None)
        self._end, self._log_min = end, log_min
        out = {}
        for q in queues:
            bounds = cache.get(q)
            if bounds is None:
                cq = store.find_consume_queue(*q)
                bounds = cache[q] = (cq.min_offset(log_min), cq.max_offset())
            out[q] = bounds
        return out


class QueueBoundsTracker:
    def __init__(self, store, queues):
        self.store = store
        self.queues: list = list(queues)
        self.index: dict = {q: i for i, q in enumerate(self.queues)}
        self.mins = np.zeros(len(self.queues), dtype=np.int64)
        self.maxs = np.zeros(len(self.queues), dtype=np.int64)
        self.updates = 0  # bumped by every update that re-read any queue
        self._end: Optional[int] = None
        self._log_min: Optional[int] = None
        self._read = False

    def update(self) -> Optional[np.ndarray]:
        """Bring the arrays up to date. Returns the indices of the queues read again (empty when nothing was
        committed and no commitlog file removed since the last update), or None when all were (the first
        update, after retention, after more appends than BOUNDS_WALK_BYTES, or in a store without
        our committed end, which is read in full each time)."""
        store = self.store
        end = _committed_end(store)
        log_min = store.commit_log.min_offset()
        changed: Optional[np.ndarray] = None
        if self._read and end is not None and log_min == self._log_min:
            if end == self._end:
                return np.zeros(0, dtype=np.int64)
            queues = appended_queues(store, self._end, end) if self._end is not None else None
            if queues is not None:
                index = self.index
                changed = np.array(sorted(index[q] for q in queues if q in index), dtype=np.int64)
        self._end, self._log_min = end, log_min
        todo = range(len(self.queues)) if changed is None else changed.tolist()
        mins, maxs, queues_list = self.mins, self.maxs, self.queues
        for i in todo:
            cq = store.find_consume_queue(*queues_list[i])
            mins[i], maxs[i] = cq.min_offset(log_min), cq.max_offset()
        self._read = True
        if changed is None or len(changed):
            self.updates += 1
        return changed
