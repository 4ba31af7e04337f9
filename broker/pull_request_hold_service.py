"""RocketMQ's PullRequestHoldService: a pull that found nothing waits here until a message for its queue is
dispatched or its suspendTimeoutMillis passes.

A held pull costs a future and a timer, nothing while it waits: appends through this broker wake the queue's
waiters at once (notify_message_arriving, called after the store dispatched them); appends by other processes on
the same store (the Spark sink, `rmq produce`) are seen by one watcher that compares the held queues' ends once a
second (RocketMQ's hold service re-checks every 5 s when long polling)."""
from __future__ import annotations

import asyncio

from store import MessageStore

OTHER_WRITERS_CHECK_S = 1.0


class PullRequestHoldService:
    def __init__(self, store: MessageStore):
        self.store = store
        self._waiting: dict[tuple[str, int], dict[asyncio.Future, int]] = {}  # queue -> held pull -> its offset

    @property
    def held(self) -> int:
        return sum(len(w) for w in self._waiting.values())

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
        """Wake every held pull (the broker is stopping: each is answered with what there is)."""
        for waiters in self._waiting.values():
            for fut in waiters:
                _wake(fut)

    def notify_message_arriving(self, topic: str, queue_id: int) -> None:
        for fut in self._waiting.get((topic, queue_id), {}):
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
