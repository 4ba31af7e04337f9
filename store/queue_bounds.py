"""QueueBoundsTracker: the (min, max) offsets of a fixed list of queues as two arrays, kept up to date in place.

For a caller that asks the same many queues again and again (a streaming query's triggers over tens of thousands
of queues): after the first read, an update reads only the queues that records appended since went to, so its
Python work follows what changed, not the number of queues.
"""
from __future__ import annotations

from typing import Optional

import numpy as np


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
        update, after retention, after more appends than MessageStore.BOUNDS_WALK_BYTES, or in a store without
        our committed end, which is read in full each time)."""
        store = self.store
        end = store._committed_end() if store.appender.write_pos is None else store.commit_log_max_offset()
        log_min = store.commit_log.min_offset()
        changed: Optional[np.ndarray] = None
        if self._read and end is not None and log_min == self._log_min:
            if end == self._end:
                return np.zeros(0, dtype=np.int64)
            queues = store._appended_queues(self._end, end) if self._end is not None else None
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
