"""How much of each queue's backlog one microbatch takes (maxMessagesPerTrigger, maxBytesPerTrigger)."""
from __future__ import annotations

import numpy as np

from rmq_log.reads import LogReads

# The smallest possible commitlog record (empty body, 1-byte topic, no properties, IPv4 hosts) is 91 bytes,
# so a byte budget of B never needs more than B // 91 + 1 consume-queue units to be looked at.
MIN_RECORD_SIZE = 91


def split_by_backlog(backlog: np.ndarray, limit: int) -> np.ndarray:
    """Messages to take per queue: `limit` shared in proportion to each queue's backlog, at least one from every
    queue that has any (so a small queue is never starved by a large one; with fewer allowed than there are
    such queues, that minimum wins over the limit), never more than a queue has."""
    backlog = np.asarray(backlog, dtype=np.int64)
    total = int(backlog.sum())
    if total <= limit:
        return backlog.copy()
    share = backlog * (limit / total)
    take = np.minimum(np.maximum(np.floor(share).astype(np.int64), (backlog > 0).astype(np.int64)), backlog)
    diff = limit - int(take.sum())
    if diff > 0:
        # Largest remainders first; the floors leave fewer than one message per queue to hand out.
        order = np.argsort(-(share - np.floor(share)), kind="stable")
        order = order[(backlog - take)[order] > 0][:diff]
        take[order] += 1
    while diff < 0 and (take > 1).any():
        # The at-least-one bumps went over: take them back from the largest shares (few queues, few steps).
        i = int(np.argmax(np.where(take > 1, take - share, -np.inf) + np.where(take > 1, take, 0) * 1e-9))
        take[i] -= 1
        diff += 1
    return take


def limit_by_bytes(store: LogReads, queues: list, begins: np.ndarray, takes: np.ndarray,
                   max_bytes: int) -> np.ndarray:
    """Cut each queue's take so that the batch's commitlog bytes stay within max_bytes, shared by backlog;
    at least one message per queue with a backlog. Record sizes come from the consume queue (record_sizes)."""
    takes = np.asarray(takes, dtype=np.int64).copy()
    total = int(takes.sum())
    if total == 0:
        return takes
    budgets = np.maximum(np.floor(takes * (max_bytes / total)).astype(np.int64), 1)
    for i in np.flatnonzero(takes).tolist():  # only queues with something to take: there may be many others
        topic, queue = queues[i]
        n = min(int(takes[i]), int(budgets[i]) // MIN_RECORD_SIZE + 1)
        stored = store.record_sizes(topic, queue, int(begins[i]), int(begins[i]) + n)
        if stored is None:
            continue  # sizes not known: the take stays as rows limit it
        sizes = np.cumsum(stored)
        fit = int(np.searchsorted(sizes, budgets[i], side="right"))
        takes[i] = max(1, min(fit, int(takes[i])))
    return takes
