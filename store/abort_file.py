"""RocketMQ's abort file: present while the store is open, removed by the last process to close it cleanly.

Every open store holds a shared flock on it; finding it with nobody holding that lock means the last user stopped
uncleanly, and the open recovers as after a crash. Both ends run under the store's write lock: flock cannot turn
a shared lock into an exclusive one atomically, so without the write lock an opener could slip into that gap,
think itself alone and run a crash recovery beside a live writer, or a closer could remove the file under a new
opener.
"""
from __future__ import annotations

import fcntl
import os
from typing import Optional

from .mapped_file import fsync_path


class AbortFile:
    def __init__(self, store_path: str):
        self.store_path = store_path
        self.path = os.path.join(store_path, "abort")
        self.fd: Optional[int] = None

    def open(self) -> bool:
        """Hold the file (created if absent); whether the last user stopped uncleanly."""
        existed = os.path.exists(self.path)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            alone = True
        except BlockingIOError:
            alone = False
        fcntl.flock(self.fd, fcntl.LOCK_SH)
        if not existed:
            fsync_path(self.store_path)  # the abort file must outlive a power loss to trigger recovery
        return existed and alone

    def close(self, clean: bool) -> None:
        """Give the file back; clean: a clean stop, and the file is removed when nobody else holds it."""
        if self.fd is None:
            return
        if clean:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                os.remove(self.path)  # last one out: a clean stop
            except (BlockingIOError, FileNotFoundError):
                pass
        os.close(self.fd)
        self.fd = None
