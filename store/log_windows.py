"""Several queues' offset ranges of one topic cut into windows of the log: the records of a window lie in one
stretch of the commitlog whatever their queue, so a reader of a window reads each page once (scan.scan_queues)
where readers of one queue each would map every page for their queue's few records in it."""
from __future__ import annotations

from typing import Sequence

import numpy as np

SAMPLES = 64  # units looked up per queue (fewer with many queues) to place the cuts; the cuts themselves are exact


def log_windows(store, topic: str, ranges: Sequence[tuple[int, int, int]], count: int
                ) -> list[list[tuple[int, int, int]]]:
    """(queue_id, start, end) ranges (a queue once each) as at most `count` windows, each a list of the
    (queue_id, start, end) pieces whose records lie in the window's stretch of the log (empty pieces left out,
    empty windows too). Every offset of every range is in exactly one window; the windows hold near-equal numbers
    of offsets. A range with nothing readable (below the queue's minimum: the reader reports the loss) stays whole
    in the first window."""
    ranges = [(int(q), int(s), int(e)) for q, s, e in ranges if e > s]
    if count <= 1 or len(ranges) < 2:
        return [ranges] if ranges else []
    per_queue = max(16, min(SAMPLES, 2048 // len(ranges)))  # a few thousand lookups at most, however many queues
    curves = []  # per readable range: (queue id, start, end, sampled queue offsets, their log positions, the cq)
    whole = []
    for qid, s, e in ranges:
        cq = store.find_consume_queue(topic, qid)
        lo, hi = max(s, cq.first_unit_offset()), min(e, cq.max_offset())
        sampled = np.unique(np.linspace(lo, hi - 1, per_queue).astype(np.int64)) if hi > lo else np.zeros(0, np.int64)
        phys = np.array([_position(cq, int(o)) for o in sampled.tolist()], dtype=np.int64)
        if len(phys) == 0 or (phys < 0).any() or (np.diff(phys) <= 0).any():
            whole.append((qid, s, e))  # nothing readable, or units not in log order: read as it is
            continue
        curves.append((qid, s, e, sampled, phys, cq))
    if len(curves) < 2:
        return [ranges]
    total = sum(int(c[3][-1] - c[3][0] + 1) for c in curves)
    count = min(count, max(1, total))
    cuts = _cuts(curves, total, count)
    windows: list[list[tuple[int, int, int]]] = [[] for _ in range(count)]
    for qid, s, e, sampled, phys, cq in curves:
        edges = [s] + [_offset_at(cq, sampled, phys, c) for c in cuts] + [e]
        for w, (a, b) in enumerate(zip(edges, edges[1:])):
            if b > a:
                windows[w].append((qid, a, b))
    windows[0][:0] = whole
    return [w for w in windows if w]


def _cuts(curves: list, total: int, count: int) -> list[int]:
    """The log positions where windows 2..count start: where about total * i / count of the ranges' units lie
    below, each queue's count below a position taken as linear between its samples (their sum is linear between
    any two samples of all queues, so it is evaluated there and interpolated)."""
    points = np.unique(np.concatenate([c[4] for c in curves]))
    below = np.zeros(len(points))
    for _, _, _, sampled, phys, _ in curves:
        below += np.interp(points, phys, sampled - sampled[0], left=0, right=sampled[-1] - sampled[0] + 1)
    wants = total * np.arange(1, count) / count
    j = np.searchsorted(below, wants, side="left")  # the first sample of all with at least `want` below
    cuts = []
    for want, k in zip(wants.tolist(), j.tolist()):
        if k == 0:
            cuts.append(int(points[0]))
        elif k == len(points):
            cuts.append(int(points[-1]) + 1)
        else:
            x0, x1, y0, y1 = points[k - 1], points[k], below[k - 1], below[k]
            cuts.append(int(np.ceil(x0 + (want - y0) * (x1 - x0) / (y1 - y0))) if y1 > y0 else int(x1))
    return cuts


def _position(cq, offset: int) -> int:
    unit = cq.units(offset, offset + 1)
    return int(unit["offset"][0]) if len(unit) and int(unit["size"][0]) > 0 else -1


def _offset_at(cq, sampled: np.ndarray, phys: np.ndarray, cut: int) -> int:
    """The first queue offset whose unit points at or past log position `cut`, found between the samples around
    it (one read of the units there)."""
    j = int(np.searchsorted(phys, cut, side="left"))
    if j == 0:
        return int(sampled[0])
    if j == len(phys):
        return int(sampled[-1]) + 1
    units = cq.units(int(sampled[j - 1]), int(sampled[j]) + 1)
    return int(sampled[j - 1]) + int(np.searchsorted(units["offset"], cut, side="left"))
