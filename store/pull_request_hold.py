"""Long polling: RocketMQ's PullRequestHoldService, one per MessageStore.

A pull that finds nothing new is held until a message arrives in its queue or the timeout passes, by one loop
(HeldPull) for both kinds of waiter: a thread in get_message(suspend_timeout_ms=...) blocks on a condition shared
by every MessageStore object over the same directory; the broker's pull request awaits a future of the event loop
and costs nothing while it waits. Appends in this process wake both at once (notify_message_arriving); appends by
other processes are seen by re-reading the consume queue's end: every few milliseconds by a blocked thread (one
directory listing and a few bytes of the mapped last file, no lock), once a second for the held requests
(watch_other_writers; RocketMQ's hold service re-checks every 5 s when long polling).
"""
from __future__ import annotations

import asyncio
import threading
import time
from typing import Callable, Optional

from .get_message_result import GetMessageResult, GetMessageStatus

POLL_INTERVAL_S = 0.005  # a blocked thread's check of the consume-queue end (appends by other processes)
OTHER_WRITERS_CHECK_S = 1.0  # the same for held requests

_conditions: dict[str, threading.Condition] = {}
_registry_lock = threading.Lock()

# Statuses after which RocketMQ's broker suspends the pull (PULL_NOT_FOUND)
_EMPTY = (GetMessageStatus.NO_MESSAGE_IN_QUEUE, GetMessageStatus.OFFSET_OVERFLOW_ONE)


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
        if status not in _EMPTY:
            return None
        remaining = self.deadline - time.monotonic()
        return remaining if remaining > 0 else None

    def answer(self, result: GetMessageResult) -> GetMessageResult:
        if self.scanned and result.status != GetMessageStatus.FOUND:
            result.status, result.next_begin_offset = GetMessageStatus.NO_MATCHED_MESSAGE, self.offset
        return result


class PullRequestHoldService:
    def __init__(self, store):
        self.store = store
        self._cond = _condition_for(store.path)
        self._waiting: dict[tuple[str, int], dict[asyncio.Future, int]] = {}  # queue -> held request -> offset

    @property
    def held(self) -> int:
        """Requests held now (the broker's)."""
        return sum(len(w) for w in self._waiting.values())

    def waiting(self, topic: str, queue_id: Optional[int]) -> bool:
        """Whether a request is held on the queue (queue_id None: on any queue of the topic)."""
        if queue_id is not None:
            return bool(self._waiting.get((topic, queue_id)))
        return any(w and t == topic for (t, _), w in self._waiting.items())

    def notify_message_arriving(self, topic: Optional[str] = None, queue_id: Optional[int] = None) -> None:
        """After an append's consume-queue units are written: blocked threads wake (they re-check their queue),
        and the held requests of the queue, when named."""
        with self._cond:
            self._cond.notify_all()
        if topic is not None:
            for fut in self._waiting.get((topic, queue_id), {}):  # type: ignore[arg-type]
                _wake(fut)

    # -- a thread's blocking wait (get_message with suspend_timeout_ms) -------------------------------------------

    def wait(self, topic: str, queue_id: int, offset: int, timeout_s: float) -> None:
        """Return when the queue has a message at `offset` or past it, or after timeout_s."""
        cq = self.store.consume_queue(topic, queue_id)
        deadline = time.monotonic() + timeout_s
        while cq.max_offset() <= offset:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            with self._cond:
                self._cond.wait(min(POLL_INTERVAL_S, remaining))

    # -- the broker's held requests -------------------------------------------------------------------------------

    async def suspend(self, topic: str, queue_id: int, offset: int, timeout_s: float) -> None:
        """Return when a message past `offset` may have arrived in the queue, or after timeout_s. Cancelled with
        its request (a client that disconnects leaves nothing behind)."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        key = (topic, queue_id)
        waiters = self._waiting.setdefault(key, {})
        waiters[fut] = offset
        timer = loop.call_later(timeout_s, _wake, fut)
        try:
            await fut
        finally:
            timer.cancel()
            waiters.pop(fut, None)
            if not waiters and self._waiting.get(key) is waiters:
                del self._waiting[key]

    def release_all(self) -> None:
        """Wake every held request (the broker is stopping: each is answered with what there is)."""
        for waiters in self._waiting.values():
            for fut in waiters:
                _wake(fut)

    async def watch_other_writers(self) -> None:
        while True:
            await asyncio.sleep(OTHER_WRITERS_CHECK_S)
            for (topic, queue_id), waiters in list(self._waiting.items()):
                if not waiters:
                    continue
                end = self.store.max_offset(topic, queue_id)
                if any(end > offset for offset in waiters.values()):
                    self.notify_message_arriving(topic, queue_id)


def _wake(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)


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
            if result.status in _EMPTY:  # timed out
                result.status, result.next_begin_offset = GetMessageStatus.NO_MESSAGE_IN_QUEUE, held.offset
            return held.answer(result)
        if wait_s:
            store.pull_request_hold.wait(topic, queue_id, held.offset, wait_s)
