"""SYNC_FLUSH's group commit (RocketMQ's GroupCommitService): a send waits here for the fsync that covers its
record instead of making one of its own; one fsync, in a worker thread while the event loop goes on appending,
serves every send appended before it started. No SEND_OK goes out before its record is on disk."""
from __future__ import annotations

import asyncio
from typing import Optional


class GroupCommitService:
    def __init__(self, store):
        self.store = store
        self._flushing: Optional[asyncio.Future] = None

    async def wait(self, offset: int) -> None:
        """Return once the commitlog is fsynced past offset (a byte of a record appended with defer_flush)."""
        while self.store.synced_end < offset:
            if self._flushing is None or self._flushing.done():
                self._flushing = asyncio.get_running_loop().run_in_executor(None, self.store.sync_to, offset)
            await asyncio.shield(self._flushing)
