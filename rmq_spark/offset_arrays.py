"""A streaming query's offsets over many queues as arrays: the subscribed queues in a stable order, their bounds
and positions as int64 arrays by that order, and the offsets dicts Spark checkpoints ({"topic": {queue's name:
offset}}, named by the place: offsets.to_offset_dict) parsed once and built from the previous one by changing only
the queues that moved.

Spark hands each trigger a fresh dict of every queue (its own JSON round trip); recognising it as the one we
returned last is one C-level comparison, so a trigger's Python work follows the queues that changed."""
from __future__ import annotations

from typing import Optional

import numpy as np

from rmq_log.reads import LogReads

from .offsets import from_offset_dict

KNOWN_DICTS = 4  # a trigger's start and end, and the pair before: what partitions() and commit() are given


class QueueLayout:
    """The subscribed queues, sorted, with each one's index and their (min, max) bounds as arrays; store: the
    reads they belong to (which name them in offsets dicts)."""

    def __init__(self, store: LogReads, queues: list, version: Optional[int]):
        self.store = store
        self.queues = queues
        self.index = {q: i for i, q in enumerate(queues)}
        self.version = version  # the store's topics_version() it was made at (None: unknown, made again)
        self.tracker = store.bounds_tracker(queues)

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """(mins, maxs) now, updated in place (only queues appended to since are read again)."""
        self.tracker.update()
        return self.tracker.mins, self.tracker.maxs


class Parsed:
    """An offsets dict as arrays over a layout: values, which queues it names, and whether it names any queue
    outside the layout (no longer subscribed: carried along unchanged)."""

    def __init__(self, offsets: dict, layout: QueueLayout, values: np.ndarray, present: np.ndarray, extra: bool):
        self.offsets, self.layout = offsets, layout
        self.values, self.present, self.extra = values, present, extra


class OffsetDicts:
    """The offsets dicts seen lately, parsed."""

    def __init__(self) -> None:
        self._known: list[Parsed] = []

    def parse(self, offsets: Optional[dict], layout: QueueLayout) -> Parsed:
        offsets = offsets or {}
        for p in self._known:
            if p.layout is layout and (p.offsets is offsets or p.offsets == offsets):
                return p
        values = np.zeros(len(layout.queues), dtype=np.int64)
        present = np.zeros(len(layout.queues), dtype=bool)
        extra = False
        for q, off in from_offset_dict(layout.store, offsets).items():
            i = layout.index.get(q)
            if i is None:
                extra = True
            else:
                values[i], present[i] = off, True
        return self.remember(Parsed(offsets, layout, values, present, extra))

    def remember(self, parsed: Parsed) -> Parsed:
        self._known = [parsed] + [p for p in self._known if p.offsets is not parsed.offsets][:KNOWN_DICTS - 1]
        return parsed


def patched(store: LogReads, base: dict, queues: list, idx: np.ndarray, values: np.ndarray) -> dict:
    """base with queues[i] set to values[i] for i in idx (queues named as `store` names them): a new dict that
    shares base's topic dicts where nothing changed (base itself is never modified). Keys stay in to_offset_dict's
    order: a new queue or topic is sorted in, so Spark sees the same JSON for the same offsets."""
    out = dict(base)
    by_topic: dict[str, list[tuple]] = {}
    for i in idx.tolist():
        t, q = queues[i]
        by_topic.setdefault(t, []).append((q, int(values[i])))
    new_topic = False
    for t, items in by_topic.items():
        old = out.get(t)
        new_topic |= old is None
        inner = dict(old or {})
        added = False
        for q, v in items:
            k = store.queue_name(q)
            added |= k not in inner
            inner[k] = v
        if added:
            inner = dict(sorted(inner.items(), key=lambda kv: store.parse_queue(kv[0])))
        out[t] = inner
    return dict(sorted(out.items())) if new_topic else out
