"""StoreLog: a MessageLog on a store directory (store.MessageStore, opened read-only or writable for each request
as it needs; consumer groups' offsets in its config/consumerOffset-GROUP.json, store.OffsetStore)."""
from __future__ import annotations

import os
import re
import time
from typing import TYPE_CHECKING, Any, Callable, Collection, Optional

from store.errors import CorruptRecordError, InvalidMessageError, StoreError, UnknownTopicError
from store.message_store import MessageStore
from store.offset_store import OffsetStore, ReadOffsetType, committed_groups
from store.store_config import StoreConfig

from .errors import Failure, UsageError
from .message_log import (
    EARLIEST,
    LATEST,
    Consume,
    Emit,
    LineWriter,
    MessageLog,
    QueueKey,
    QueueStat,
    Sent,
    TopicChange,
)
from .queue_key import STORE_BROKER_NAME
from .store_consume import consume

if TYPE_CHECKING:
    from .reads import LogReads, ReadSettings
    from .writes import LogWrites, WriteOptions

def store_path(path: Optional[str], must_exist: bool) -> str:
    if not path:
        raise UsageError("no store given: use --store PATH (or set RMQ_STORE)")
    if os.path.exists(path) and not os.path.isdir(path):
        raise UsageError(f"--store {path}: is a file, not a store directory")
    if must_exist and not os.path.isdir(path):
        raise UsageError(f"--store {path}: no such store directory")
    return path


def store_config(config: Optional[str]) -> Optional[StoreConfig]:
    if config is None:
        return None
    try:
        return StoreConfig.from_file(config)
    except FileNotFoundError:
        raise UsageError(f"--config {config}: no such file") from None
    except ValueError as e:
        raise UsageError(f"--config {config}: {e}") from None


def open_store(path: Optional[str], config: Optional[str], read_only: bool) -> MessageStore:
    where = store_path(path, must_exist=read_only)
    cfg = store_config(config)
    try:
        return MessageStore(where, cfg, read_only=read_only)
    except NotADirectoryError as e:
        raise UsageError(f"--store: {e}") from None
    except ValueError as e:
        raise UsageError(f"--config {config}: {e}" if config else str(e)) from None


def require_topic(store: MessageStore, topic: str) -> list[int]:
    try:
        return store.queues(topic)
    except UnknownTopicError as e:
        raise UsageError(f"--topic: {e}") from None


def group_offsets(path: Optional[str], group: str) -> OffsetStore:
    """The OffsetStore of a group (a bad group name is a usage error naming --group)."""
    try:
        return OffsetStore(store_path(path, must_exist=True), group)
    except ValueError as e:
        raise UsageError(f"--group: {e}") from None


class StoreLog(MessageLog):
    names_brokers = False
    knows_members = False

    def __init__(self, path: Optional[str], config: Optional[str] = None):
        self.path, self.config = path, config

    def _open(self, read_only: bool) -> MessageStore:
        return open_store(self.path, self.config, read_only)

    def _key(self, qid: int) -> QueueKey:
        return QueueKey(STORE_BROKER_NAME, qid)

    def where(self) -> dict:
        return {"store": os.path.abspath(store_path(self.path, must_exist=True))}

    def commit_log_bounds(self) -> Optional[dict]:
        with self._open(read_only=True) as store:
            return {"min_offset": store.commit_log_min_offset(), "max_offset": store.commit_log_max_offset()}

    def topics(self) -> list[dict]:
        rows = []
        with self._open(read_only=True) as store:
            for topic in store.topics():
                cfg = store.topic_config.table[topic]
                queues = store.queues(topic)
                messages = sum(store.max_offset(topic, q) - store.min_offset(topic, q) for q in queues)
                rows.append({"topic": topic, "queues": len(queues), "read_queue_nums": cfg.readQueueNums,
                             "write_queue_nums": cfg.writeQueueNums, "messages": messages})
        return rows

    def queue_stats(self, topic: Optional[str], group: Optional[str]) -> list[QueueStat]:
        offsets = group_offsets(self.path, group) if group else None
        rows = []
        with self._open(read_only=True) as store:
            for t in [topic] if topic else store.topics():
                for qid in require_topic(store, t):
                    row = QueueStat(t, self._key(qid), store.min_offset(t, qid), store.max_offset(t, qid))
                    if offsets is not None:
                        committed = offsets.read_offset((t, qid), ReadOffsetType.READ_FROM_STORE)
                        row.committed = committed if committed >= 0 else None
                        row.lag = row.max_offset - committed if committed >= 0 else None
                    rows.append(row)
        return rows

    def create_topic(self, topic: str, queues: int, cluster: Optional[str]) -> TopicChange:
        with MessageStore(store_path(self.path, must_exist=False), store_config(self.config)) as store:
            if store.has_topic(topic):
                have = len(store.queues(topic))
                if have != queues:
                    raise UsageError(f"--queues {queues}: topic {topic} exists with {have} queues (a store does not "
                                     "change a topic's queue count)")
                return TopicChange(topic, have, existed=True)
            store.create_topic(topic, queues)
        return TopicChange(topic, queues)

    def delete_topic(self, topic: str, cluster: Optional[str]) -> TopicChange:
        path = store_path(self.path, must_exist=True)
        with MessageStore(path, store_config(self.config)) as store:
            queues = len(require_topic(store, topic))
            store.delete_topic(topic)
        groups = [g for g, topics in committed_groups(path).items() if topic in topics]
        for group in groups:
            offsets = OffsetStore(path, group)
            offsets.load()
            offsets.remove_topic(topic)
            offsets.persist_all()
        return TopicChange(topic, queues, groups=groups)

    def groups(self) -> list[dict]:
        path = store_path(self.path, must_exist=True)
        rows = []
        with MessageStore(path, store_config(self.config), read_only=True) as store:
            for group, topics in committed_groups(path).items():
                offsets = OffsetStore(path, group)
                offsets.load()
                for topic in topics:
                    table = offsets.clone_offset_table(topic)
                    exists = store.has_topic(topic)
                    lag = sum(max(0, store.max_offset(topic, q) - o) for q, o in table.items()
                              if exists and q in store.queues(topic)) if exists else None
                    rows.append({"group": group, "topic": topic, "queues": len(table),
                                 "committed": sum(table.values()), "lag": lag})
        return rows

    def reset_offsets(self, group: str, topic: str, when: int) -> tuple[list[dict], str]:
        path = store_path(self.path, must_exist=True)
        offsets = OffsetStore(path, group)
        offsets.load()
        rows = []
        with MessageStore(path, store_config(self.config), read_only=True) as store:
            for q in require_topic(store, topic):
                if when == LATEST:
                    new = store.max_offset(topic, q)
                elif when == EARLIEST:
                    new = store.min_offset(topic, q)
                else:
                    new = store.offset_for_timestamp(topic, q, when)
                old = offsets.read_offset((topic, q))
                offsets.update_offset((topic, q), max(0, new))
                rows.append({"queue_id": q, "old": old if old >= 0 else None, "new": max(0, new)})
        offsets.persist_all()
        return rows, "committed in the store"

    def send(self, topic: str, bodies: list[bytes], tags: Optional[str], keys: Optional[str],
             properties: Optional[dict], sharding_key: Optional[str],
             queue: Optional[tuple[Optional[str], int]], on_sent: Callable[[Sent], None]) -> None:
        if queue is not None and queue[0] is not None:
            raise UsageError(f"--queue {queue[0]}:{queue[1]}: a store has no brokers; give the queue id (BROKER:N "
                             "is for --namesrv)")
        queue_id = queue[1] if queue is not None else None
        with self._open(read_only=False) as store:
            nq = _write_queue_count(store, topic)
            if queue_id is not None and queue_id >= nq:
                raise UsageError(f"--queue {queue_id}: topic {topic!r} has queues 0..{nq - 1}")
            batch = [_Line(topic, b, tags, keys, properties, queue_id, sharding_key) for b in bodies]
            result = _put(store, batch, 0)
            for r in result:
                on_sent(Sent(str(r.status), r.topic, self._key(r.queue_id), r.queue_offset, r.msg_id,
                             {"uniq_key": r.uniq_key, "commit_log_offset": r.commit_log_offset}))

    def line_writer(self, batch_size: int) -> LineWriter:
        return _StoreWriter(self._open(read_only=False), batch_size)

    def consume(self, request: Consume, emit: Emit) -> None:
        offsets = group_offsets(self.path, request.group) if request.group else None
        with self._open(read_only=True) as store:
            consume(store, request, offsets, lambda m: emit(m, self._key(m.queue_id)))

    def find_by_key(self, topic: str, key: str, max_count: int, begin: int, end: int) -> list:
        with self._open(read_only=True) as store:
            return store.query_message(topic, key, max_count, begin, end)

    def find_by_msg_id(self, topic: str, msg_id: str) -> list:
        with self._open(read_only=True) as store:
            one = store.query_message_by_unique_key(topic, msg_id)
        return [one] if one is not None else []

    def find_by_offset_msg_id(self, offset_msg_id: str) -> list:
        with self._open(read_only=True) as store:
            one = store.view_message_by_offset_id(offset_msg_id)
        return [one] if one is not None else []

    def writes(self, options: WriteOptions, columns: Collection[str]) -> LogWrites:
        from .store_writes import StoreWrites
        return StoreWrites(options)

    def reads(self, settings: ReadSettings) -> LogReads:
        from .store_reads import StoreReads
        return StoreReads(store_path(self.path, must_exist=True), settings)


class _Line:
    """A message to append, with the attributes of a `produce --file` line."""

    def __init__(self, topic, body, tags, keys, properties, queue_id, sharding_key):
        self.topic, self.body, self.tags, self.keys = topic, body, tags, keys
        self.properties, self.queue_id, self.sharding_key = properties, queue_id, sharding_key
        self.born_timestamp = None


def _write_queue_count(store: MessageStore, topic: str) -> int:
    """Write queues the topic has, or will have when this write creates it."""
    store.topic_config.load()
    cfg = store.topic_config.table.get(topic)
    return cfg.writeQueueNums if cfg is not None else store.config.defaultTopicQueueNums


def _put(store: MessageStore, batch: list, first_line: int) -> Any:
    try:
        return store.put_batch(
            [m.topic for m in batch], [m.body for m in batch], tags=[m.tags for m in batch],
            keys=[m.keys for m in batch], properties=[m.properties for m in batch],
            queue_id=[m.queue_id for m in batch] if any(m.queue_id is not None for m in batch) else None,
            sharding_key=[m.sharding_key for m in batch] if any(m.sharding_key for m in batch) else None,
            born_timestamp=[m.born_timestamp if m.born_timestamp is not None else int(time.time() * 1000)
                            for m in batch] if any(m.born_timestamp is not None for m in batch) else None)
    except InvalidMessageError as e:
        # put_batch names the message by its index in the batch: say which line that was.
        text = str(e)
        match = re.match(r"message (\d+): (.*)", text, re.S)
        if match and first_line:
            raise UsageError(f"line {first_line + int(match.group(1))}: {match.group(2)}") from None
        raise UsageError(text) from None


class _StoreWriter(LineWriter):
    """Lines checked as put_batch would (so an error names the line), appended batch_size at a time."""

    def __init__(self, store: MessageStore, batch_size: int):
        self.store = store
        self.lines_per_flush = batch_size
        self.queue_counts: dict[str, int] = {}

    def close(self) -> None:
        self.store.close()

    def check(self, m: Any, lineno: int) -> None:
        nq = self.queue_counts.get(m.topic)
        if nq is None:
            nq = self.queue_counts[m.topic] = _write_queue_count(self.store, m.topic)
        if m.queue_id is not None and m.queue_id >= nq:
            raise UsageError(f"line {lineno}: queue_id {m.queue_id} is outside topic {m.topic!r}'s queues "
                             f"0..{nq - 1}")
        if len(m.body) > self.store.config.maxMessageSize:
            raise UsageError(f"line {lineno}: body is {len(m.body)} bytes, more than maxMessageSize "
                             f"({self.store.config.maxMessageSize})")

    def flush(self, batch: list, first_line: int) -> None:
        try:
            _put(self.store, batch, first_line)
        except CorruptRecordError:
            raise
        except StoreError as e:  # a failure of the command, reported (and counted by produce_file) as one
            raise Failure(str(e)) from None
