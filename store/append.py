"""The store's one write path (RocketMQ's CommitLog.putMessage and putMessages with their AppendMessageCallback):
records planned before the write lock are placed, written to the commitlog, dispatched to their consume queues,
indexed, and committed, under it.

What differs between puts is in the records handed in, each kind in the module that builds it: put_one.OneRecords
(single messages, each record built whole and patched with its place), put_message_batch.MessageBatches (clients'
MessageBatch bodies, encoded once placed), put_batch.PlannedBatch (put_batch's columns, encoded while written,
free to roll commitlog files; transaction halves and atomic batches are flags of its plan). Each answers
`place(appender, write_pos, store_ts)` with a Placement, or None when the records must take another way.

The order is what makes a crash at any point safe: the commitlog bytes first, then the consume-queue units (a
reader never sees a unit before its record), then the committed end in the `lock` file (everything before it is
complete and dispatched; recovery walks from there).
"""
from __future__ import annotations

import random
import threading
import time
from typing import Callable, NamedTuple, Optional, Union

import numpy as np

from rmq_common import message_codec as codec
from rmq_common.compiled import _encode

from .consume_queue import UnitWrites
from .delay_levels import SCHEDULE_TOPIC, deliver_times
from .errors import disk_full_named
from .mapped_file import MappedFile, fsync_path
from .store_config import SYNC_FLUSH
from .topic_config import TopicConfig


class Placement(NamedTuple):
    """Where planned records go, and what to write and answer (Records.place)."""
    end: int                 # the log end after them
    positions: np.ndarray    # each record's commitlog offset, ascending
    runs: list               # (topic, queue id, first queue offset, first unit, count) per queue written
    units: Union[np.ndarray, Callable[[], np.ndarray]]  # their consume-queue units, by run; or made on demand
    results: object          # what the put answers: PutResults, or a PutBatchResult per batch
    data: Optional[Union[bytes, bytearray]]  # the records back to back, for the current file; None: encoder's
    encoder: object = None   # record_encoder.new_encoder's, and its CommitLog.plan segments (files may roll)
    segments: Optional[list] = None


class Appender:
    """One store's writer state and its append, used under the store's write lock."""

    def __init__(self, store):
        self.store = store
        self.write_pos: Optional[int] = None
        # Each consume queue's end as our last append left it, while no other writer has been here since (an
        # append then asks no queue for its end); emptied whenever sync() finds anything changed.
        self.queue_ends: dict[tuple[str, int], int] = {}
        self.round_robin: dict[str, int] = {}  # topic -> its next round-robin queue
        self.dirty_queues: set = set()  # written since the last checkpoint flush
        self.last_store_ts: Optional[int] = None  # of our newest append not yet covered by the checkpoint
        self.last_checkpoint_flush = 0.0
        # defer_index: index entries that wait for flush_index(), so that one pass indexes many sends (RocketMQ's
        # broker builds them in its reput thread, after the put has returned); an index read, an append that
        # indexes at once and close() write them first
        self.index_pending: list[np.ndarray] = []  # the positions of records not indexed yet
        self.index_span: Optional[tuple[int, int]] = None  # the log range they lie in
        # SYNC_FLUSH group commit (sync_to): commitlog files deferred appends wrote, not fsynced yet
        self.unsynced: set[str] = set()
        self.unsynced_lock = threading.Lock()
        self.flush_lock = threading.Lock()
        self.deferred_end = 0
        self.synced_end = 0

    # -- the append ------------------------------------------------------------------------------------------

    def append(self, records, defer_flush: bool = False, on_written: Optional[Callable] = None,
               defer_index: bool = False):
        """Append planned records (see the module's doc): the records' answer, or None, with nothing written, when
        they must take another way (a queue id outside its topic's write queues, records that would roll the
        commitlog file and cannot). defer_flush under SYNC_FLUSH: the records are not fsynced here; the caller
        calls sync_to before it tells anyone they are stored (a group commit). on_written(answer): called once
        the records are in the commitlog, before their consume-queue units and index entries (RocketMQ answers a
        send there, and dispatches after); should a later step fail, the next writer dispatches the records.
        defer_index: the index entries wait for flush_index()."""
        store = self.store
        commit_log = store.commit_log
        at_end = _file_at_end(self, records.lone, defer_flush)
        write_pos = self.sync() if at_end is None else at_end[1]
        store_ts = int(time.time() * 1000)
        placed = records.place(self, write_pos, store_ts)
        if placed is None:
            return None
        sync = store.config.flushDiskType == SYNC_FLUSH
        written: Optional[MappedFile] = None
        if at_end is not None:
            if not _write_at_end(self, at_end[0], write_pos, placed.data):
                return self.append(records, defer_flush, on_written, defer_index)  # another writer was here
            written = at_end[0]
        else:
            with disk_full_named(commit_log.directory, f"the commitlog; nothing of this {records.noun} was "
                                 "acknowledged"):
                if placed.data is None:
                    commit_log.write(placed.segments, placed.encoder, placed.encoder.batch.sizes, sync=sync)
                else:
                    written = commit_log.append_record(write_pos, placed.data, sync=sync and not defer_flush,
                                                       new_file_sync=sync)
                    if written is None:
                        return None
        end = placed.end
        if sync and defer_flush and written is not None:
            with self.unsynced_lock:
                self.unsynced.add(written.path)
                self.deferred_end = end
        self.write_pos = end
        if on_written is not None:
            on_written(placed.results)
        self._dispatch(placed, store_ts, records.units_full)
        if defer_index:
            self._defer_index(placed.positions, write_pos, end)
        else:
            self.flush_index()  # entries in log order
            store.index.index_records(placed.positions, write_pos, end)  # never fails the append
        # Last: the committed end. Everything before it is complete and dispatched.
        self.publish(end)
        self.last_store_ts = store_ts
        self.flush_checkpoint()
        if placed.runs:
            store.message_arrival.notify()
        return placed.results

    def _dispatch(self, placed: Placement, store_ts: int, units_full: str) -> None:
        """Dispatch ("reput"): the records' consume-queue units, each queue's run in one write."""
        store = self.store
        units = placed.units() if callable(placed.units) else placed.units
        writes = UnitWrites(units)
        queues = []
        for topic, queue_id, queue_offset, first, count in placed.runs:
            if topic == SCHEDULE_TOPIC:  # a delayed message's tagsCode is the time it is due
                units["tags_code"][first:first + count] = deliver_times(queue_id, store_ts, store._delays_ms)
            cq = store.consume_queue(topic, queue_id)
            writes.add(cq, queue_offset, first, count)
            queues.append((cq, queue_offset + count))
        with disk_full_named(store._consume_queue_dir, units_full):
            writes.flush()
        for cq, queue_end in queues:
            cq.written_to(queue_end)
            self.queue_ends[(cq.topic, cq.queue_id)] = queue_end
            self.dirty_queues.add(cq)

    def publish(self, end: int) -> None:
        """The new log end, committed (LockFile.publish): everything before it is complete and dispatched."""
        self.write_pos = end
        self.store.lock_file.publish(end)

    def sync(self) -> int:
        """Bring this process's idea of the log end up to date and return it, where the next append goes: the
        usual case reads only the committed end; anything else takes recovery's walk."""
        store = self.store
        committed = store.lock_file.committed_end()
        if committed is not None and committed == self.write_pos and \
                store.commit_log.nothing_written_at(committed):
            # nobody appended since our last append, and nothing lies past the end
            if store.lock_file.others_were_here():
                self.queue_ends.clear()  # another writer was here (a cut, say): ask the queues again
            return committed
        return store._recovery.catch_up()

    # -- what placing records asks -------------------------------------------------------------------------------

    def topic_for_write(self, topic: str) -> TopicConfig:
        """The topic's config, the topic created with the default queue count on its first write."""
        store = self.store
        config = store.topic_config.table.get(topic)
        return config if config is not None else store._create_topic_locked(topic,
                                                                            store.config.defaultTopicQueueNums)

    def queue_end(self, topic: str, queue_id: int) -> int:
        """Where a queue's next unit goes (our own last append's end while no other writer has been here, else
        the queue's max offset)."""
        end = self.queue_ends.get((topic, queue_id))
        return self.store.consume_queue(topic, queue_id).max_offset() if end is None else end

    def take_round_robin(self, topic: str, nq: int, count: int) -> int:
        """The topic's next round-robin queue, moved on by count. A first append starts at random, like a
        producer, so processes spread out."""
        start = self.round_robin.get(topic)
        if start is None:
            start = random.randrange(nq)
        self.round_robin[topic] = int((start + count) % nq)
        return start

    # -- the index -------------------------------------------------------------------------------------------

    def _defer_index(self, positions: np.ndarray, write_pos: int, end: int) -> None:
        span = self.index_span
        if span is not None and span[1] != write_pos:  # not contiguous (another writer was here): those first
            self.flush_index()
            span = None
        self.index_pending.append(positions)
        self.index_span = (write_pos if span is None else span[0], end)
        if len(self.index_pending) >= 256:
            self.flush_index()

    def flush_index(self) -> None:
        """Write the index entries defer_index held back (under the write lock)."""
        pending, span = self.index_pending, self.index_span
        if not pending or span is None:
            return
        store = self.store
        self.index_pending, self.index_span = [], None
        store.lock_file.committed_end()  # the generation now: another writer's appends since ours move it
        if store.lock_file.others_were_here():
            store.index.index_caught_up(span[0], span[1])
            return
        positions = pending[0] if len(pending) == 1 else np.concatenate(pending)
        store.index.index_records(positions, span[0], span[1])  # never fails

    # -- durability ------------------------------------------------------------------------------------------

    def sync_to(self, offset: int) -> int:
        """SYNC_FLUSH's group commit (RocketMQ's GroupCommitService): fsync the commitlog files that deferred
        appends wrote, once for every append made so far, so that everything below offset is on disk; the end so
        made durable. Thread-safe: the broker calls it from a worker thread while its event loop appends."""
        with self.flush_lock:
            if self.synced_end >= offset:
                return self.synced_end
            with self.unsynced_lock:
                paths = list(self.unsynced)
                self.unsynced.clear()
                end = self.deferred_end
            for path in paths:  # through a descriptor of its own: fsync flushes the file, whichever wrote it
                fsync_path(path)
            # every append before this call was fsynced here (deferred) or by itself (the others)
            self.synced_end = max(self.synced_end, end, offset)
            return self.synced_end

    def flush_checkpoint(self, force: bool = False) -> None:
        """At most once a second (RocketMQ flushes every 500 ms): fsync the commitlog's last files and the
        consume queues this process wrote, and only then stamp the checkpoint with the newest record so
        flushed. The stamp is the safe point a crash recovery starts from, so it must never run ahead of what
        is on disk."""
        store = self.store
        now = time.monotonic()
        if force or now - self.last_checkpoint_flush > store.topic_config.PERSIST_WINDOW_S:
            store.topic_config.flush(force)  # topics created within the last persist window
        if not (force or now - self.last_checkpoint_flush > 1.0):
            return
        stamp = self.last_store_ts
        flush_service = store._flush_service
        if stamp is not None and not force and flush_service is not None:
            paths = [f.path for f in store.commit_log.files.files[-2:]]
            paths += [f.path for cq in self.dirty_queues for f in cq.files.files[-2:]]
            if flush_service.submit(paths, stamp, self.write_pos):
                self.dirty_queues.clear()
                self.last_store_ts = None
                self.last_checkpoint_flush = now
            return
        if stamp is not None:
            checkpoint = store.checkpoint
            store.commit_log.flush()
            for cq in self.dirty_queues:
                cq.flush()
            self.dirty_queues.clear()
            checkpoint.physic_msg_timestamp = max(checkpoint.physic_msg_timestamp, stamp)
            checkpoint.logics_msg_timestamp = max(checkpoint.logics_msg_timestamp, stamp)
            if self.write_pos is not None:
                checkpoint.flushed_offset = max(checkpoint.read_flushed_offset() or 0, self.write_pos)
            self.last_store_ts = None
            checkpoint.flush()
        self.last_checkpoint_flush = now


# A lone record is written where this writer's last append ended, checked and written in one compiled call
# (append_at_end), without reading the committed end first, while no other writer has been here since. Chosen
# once: without the compiled encoder every append reads the committed end.

def _file_at_end_compiled(appender: Appender, size: Optional[int],
                          defer_flush: bool) -> Optional[tuple[MappedFile, int]]:
    """The commitlog file and offset where this writer's last append ended, when a lone record of `size` bytes
    fits in it and may be written there without reading the committed end first; else None."""
    store = appender.store
    published = store.lock_file.published
    if size is None or published is None or published[1] != appender.write_pos or store.lock_file.fd is None or \
            (store.config.flushDiskType == SYNC_FLUSH and not defer_flush):
        return None
    pos = published[1]
    commit_log = store.commit_log
    f = commit_log.files.find(pos)
    if f is None or pos - f.file_from_offset + size > commit_log.file_size - codec.END_FILE_MIN_BLANK_LENGTH:
        return None
    return f, pos


def _write_at_end_compiled(appender: Appender, f: MappedFile, write_pos: int, record) -> bool:
    """Whether the record was written at write_pos in f (_file_at_end's): the `lock` file still holds the
    committed end this writer published last and nothing lies at write_pos (what sync's usual case checks);
    False, with nothing written, when another writer was here."""
    store = appender.store
    lock_file = store.lock_file
    assert lock_file.published is not None and lock_file.fd is not None
    rel = write_pos - f.file_from_offset
    f.pin()
    try:
        with disk_full_named(store.commit_log.directory, "the commitlog; nothing of this message was acknowledged"):
            store.commit_log._allocate(f, rel, rel + len(record))
            if not _encode.append_at_end(lock_file.fd, lock_file.published[0], f._open_fd(), rel, record):
                lock_file.published = None
                return False
    finally:
        f.unpin()
    return True


def _never_at_end(appender: Appender, size: Optional[int], defer_flush: bool) -> None:
    return None


def _no_write_at_end(appender: Appender, f: MappedFile, write_pos: int, record) -> bool:
    raise AssertionError("no record is written at the end without the compiled encoder")


_file_at_end = _file_at_end_compiled if _encode is not None else _never_at_end
_write_at_end = _write_at_end_compiled if _encode is not None else _no_write_at_end
