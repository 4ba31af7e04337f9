"""Which units of a queue a property filter (SQL92) matched, decided a few thousand units at a time and kept for
the pulls that follow: a consumer pulls 32 messages at a time, and deciding each pull's few hundred units on its
own cost more in the scan's fixed costs than in the filter (RocketMQ's broker keeps a bitmap per unit for the same
reason, its ConsumeQueueExt). The commitlog only grows and a unit, once written, never changes: what was decided
for [start, end) holds as long as the unit at end - 1 still points where it pointed (a queue deleted and made again
points elsewhere, the log's positions are never reused)."""
from __future__ import annotations

from collections import OrderedDict
from typing import Optional

import numpy as np

# Units decided per scan: large enough that the scan's fixed costs are small per unit, small enough that a pull
# waits little for it (about 3 ms of filtering on these machines).
CHUNK = 4096
MAX_ENTRIES = 1024  # (filter, queue) pairs kept, least recently used dropped


class Decided:
    __slots__ = ("start", "end", "matched", "last_unit")

    def __init__(self, start: int):
        self.start = self.end = start
        self.matched = np.zeros(0, dtype=np.int64)  # queue offsets in [start, end) the filter matched
        self.last_unit = -1  # the commitlog offset the unit at end - 1 pointed at


class FilterMatches:
    def __init__(self) -> None:
        self._entries: OrderedDict[tuple, Decided] = OrderedDict()

    def matches(self, store, topic: str, queue_id: int, offset: int, end: int, want: int,
                message_filter) -> np.ndarray:
        """Queue offsets in [offset, end) the filter matches, in order: the first `want` of them when there are
        that many, else all."""
        key = (message_filter, topic, queue_id)
        cq = store.find_consume_queue(topic, queue_id)
        got = self._entries.get(key)
        if got is None or not got.start <= offset <= got.end or not self._still_valid(cq, got):
            got = Decided(offset)
            self._entries[key] = got
            while len(self._entries) > MAX_ENTRIES:
                self._entries.popitem(last=False)
        self._entries.move_to_end(key)
        if offset > got.start:  # what the consumer moved past is not asked again
            got.matched = got.matched[np.searchsorted(got.matched, offset):]
            got.start = offset
        while got.end < end and len(got.matched) < want and self._decide(store, cq, got, message_filter):
            pass
        stop = int(np.searchsorted(got.matched, end))
        return got.matched[:min(stop, want)]

    @staticmethod
    def _still_valid(cq, got: Decided) -> bool:
        if got.end == got.start:
            return True
        unit = cq.units(got.end - 1, got.end)
        return len(unit) == 1 and int(unit["offset"][0]) == got.last_unit and int(unit["size"][0]) > 0

    @staticmethod
    def _decide(store, cq, got: Decided, message_filter) -> bool:
        """Decide the next CHUNK units (fewer at the queue's end, or before a unit still being written); False
        when there is none."""
        pos = got.end
        units = cq.units(pos, min(cq.max_offset(), pos + CHUNK))
        written = np.flatnonzero(units["size"] == 0)
        if len(written):
            units = units[:written[0]]
        if not len(units):
            return False
        stop = pos + len(units)
        found = [got.matched]
        for batch in store.scan(cq.topic, cq.queue_id, pos, stop, message_filter=message_filter,
                                batch_rows=CHUNK, columns=("queue_offset",), release_pages=False):
            found.append(batch.column("queue_offset").to_numpy().astype(np.int64))
        got.matched = np.concatenate(found)
        got.end = stop
        got.last_unit = int(units["offset"][-1])
        return True


def filter_matches(store) -> FilterMatches:
    """The store's cache (made on first use)."""
    cache: Optional[FilterMatches] = getattr(store, "_filter_matches", None)
    if cache is None:
        cache = store._filter_matches = FilterMatches()
    return cache
