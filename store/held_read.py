"""A read held until a message arrives (getMessage with a suspend timeout), and the signal appends give it.

HeldPull is the held read's loop, read by read, for both kinds of waiter: a thread in
MessageStore.get_message(suspend_timeout_ms=...) blocks here on a condition shared by every MessageStore object over
the same directory (ArrivalSignal); the broker's held pull requests (rmq_broker/long_polling.py, RocketMQ's
PullRequestHoldService) await futures of its event loop with the same loop. Appends in this process wake the
blocked threads at once (ArrivalSignal.notify); appends by other processes are seen by re-reading the consume
queue's end every few milliseconds (one directory listing and a few bytes of the mapped last file, no lock).
"""
from __future__ import annotations

import threading
import time
from typing import Callable, Optional

from .get_message_result import GetMessageResult, GetMessageStatus

POLL_INTERVAL_S = 0.005  # a blocked thread's check of the consume-queue end (appends by other processes)

_conditions: dict[str, threading.Condition] = {}
_registry_lock = threading.Lock()

# Statuses after which RocketMQ's broker suspends the pull (PULL_NOT_FOUND)
EMPTY = (GetMessageStatus.NO_MESSAGE_IN_QUEUE, GetMessageStatus.OFFSET_OVERFLOW_ONE)


def _condition_for(path: str) -> threading.Condition:
    with _registry_lock:
        cond = _conditions.get(path)
        if cond is None:
            cond = _conditions[path] = threading.Condition()
        return cond


class HeldPull:
    """The held pull's loop, read by read: `wait_s(result)` after each read says how long to wait for an arrival
    past `offset` before reading again from `offset` (0: read on at once; None: the result is the answer). A
    filter that matched nothing up to the end of the queue waits from past what it scanned, so the client is not
    sent every non-matching message; `answer` then reports NO_MATCHED_MESSAGE with next_begin_offset past them."""

    def __init__(self, offset: int, timeout_s: float):
        self.offset = offset
        self.deadline = time.monotonic() + timeout_s
        self.scanned = False

    def wait_s(self, result: GetMessageResult) -> Optional[float]:
        status = result.status
        if status == GetMessageStatus.NO_MATCHED_MESSAGE:
            self.scanned, self.offset = True, result.next_begin_offset
            if self.offset < result.max_offset:
                return 0.0  # the scan stopped at its limit: more to look at, no need to wait
            status = GetMessageStatus.OFFSET_OVERFLOW_ONE
        if status not in EMPTY:
            return None
        remaining = self.deadline - time.monotonic()
        return remaining if remaining > 0 else None

    def answer(self, result: GetMessageResult) -> GetMessageResult:
        if self.scanned and result.status != GetMessageStatus.FOUND:
            result.status, result.next_begin_offset = GetMessageStatus.NO_MATCHED_MESSAGE, self.offset
        return result


class ArrivalSignal:
    """What a store's appends tell the threads blocked in a held read of the same directory (RocketMQ's
    MessageArrivingListener, for this process's readers)."""

    def __init__(self, path: str):
        self._cond = _condition_for(path)

    def notify(self) -> None:
        """After an append's consume-queue units are written: blocked threads wake and re-check their queue."""
        with self._cond:
            self._cond.notify_all()

    def wait(self, store, topic: str, queue_id: int, offset: int, timeout_s: float) -> None:
        """Return when the queue has a message at `offset` or past it, or after timeout_s."""
        cq = store.consume_queue(topic, queue_id)
        deadline = time.monotonic() + timeout_s
        while cq.max_offset() <= offset:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            with self._cond:
                self._cond.wait(min(POLL_INTERVAL_S, remaining))


def get_message_held(store, read: Callable[[int], GetMessageResult], topic: str, queue_id: int, offset: int,
                     suspend_timeout_ms: int) -> GetMessageResult:
    """A read held up to suspend_timeout_ms in this thread. Returns as soon as something is FOUND (or a status that
    waiting cannot change, such as OFFSET_TOO_SMALL); on timeout returns NO_MESSAGE_IN_QUEUE when nothing arrived,
    NO_MATCHED_MESSAGE when messages arrived but none passed the filter, with next_begin_offset past everything
    scanned."""
    held = HeldPull(offset, suspend_timeout_ms / 1000.0)
    while True:
        result = read(held.offset)
        wait_s = held.wait_s(result)
        if wait_s is None:
            if result.status in EMPTY:  # timed out
                result.status, result.next_begin_offset = GetMessageStatus.NO_MESSAGE_IN_QUEUE, held.offset
            return held.answer(result)
        if wait_s:
            store.message_arrival.wait(store, topic, queue_id, held.offset, wait_s)
