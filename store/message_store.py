"""MessageStore: RocketMQ's DefaultMessageStore for one process among many, over one store directory."""
from __future__ import annotations

import logging
import os
import shutil
from contextlib import contextmanager
from typing import Callable, Iterator, Optional, Sequence

import numpy as np
import pyarrow as pa

from rmq_common import message_codec as codec

from . import file_sizes
from .abort_file import AbortFile
from .append import Appender
from .commit_log import CommitLog
from .consume_queue import ConsumeQueue
from .delay_levels import parse_delay_levels
from .errors import (
    ReadOnlyStoreError,
    UnknownTopicError,
    disk_full_named,
)
from .file_sizes import STORE_MARKER
from .flush_service import FlushService
from .get_message import get_message_records
from .get_message_result import GetMessageResult, PutResult
from .held_read import ArrivalSignal, get_message_held
from .index_service import IndexService
from .json_file import load_rocketmq_json, persist_config_json
from .lock_file import LockFile
from .put_batch import PlannedBatch, PutBatchResult, build_batch
from .put_message_batch import MessageBatches, plan_all, plan_message_batch, put_batches_one_by_one
from .put_one import OneRecord, OneRecords, build_many, build_one, put_one_by_one
from .query_message import query_message, query_records
from .queue_bounds import QueueBounds, QueueBoundsTracker
from .recovery import Recovery
from .store_checkpoint import StoreCheckpoint
from .store_config import StoreConfig
from .topic_config import TopicConfig, TopicConfigManager, discover_consume_queues

log = logging.getLogger(__name__)

DELETED_TOPICS_FILE = os.path.join("config", "deletedTopics.json")


def _total_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 8 << 30


class MessageStore:
    """RocketMQ's DefaultMessageStore: the face of one store directory over its CommitLog (commit_log.py), consume
    queues (consume_queue.py), index (index_service.py) and checkpoint, for this process among others that open
    the same directory. Writes go through the one append (append.py) under the `lock` file's lock
    (lock_file.py); an open recovers first (recovery.py); reads take no lock."""

    def __init__(self, path, config: StoreConfig | str | os.PathLike | None = None, read_only: bool = False,
                 recover_truncate: bool = False, topic_config_problems: Optional[list] = None):
        """recover_truncate=True: let this open's recovery cut the commitlog where it is damaged even when
        messages that validate lie after the damage, or when the checkpoint says they had been flushed (the
        open refuses with StoreRecoveryError otherwise, saying how many messages the cut would drop).
        topic_config_problems: a list that receives what is wrong with an unreadable config/topics.json (and
        its .bak) instead of a TopicConfigError; the topics then come from consumequeue/ (for checkers)."""
        self.path = os.path.abspath(os.fspath(path))
        self._consume_queue_dir = os.path.join(self.path, "consumequeue")  # named by every append's disk-full guard
        if config is None:
            config = StoreConfig()
        elif not isinstance(config, StoreConfig):
            config = StoreConfig.from_file(config)
        self.read_only = read_only
        if os.path.exists(self.path) and not os.path.isdir(self.path):
            raise NotADirectoryError(f"store path {self.path} is a file, not a store directory")
        if read_only:
            if not os.path.isdir(self.path):
                raise FileNotFoundError(f"store directory {self.path} does not exist")
        else:
            for sub in ("commitlog", "consumequeue", "config"):
                os.makedirs(os.path.join(self.path, sub), exist_ok=True)
            if not os.listdir(os.path.join(self.path, "commitlog")):
                open(os.path.join(self.path, STORE_MARKER), "a").close()
        self.config, self._sizes_known = file_sizes.adopt_sizes(self.path, config, read_only)
        self.lock_file = LockFile(self.path)  # the write lock, and the committed end
        self._abort = AbortFile(self.path)
        self._closed = False
        self._flush_service: Optional[FlushService] = None
        self.commit_log = CommitLog(self.path, self.config.mappedFileSizeCommitLog, writable=not read_only)
        self.topic_config = TopicConfigManager(self.path, topic_config_problems)
        self._queues: dict[tuple[str, int], ConsumeQueue] = {}
        self.appender = Appender(self)  # the write path and its state
        self._bounds = QueueBounds(self)
        self._retention_mark: Optional[tuple[int, int]] = None  # (generation, our publishes) at the last retention
        self.store_host = (codec.local_host_address(), self.config.listenPort)
        if self.config.brokerIP1:
            self.store_host = codec.parse_host((self.config.brokerIP1, self.config.listenPort))
        self._memory_limit = _total_memory() * self.config.accessMessageInMemoryMaxRatio // 100
        self._delays_ms = parse_delay_levels(self.config.messageDelayLevel)
        self.stats = {"consume_queue_units_scanned": 0, "commit_log_records_read": 0}
        self.checkpoint = StoreCheckpoint(os.path.join(self.path, "checkpoint"), writable=not read_only)
        self.message_arrival = ArrivalSignal(self.path)  # wakes this process's held reads of the directory
        self.min_offset_cache: dict[tuple[str, int], tuple[int, float]] = {}  # queue -> (min offset, when read)
        self.index = IndexService(self)
        self._recovery = Recovery(self, recover_truncate)
        if not read_only:
            try:
                with self.write_lock():
                    abnormal = self._abort.open()
                    self._recovery.recover(abnormal)
            except BaseException:
                self._release_after_failed_open()
                raise
        self._recovery.truncate = False

    def _release_after_failed_open(self) -> None:
        """Give back the abort file's shared lock and every descriptor: the next opener must see that nobody
        has the store open, or it would skip the recovery this one could not finish."""
        self._closed = True
        self._abort.close(clean=False)
        self.lock_file.close()
        for cq in self._queues.values():
            cq.close()
        self.commit_log.close()

    # -- lifecycle -------------------------------------------------------------------------------------------

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._flush_service is not None:
            self._flush_service.stop()  # before the write lock: its last round takes it
            self._flush_service = None
        if not self.read_only:
            with self.write_lock():
                self.appender.flush_index()
                self.appender.flush_checkpoint(force=True)
                self._abort.close(clean=True)
        self.lock_file.close()
        for cq in self._queues.values():
            cq.close()
        self.index.close()
        self.commit_log.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def write_lock(self) -> LockFile:
        """The append lock, re-entrant: serialises writers across threads (mutex) and processes (flock on
        `lock`). Retention and recovery take it too; readers never do."""
        if self.read_only:
            raise ReadOnlyStoreError(f"store {self.path} is open read-only")
        return self.lock_file

    @contextmanager
    def exclusive(self):
        """Hold the store's write lock (re-entrant, across threads and processes) around several operations,
        e.g. a check of what is stored followed by an append that depends on it. On entry the log end is
        brought up to date (another process's appends seen, a dead writer's complete records dispatched, a
        torn tail cut), so what is read inside is what the next append builds on."""
        with self.write_lock():
            if self.lock_file.depth == 1:
                self.appender.sync()
            yield

    # -- topics and queues -----------------------------------------------------------------------------------

    def topics(self) -> list[str]:
        """Every topic, including those other processes created since (two stats when there are none)."""
        self.topic_config.refresh()
        return sorted(self.topic_config.table)

    def has_topic(self, topic: str) -> bool:
        """Whether the topic exists: the loaded table first (no file read on a hit), then a rewritten topics.json
        or the topic's directory, for a topic another process created since."""
        return self.topic_config.find(topic) is not None

    def queues(self, topic: str) -> list[int]:
        return list(range(self.queue_count(topic)))

    def queue_count(self, topic: str) -> int:
        """How many queues the topic has (its queue ids are 0 up to this, exclusive)."""
        cfg = self._topic(topic)
        return max(cfg.readQueueNums, cfg.writeQueueNums)

    def _topic(self, topic: str) -> TopicConfig:
        cfg = self.topic_config.find(topic)
        if cfg is None:
            raise UnknownTopicError(f"unknown topic {topic!r}; the store has: {', '.join(self.topics()) or 'none'}")
        return cfg

    def create_topic(self, name: str, queues: Optional[int] = None) -> TopicConfig:
        codec.check_topic(name)
        queues = self.config.defaultTopicQueueNums if queues is None else int(queues)
        if not 1 <= queues <= 1024:
            raise ValueError(f"queues must be 1..1024, got {queues}")
        with self.write_lock():
            return self._create_topic_locked(name, queues)

    def _create_topic_locked(self, name: str, queues: int) -> TopicConfig:
        cfg = self.topic_config.find(name)
        if cfg is None:
            cfg = TopicConfig(topicName=name, readQueueNums=queues, writeQueueNums=queues)
            # Its queue directories at once: until topics.json is rewritten (within the persist window) they are
            # how other processes find the topic and its queue count, even while it has no message.
            with disk_full_named(os.path.join(self.path, "consumequeue", name), f"topic {name}'s queue directories"):
                for q in range(queues):
                    os.makedirs(os.path.join(self.path, "consumequeue", name, str(q)), exist_ok=True)
            self.topic_config.add(cfg)
        return cfg

    def delete_topic(self, name: str) -> bool:
        """RocketMQ's deleteTopicConfig + cleanUnusedTopic: the topic leaves config/topics.json and its consume
        queues are deleted; its messages stay in the commitlog until retention removes their files (a
        rebuild of the consume queues from the commitlog would bring it back, as RocketMQ's would). False when the
        store has no such topic."""
        with self.write_lock():
            if self.topic_config.find(name) is None:
                return False
            # what was dispatched stays dispatched: never re-dispatched later
            self.appender.flush_checkpoint(force=True)
            for key in [k for k in self._queues if k[0] == name]:
                cq = self._queues.pop(key)
                self.appender.dirty_queues.discard(cq)
                cq.close()
                for cache in (self.appender.queue_ends, self._bounds.cache, self.min_offset_cache):
                    cache.pop(key, None)
            self.appender.round_robin.pop(name, None)
            # recovery re-dispatches what no consume queue points at: never this topic's records before here
            deleted = {t: end for t, end in self.deleted_topics().items() if end > self.commit_log_min_offset()}
            deleted[name] = max(deleted.get(name, 0), self.commit_log_max_offset())
            persist_config_json(os.path.join(self.path, DELETED_TOPICS_FILE), {"deletedTopics": deleted})
            self.topic_config.remove(name)
            shutil.rmtree(os.path.join(self.path, "consumequeue", name), ignore_errors=True)
            return True

    def deleted_topics(self) -> dict[str, int]:
        """{topic: the commitlog end when it was deleted} (config/deletedTopics.json, ours)."""
        data = load_rocketmq_json(os.path.join(self.path, DELETED_TOPICS_FILE)) or {}
        table = data.get("deletedTopics")
        return {str(t): int(e) for t, e in table.items()} if isinstance(table, dict) else {}

    def consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        key = (topic, queue_id)
        cq = self._queues.get(key)
        if cq is None:
            cq = ConsumeQueue(self.path, topic, queue_id, self.config.mappedFileSizeConsumeQueue,
                              writable=not self.read_only, size_known=self._sizes_known)
            self._queues[key] = cq
        return cq

    def find_consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        """RocketMQ's findConsumeQueue for readers: the queue of a topic the store has; UnknownTopicError naming
        the topic's queues otherwise."""
        cfg = self._topic(topic)
        n = max(cfg.readQueueNums, cfg.writeQueueNums)
        if not 0 <= queue_id < n:
            raise UnknownTopicError(f"topic {topic!r} has queues 0..{n - 1}; queue {queue_id} does not exist")
        return self.consume_queue(topic, queue_id)

    def max_offset(self, topic: str, queue_id: int) -> int:
        return self.find_consume_queue(topic, queue_id).max_offset()

    def min_offset(self, topic: str, queue_id: int) -> int:
        cq = self.find_consume_queue(topic, queue_id)
        return cq.min_offset(self.commit_log.min_offset())

    def queue_bounds(self, queues) -> dict[tuple[str, int], tuple[int, int]]:
        """(min offset, max offset) of each queue, for callers that ask for many queues again and again (a
        streaming query's triggers). Kept in memory between calls: when no append was committed and no
        commitlog file removed since the last call, nothing is read; after appends, the records appended since
        are walked (up to queue_bounds.BOUNDS_WALK_BYTES) and only the queues they went to are read again; after
        retention, or more appends than that, every queue asked for is read. A store without our committed end
        (a broker's copy) is read in full each time."""
        return self._bounds.bounds(queues)

    def bounds_tracker(self, queues):
        """A QueueBoundsTracker of these queues: their (min, max) as arrays, updated in place by reading only
        the queues appended to since (what a streaming query's trigger asks of tens of thousands of queues)."""
        return QueueBoundsTracker(self, queues)

    def topics_version(self) -> int:
        """A number that changes whenever the topic table may have (topics created here or by other processes,
        queue counts raised): what is derived from topics() and queues() holds while it stays the same. Two stats
        when nothing changed."""
        self.topic_config.refresh()
        return self.topic_config.changes

    def commit_log_min_offset(self) -> int:
        return self.commit_log.min_offset()

    def commit_log_max_offset(self) -> int:
        """The end of the log as this process knows it (writers), or as the consume queues tell (readers)."""
        write_pos = self.appender.write_pos
        if write_pos is not None:
            return max(write_pos, self.lock_file.committed_end() or 0)
        end = self.lock_file.committed_end()
        return end if end is not None else self._recovery.dispatched_end()

    # -- writing: thin faces over the one append (store/append.py) -------------------------------------------

    def put(self, topic: str, body, *, tags=None, keys=None, properties=None, queue_id=None, sharding_key=None,
            flag: int = 0, born_timestamp=None, sys_flag: int = 0, born_host=None,
            reconsume_times: int = 0, defer_flush: bool = False) -> PutResult:
        """One message. The usual one (no keys or sharding key, not a transaction half) is encoded and appended
        on its own (put_one); anything else, and a record that must roll the commitlog file, as a batch of one.
        defer_flush=True under SYNC_FLUSH: the usual message's record is not fsynced here; the caller must call
        sync_to(its commit_log_offset + 1) before it tells anyone the message is stored (a group commit)."""
        self._check_writable()
        one = build_one(self, topic, body, tags, keys, properties, queue_id, sharding_key, flag, born_timestamp,
                        sys_flag, born_host, reconsume_times)
        if one is not None:
            placed = self._append(OneRecords([one]), defer_flush)
            if placed is not None:
                return placed[0]
            queue_id = one.queue_id  # the queue round robin chose stays the message's
        return self.put_batch(topic, [body], tags=[tags], keys=[keys], properties=[properties],
                              queue_id=None if queue_id is None else [queue_id],
                              sharding_key=None if sharding_key is None else [sharding_key],
                              flag=flag, born_timestamp=None if born_timestamp is None else [born_timestamp],
                              sys_flag=sys_flag, born_host=born_host, reconsume_times=reconsume_times)[0]

    def put_batch(self, topic, bodies, *, tags=None, keys=None, properties=None, queue_id=None,
                  sharding_key=None, flag=0, born_timestamp=None, sys_flag=0, born_host=None,
                  atomic: bool = False, reconsume_times=0) -> PutBatchResult:
        """Append many messages in one write. Every argument but `bodies` is a scalar for all messages or a
        sequence (or Arrow array) with one value per message. Everything is validated before anything is
        written; the batch is appended under the store lock, so its queue offsets are dense and in order.

        properties: a dict, a list of dicts, a map<string,string> array, or a string array of RocketMQ properties
        texts (`key\x01value\x02...`, as clients send them), which are stored as they are.

        atomic=True: after a crash at any point the batch is wholly present or wholly absent. Its records carry
        the SYSFLAG bit ATOMIC_BATCH_FLAG, its last one ATOMIC_BATCH_END_FLAG as well (bits the store reserves:
        no caller can set them), and recovery cuts a batch whose last record was never written instead of
        dispatching its complete records."""
        self._check_writable()
        return self._append(PlannedBatch(*build_batch(
            self, topic, bodies, tags=tags, keys=keys, properties=properties, queue_id=queue_id,
            sharding_key=sharding_key, flag=flag, born_timestamp=born_timestamp, sys_flag=sys_flag,
            born_host=born_host, atomic=atomic, reconsume_times=reconsume_times)))

    def put_many(self, messages: Sequence[dict], defer_flush: bool = False,
                 on_written: Optional[Callable[[list], None]] = None, defer_index: bool = False,
                 ones: Optional[Sequence[Optional[OneRecord]]] = None) -> list:
        """Several single messages (each a dict of put's arguments) in one write when every one is the usual message
        (put_one) and they fit in the current commitlog file, else put one after another: either way each gets its
        queue offset in the order given (a message's "properties_text", when given, is its properties' canonical
        text: put_one.canonical_text). Per message its PutResult, or the ValueError or StoreError put raised
        for it (the others are stored). The broker's single sends that arrive in one turn of its event loop.
        on_written(results), in one write only: called once the records are in the commitlog, before their
        consume-queue units and index entries; defer_index: in one write, the index entries wait for
        flush_index(), which the caller calls soon (has_index_pending). ones: per message its record when built
        already (put_one.build_plain, its queue_id None; None: built here), each used once."""
        self._check_writable()
        built = build_many(self, messages, ones)
        if built is not None:
            placed = self._append(OneRecords(built), defer_flush, on_written, defer_index)
            if placed is not None:
                return placed
        return put_one_by_one(self, messages, defer_flush)

    def put_message_batch(self, topic: str, body, queue_id: int, *, born_timestamp: int, born_host=None,
                          defer_flush: bool = False) -> Optional[PutBatchResult]:
        """A client's MessageBatch body (SEND_BATCH_MESSAGE) appended to one queue without the batch machinery
        (put_message_batch.py), the same records put_batch stores for the bodies and properties texts it holds.
        None, with nothing written, when it is not the usual batch or must roll the commitlog file: the caller
        then takes put_batch. ValueError when the body does not decode. defer_flush as put's."""
        self._check_writable()
        planned = plan_message_batch(self, topic, body, born_timestamp, born_host)
        if planned is None:
            return None
        placed = self._append(MessageBatches([planned], [queue_id]), defer_flush)
        return None if placed is None else placed[0]

    def put_message_batches(self, batches: Sequence[tuple], defer_flush: bool = False,
                            on_written: Optional[Callable[[list], None]] = None, defer_index: bool = False) -> list:
        """Several MessageBatch bodies, each (topic, body, queue id, born timestamp, born host), in one write when
        every one is the usual batch and they fit in the current commitlog file, else put_message_batch one
        after another: either way each batch gets consecutive queue offsets, in the order given. Per batch its
        PutBatchResult, the ValueError its body raised, or None: not the usual batch (the caller takes
        put_batch), and so is every batch after it, so that the caller keeps the order. The broker's batches that
        arrive in one turn of its event loop. on_written and defer_index as put_many's."""
        self._check_writable()
        planned = plan_all(self, batches)
        if planned is not None:
            placed = self._append(planned, defer_flush, on_written, defer_index)
            if placed is not None:
                return placed
        return put_batches_one_by_one(self, batches, defer_flush)

    def _check_writable(self) -> None:
        if self.read_only:
            raise ReadOnlyStoreError(f"store {self.path} is open read-only")

    def _append(self, records, defer_flush: bool = False, on_written: Optional[Callable] = None,
                defer_index: bool = False):
        with self.write_lock():
            return self.appender.append(records, defer_flush, on_written, defer_index)

    def has_index_pending(self) -> bool:
        return bool(self.appender.index_pending)

    def flush_index(self) -> None:
        """Write the index entries defer_index held back."""
        if self.appender.index_pending:
            with self.write_lock():
                self.appender.flush_index()

    @property
    def synced_end(self) -> int:
        """The commitlog end sync_to made durable."""
        return self.appender.synced_end

    def sync_to(self, offset: int) -> int:
        """SYNC_FLUSH's group commit: everything below offset (a record written before this call) made durable
        (Appender.sync_to); the end so made durable. Thread-safe."""
        return self.appender.sync_to(offset)

    def queue_end(self, topic: str, queue_id: int) -> int:
        """Where a queue's next unit goes, for an append under the write lock."""
        return self.appender.queue_end(topic, queue_id)

    def take_round_robin(self, topic: str, nq: int, count: int) -> int:
        """The topic's next round-robin queue, moved on by count (a first append starts at random)."""
        return self.appender.take_round_robin(topic, nq, count)

    def start_flush_service(self) -> None:
        """Flush from a thread of its own from now on (flush_service.py, RocketMQ's FlushRealTimeService), for a
        long-running writer such as the broker; close() stops it and flushes the rest itself."""
        if not self.read_only and self._flush_service is None:
            self._flush_service = FlushService(self)

    # -- recovery -------------------------------------------------------------------------------------------

    def consume_queue_ids(self) -> dict[str, list[int]]:
        """{topic: queue ids} of every consume-queue directory on disk (what recovery and retention walk)."""
        return discover_consume_queues(self.path)

    def rebuild_consume_queues(self) -> int:
        """`rmq recover`: rebuild what recovery rebuilds on every open (units between a queue's files, a torn
        last file), and also the consume-queue files missing or emptied before a queue's first file while the
        commitlog still holds their records, which an open looks for only in a store whose commitlog never
        expired a file (elsewhere that takes a walk from the commitlog's first file). Returns how many units
        were rebuilt below the queues' first files."""
        return self._recovery.rebuild_consume_queues()

    # -- reading ---------------------------------------------------------------------------------------------

    def get_message(self, group: str, topic: str, queue_id: int, offset: int, max_msgs: int = 32,
                    message_filter=None, suspend_timeout_ms: int = 0) -> GetMessageResult:
        """RocketMQ's DefaultMessageStore.getMessage, status for status, as decoded messages. With
        suspend_timeout_ms > 0 a pull that finds nothing new is held in this thread (store/held_read.py) until a
        message that passes the filter arrives in the queue, from this process or another, or the timeout
        passes."""
        from .get_message import get_message
        if suspend_timeout_ms and suspend_timeout_ms > 0:
            return get_message_held(
                self, lambda pos: get_message(self, group, topic, queue_id, pos, max_msgs, message_filter),
                topic, queue_id, offset, suspend_timeout_ms)
        return get_message(self, group, topic, queue_id, offset, max_msgs, message_filter)

    def get_message_records(self, topic: str, queue_id: int, offset: int, max_msgs: int = 32, message_filter=None,
                            by_properties: bool = False) -> tuple[GetMessageResult, Optional[np.ndarray]]:
        """getMessage for a pull's response: the result (status, next offsets) and the found records' bytes back to
        back as they lie in the commitlog (None unless FOUND). A tag filter is decided on the consume queue's tag
        codes alone, as RocketMQ's broker does (clients re-check the tag of what they receive); by_properties
        (SQL92) decides it on the records' properties. maxTransferCount/BytesOnMessageInMemory bound it."""
        return get_message_records(self, topic, queue_id, offset, max_msgs, message_filter, by_properties)

    def record_sizes(self, topic: str, queue_id: int, start: int, end: int) -> np.ndarray:
        """The stored sizes (bytes) of the messages at queue offsets [start, end), from the consume queue alone;
        fewer when the queue ends sooner."""
        return self.consume_queue(topic, queue_id).units(start, end)["size"].astype(np.int64)

    def look_message_by_offset(self, commit_log_offset: int) -> Optional[tuple[codec.MessageExt, bytes]]:
        """RocketMQ's lookMessageByOffset: the message stored at a commitlog offset (the offset part of a msgId)
        and its stored bytes; None when nothing is there (gone by retention, never written); RecordFormatError
        when what is there is not a record."""
        view, base = self.commit_log.view_at(commit_log_offset)
        if view is None:
            return None
        msg = codec.decode_record(view, commit_log_offset - base, limit=len(view))
        start = commit_log_offset - base
        return msg, bytes(view[start:start + msg.store_size])

    # -- finding messages (RocketMQ's IndexService) -----------------------------------------------------------

    def query_offsets(self, topic: str, key: str, max_num: Optional[int] = None, begin: int = 0,
                      end: int = 2**63 - 1):
        """IndexService.queryOffset: the commitlog offsets of the index entries whose hash is `topic#key`'s, stored
        within [begin, end] ms, newest first, at most max_num (capped by maxMsgsNumBatch); with the index's
        last update (time, commitlog offset). Hash collisions are included, as RocketMQ's broker returns them."""
        max_num = self.config.maxMsgsNumBatch if max_num is None else min(int(max_num), self.config.maxMsgsNumBatch)
        self.flush_index()
        return self.index.query_offset(topic, key, max_num, begin, end)

    def query_records(self, topic: str, key: str, max_num: int, begin: int, end: int) -> tuple[bytes, int, int]:
        """DefaultMessageStore.queryMessage for QUERY_MESSAGE: the stored records the index finds (commitlog order,
        up to three passes moving the end back to the oldest found while none could be read), back to back; with
        the index's last update time and commitlog offset."""
        return query_records(self, topic, key, max_num, begin, end)

    def query_message(self, topic: str, key: str, max_num: int = 64, begin: int = 0, end: int = 2**63 - 1,
                      unique_key: bool = False) -> list[codec.MessageExt]:
        """Messages of `topic` with `key` among their KEYS (unique_key=True: whose UNIQ_KEY, the msgId a producer's
        SendResult shows, is `key`), stored within [begin, end] ms, newest first, at most max_num: found through
        the index, each checked against the key (the index holds hashes), duplicates dropped."""
        return query_message(self, topic, key, max_num, begin, end, unique_key)

    def query_message_by_unique_key(self, topic: str, uniq_key: str) -> Optional[codec.MessageExt]:
        """The message whose UNIQ_KEY (client msgId) is uniq_key, the newest if a retry stored it twice; None."""
        found = self.query_message(topic, uniq_key, 1, unique_key=True)
        return found[0] if found else None

    def view_message_by_offset_id(self, msg_id: str) -> Optional[codec.MessageExt]:
        """The message of an offset msgId (RocketMQ's 16-byte form, 32 hex digits: store ip, port, commitlog
        offset; 28 bytes for an IPv6 store); None when nothing is stored there. ValueError for a malformed id."""
        _, _, offset = codec.decode_message_id(msg_id)
        if offset < self.commit_log.min_offset() or offset >= self.commit_log_max_offset():
            return None
        try:
            hit = self.look_message_by_offset(offset)
        except codec.RecordFormatError:
            return None
        return None if hit is None else hit[0]

    def check_in_disk_by_consume_offset(self, topic: str, queue_id: int, offset: int) -> bool:
        """RocketMQ's checkInDiskByConsumeOffset: whether the message at a queue offset is beyond what the page
        cache is expected to hold (accessMessageInMemoryMaxRatio); False when there is no such message."""
        units = self.find_consume_queue(topic, queue_id).units(offset, offset + 1)
        if not len(units) or units["size"][0] <= 0:
            return False
        return self.is_in_disk(int(units["offset"][0]), self.commit_log_max_offset())

    def commit_log_file_span(self, commit_log_offset: int) -> tuple[int, int]:
        """[start, end) of the commitlog file that holds (or would hold) an offset."""
        start = self.commit_log.file_start(commit_log_offset)
        return start, start + self.commit_log.file_size

    def offset_for_timestamp(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """RocketMQ's getOffsetInQueueByTime: the earliest queue offset whose STORETIMESTAMP >= timestamp_ms;
        the max offset when every message is older."""
        from .offset_by_time import offset_in_queue_by_time
        return offset_in_queue_by_time(self, topic, queue_id, timestamp_ms)

    def clean_expired(self, now=None, *, periodic: bool = False, disk_used_ratio: Optional[float] = None):
        """RocketMQ's CleanCommitLogService + CleanConsumeQueueService: delete commitlog files (never the last)
        whose last write is older than fileReservedTime hours, then consume-queue files wholly below the new
        commitlog minimum. `now` is seconds since the epoch (default: the clock). With periodic=True, as a
        long-running process calls it, files are deleted only in a deleteWhen hour or when the disk is fuller
        than diskMaxUsedSpaceRatio. Returns a CleanSummary."""
        from .clean_expired import clean_expired
        return clean_expired(self, now=now, periodic=periodic, disk_used_ratio=disk_used_ratio)

    def scan(self, topic: str, queue_id: int, start: int, end: Optional[int] = None, message_filter=None,
             batch_rows: int = 32768, columns: Optional[Sequence[str]] = None,
             release_pages: bool = True) -> Iterator[pa.RecordBatch]:
        """Messages of one queue in [start, end) as Arrow RecordBatches (the vectorised bulk path): SCAN_SCHEMA's
        columns, or only those named in `columns`, in that order (the others are never built). release_pages=False
        leaves the log's pages mapped (a server reading the same log again and again, as RocketMQ's broker keeps
        its commitlog mapped): no madvise per run, which costs more than a filter's decoding."""
        from .scan import scan
        return scan(self, topic, queue_id, start, end, message_filter, batch_rows, columns, release_pages)

    def scan_queues(self, topic: str, pieces: Sequence[tuple[int, int, int]], message_filter=None,
                    batch_rows: int = 32768, columns: Optional[Sequence[str]] = None, release_pages: bool = True,
                    progress: Optional[dict] = None) -> Iterator[pa.RecordBatch]:
        """Several queues' [start, end) of one topic, (queue_id, start, end) each, read together in log order (as
        scan() reads one; each record's queue_id its own). progress, if given, holds each queue's next offset to
        read once a batch is yielded (where to resume after an error)."""
        from .scan import scan_queues
        return scan_queues(self, topic, pieces, message_filter, batch_rows, columns, release_pages, progress)

    def log_windows(self, topic: str, ranges: Sequence[tuple[int, int, int]], count: int
                    ) -> list[list[tuple[int, int, int]]]:
        """(queue_id, start, end) ranges of one topic cut into at most `count` windows of the log, each the pieces
        of the ranges whose records lie in one stretch of the commitlog (store/log_windows.py)."""
        from .log_windows import log_windows
        return log_windows(self, topic, ranges, count)

    def queue_offset_at(self, topic: str, queue_id: int, commit_log_offset: int, start: int = 0) -> int:
        """The first queue offset at or after `start` whose message lies at or past `commit_log_offset` (the
        queue's max offset if none): where a reader resumes after messages lost in a missing file."""
        cq = self.find_consume_queue(topic, queue_id)
        lo, hi = max(start, cq.first_unit_offset()), cq.max_offset()
        while lo < hi:
            mid = (lo + hi) // 2
            unit = cq.units(mid, mid + 1)
            if len(unit) and int(unit["offset"][0]) < commit_log_offset:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def is_in_disk(self, commit_log_offset: int, max_physical: int) -> bool:
        return max_physical - commit_log_offset > self._memory_limit

