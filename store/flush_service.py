"""RocketMQ's FlushRealTimeService for a long-running writer (the broker): the once-a-second fsync of what this
process appended (the commitlog's last files, the consume queues it wrote) and then the checkpoint's stamp, from
a thread of its own, so that no append waits for the disk under ASYNC_FLUSH and the fsync runs on the other core.
The append hands over the files and the stamp under the write lock (Appender.flush_checkpoint); the stamp
is written only after those files were fsynced, so the checkpoint never runs ahead of what is on disk."""
from __future__ import annotations

import logging
import threading
from typing import Optional

from .mapped_file import fsync_path

log = logging.getLogger(__name__)


class FlushService:
    def __init__(self, store):
        self.store = store
        self.flushes = 0
        self._job: Optional[tuple] = None
        self._stopping = False
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"flush {store.path}", daemon=True)
        self._thread.start()

    def submit(self, paths: list, stamp: int, write_pos: Optional[int]) -> bool:
        """fsync paths, then stamp the checkpoint with stamp (the newest record's store time) and write_pos (the
        flushed offset). False when the previous round is still under way: the caller keeps its state and
        submits again at a later append."""
        if self._job is not None or self._stopping:
            return False
        self._job = (paths, stamp, write_pos)
        self._wake.set()
        return True

    def stop(self) -> None:
        """Finish the round under way and end the thread (not under the write lock: the round takes it)."""
        self._stopping = True
        self._wake.set()
        self._thread.join()

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            job = self._job
            if job is not None:
                try:
                    self._flush(*job)
                except Exception as e:  # the next round, or close()'s own flush, stamps the checkpoint
                    log.error("store %s: background flush failed: %s", self.store.path, e)
                finally:
                    self._job = None
            if self._stopping:
                return

    def _flush(self, paths: list, stamp: int, write_pos: Optional[int]) -> None:
        for path in paths:
            try:
                fsync_path(path)
            except FileNotFoundError:  # removed by retention since: nothing left to flush
                pass
        store = self.store
        cp = store.checkpoint
        with store.write_lock():
            cp.physic_msg_timestamp = max(cp.physic_msg_timestamp, stamp)
            cp.logics_msg_timestamp = max(cp.logics_msg_timestamp, stamp)
            if write_pos is not None:
                cp.flushed_offset = max(cp.read_flushed_offset() or 0, write_pos)
            cp.flush(sync=False)
        fsync_path(cp.path)  # outside the lock: appends go on meanwhile
        self.flushes += 1
