"""The store's `lock` file: the writers' lock across threads and processes, and the committed end it guards.

Writers serialise on a mutex and an flock of `lock` (re-entrant: the outermost holder takes and gives back the
file lock). The committed end lives in the same file (RocketMQ keeps nothing there; a broker ignores it): after
an append has written its commitlog bytes and then its consume-queue units, the writer stores the new end, with a
generation every writer's publication bumps. Everything before the end is complete and dispatched; a writer that
finds the end and generation it published last knows nobody appended since.
"""
from __future__ import annotations

import fcntl
import os
import struct
import threading
import zlib
from typing import Optional

_STATE = struct.Struct(">8sqqI")  # magic, committed end, generation, crc32 of the first 24 bytes
_STATE_MAGIC = b"RMQSPKWS"


class LockFile:
    """The `lock` file of the store at `path`. As a context manager, the write lock (a class, not a generator: it
    wraps every append, where @contextmanager's generator costs several times more)."""

    def __init__(self, path: str):
        self.path = os.path.join(path, "lock")
        self.fd: Optional[int] = None  # the writer's descriptor, opened by the first lock
        self.depth = 0  # how deep this process holds the write lock
        self.generation = 0  # of the committed end read or written last: bumped by every writer that publishes
        self.publishes = 0  # how many of those bumps were ours
        self.published_generation: Optional[int] = None
        self.published: Optional[tuple[bytes, int]] = None  # the state this writer wrote last, and its end
        self._mutex = threading.RLock()
        self._held_fd: Optional[int] = None  # the descriptor the outermost holder locked (close() may drop fd)
        self._read_fd: Optional[int] = None  # a reader's, for committed_end

    def __enter__(self) -> None:
        self._mutex.acquire()
        try:
            if self.depth == 0:
                if self.fd is None:
                    self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
                fcntl.flock(self.fd, fcntl.LOCK_EX)
                self._held_fd = self.fd
            self.depth += 1
        except BaseException:
            self._mutex.release()
            raise

    def __exit__(self, *exc) -> None:
        try:
            self.depth -= 1
            if self.depth == 0:  # re-entrant: only the outermost holder gives the file lock back
                fd, self._held_fd = self._held_fd, None
                assert fd is not None
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            self._mutex.release()

    def committed_end(self) -> Optional[int]:
        """The committed end, or None when the file is absent (a broker's store) or holds none that validates."""
        fd = self.fd
        if fd is None:
            if self._read_fd is None:
                try:
                    self._read_fd = os.open(self.path, os.O_RDONLY)
                except FileNotFoundError:
                    return None
            fd = self._read_fd
        raw = os.pread(fd, _STATE.size, 0)
        if len(raw) != _STATE.size:
            return None
        magic, end, generation, crc = _STATE.unpack(raw)
        if magic != _STATE_MAGIC or crc != zlib.crc32(raw[:24]) or end < 0:
            return None
        self.generation = generation
        return end

    def publish(self, end: int) -> None:
        """Store a new committed end (under the write lock)."""
        self.generation += 1
        self.publishes += 1
        self.published_generation = self.generation
        head = struct.pack(">8sqq", _STATE_MAGIC, end, self.generation)
        assert self.fd is not None  # published only under the write lock
        state = head + struct.pack(">I", zlib.crc32(head))
        self.published = None  # until written whole
        os.pwrite(self.fd, state, 0)
        self.published = (state, end)

    def others_were_here(self) -> bool:
        """Whether another writer published since our last publication (as of the last committed_end read)."""
        return self.generation != self.published_generation

    def close(self) -> None:
        """Close the descriptors (not under the write lock: its holder keeps the one it locked)."""
        for fd in (self.fd, self._read_fd):
            if fd is not None:
                os.close(fd)
        self.fd = self._read_fd = None
