"""Long polling: RocketMQ's PullRequestHoldService (broker/longpolling), the broker's held pull requests.

A pull that finds nothing new is held until a message arrives in its queue or the timeout passes: its request
awaits a future of the event loop and costs nothing while it waits (the read loop is the store's HeldPull).
The broker's own appends wake the requests of their queue (notify_message_arriving); appends by other processes
are seen by re-reading the queues' ends once a second (watch_other_writers; RocketMQ's hold service re-checks
every 5 s when long polling).
"""
from __future__ import annotations

import asyncio
from typing import Optional

OTHER_WRITERS_CHECK_S = 1.0


class PullRequestHoldService:
    def __init__(self, store):
        self.store = store
        self._waiting: dict[tuple[str, int], dict[asyncio.Future, int]] = {}  # queue -> held request -> offset

    @property
    def held(self) -> int:
        """Requests held now."""
        return sum(len(w) for w in self._waiting.values())

    def waiting(self, topic: str, queue_id: Optional[int]) -> bool:
        """Whether a request is held on the queue (queue_id None: on any queue of the topic)."""
        if queue_id is not None:
            return bool(self._waiting.get((topic, queue_id)))
        return any(w and t == topic for (t, _), w in self._waiting.items())

    def notify_message_arriving(self, topic: str, queue_id: int) -> None:
        """After an append's consume-queue units are written: the held requests of the queue answer."""
        for fut in self._waiting.get((topic, queue_id), {}):
            _wake(fut)

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
