"""OffsetStore: a consumer group's progress, kept in config/consumerOffset.json.

RocketMQ's OffsetStore operations (load, updateOffset, readOffset, persist, persistAll, removeOffset,
cloneOffsetTable) over the broker's ConsumerOffsetManager file shape:

    {"offsetTable": {"topic@group": {"0": 17, "1": 4}}}

Several processes (Spark tasks, the `rmq` CLI) share the one file, each for its own groups or queues. A
persist therefore takes an flock on config/consumerOffset.json.lock, re-reads the file, merges only the entries
this object changed (or was asked to persist) into it, and writes it atomically: a temporary file, fsync, the
previous version kept as consumerOffset.json.bak, rename. A load falls back to the .bak, with a warning, when
the main file is missing, empty or corrupt (a torn write by something that did not rename).
"""
from __future__ import annotations

import enum
import fcntl
import os
import re
import threading
import warnings
from typing import Iterable, Optional

from .json_file import MISSING, atomic_write_json, read_json_object, unreadable

CONSUMER_OFFSET_FILE = os.path.join("config", "consumerOffset.json")
_GROUP_PATTERN = re.compile(r"[%|a-zA-Z0-9_-]+")


class ReadOffsetType(str, enum.Enum):
    READ_FROM_MEMORY = "READ_FROM_MEMORY"
    READ_FROM_STORE = "READ_FROM_STORE"
    MEMORY_FIRST_THEN_STORE = "MEMORY_FIRST_THEN_STORE"

    def __str__(self):
        return self.value


class OffsetFileWarning(UserWarning):
    """consumerOffset.json was unreadable and the .bak was used (or nothing was)."""


def _check_mq(mq) -> tuple[str, int]:
    try:
        topic, queue_id = mq
    except (TypeError, ValueError):
        raise ValueError(f"mq must be a (topic, queue_id) pair, got {mq!r}") from None
    if not isinstance(topic, str) or not topic:
        raise ValueError(f"mq topic must be a non-empty string, got {topic!r}")
    try:
        qid = int(queue_id)
        if isinstance(queue_id, bool) or qid != queue_id or qid < 0:
            raise ValueError
    except (TypeError, ValueError):
        raise ValueError(f"mq queue_id must be a non-negative integer, got {queue_id!r}") from None
    queue_id = qid
    return topic, queue_id


def check_group(group) -> None:
    """A consumer group name as RocketMQ allows it (and a safe file-name part)."""
    if not isinstance(group, str) or not _GROUP_PATTERN.fullmatch(group) or len(group) > 255:
        raise ValueError(f"group {group!r}: a consumer group name is 1..255 characters of [%|a-zA-Z0-9_-]")


class OffsetStore:
    def __init__(self, store_path, group: str):
        check_group(group)
        self.store_path = os.path.abspath(os.fspath(store_path))
        self.group = group
        self.path = os.path.join(self.store_path, CONSUMER_OFFSET_FILE)
        self._table: dict[tuple[str, int], int] = {}
        self._dirty: set = set()
        self._removed: set = set()
        self._mutex = threading.RLock()

    # -- the file ---------------------------------------------------------------------------------------------

    def _key(self, topic: str) -> str:
        return f"{topic}@{self.group}"

    def _read_file(self) -> dict:
        return read_offsets_file(self.path)

    def _group_offsets(self, data: dict) -> dict[tuple[str, int], int]:
        out = {}
        suffix = "@" + self.group
        for key, queues in (data.get("offsetTable") or {}).items():
            if not key.endswith(suffix) or not isinstance(queues, dict):
                continue
            topic = key[:-len(suffix)]
            for qid, offset in queues.items():
                try:
                    out[(topic, int(qid))] = int(offset)
                except (TypeError, ValueError):
                    continue
        return out

    # -- RocketMQ's OffsetStore -------------------------------------------------------------------------------

    def load(self) -> None:
        """Read this group's committed offsets into memory (the .bak if the file is unreadable)."""
        loaded = self._group_offsets(self._read_file())
        with self._mutex:
            for mq, offset in loaded.items():
                if mq not in self._dirty:
                    self._table[mq] = offset

    def update_offset(self, mq, offset: int, increase_only: bool = False) -> None:
        topic, qid = _check_mq(mq)
        if isinstance(offset, bool) or int(offset) != offset:
            raise ValueError(f"offset must be an integer, got {offset!r}")
        offset = int(offset)
        if offset < 0:
            raise ValueError(f"offset must be >= 0, got {offset}")
        with self._mutex:
            old = self._table.get((topic, qid))
            if increase_only and old is not None and old >= offset:
                return
            self._table[(topic, qid)] = offset
            self._dirty.add((topic, qid))
            self._removed.discard((topic, qid))

    def read_offset(self, mq, read_type: ReadOffsetType = ReadOffsetType.MEMORY_FIRST_THEN_STORE) -> int:
        """The offset, or -1 when there is none (as RocketMQ)."""
        mq = _check_mq(mq)
        try:
            read_type = ReadOffsetType(read_type)
        except ValueError:
            raise ValueError(f"read_type must be one of {', '.join(t.value for t in ReadOffsetType)}, "
                             f"got {read_type!r}") from None
        if read_type in (ReadOffsetType.READ_FROM_MEMORY, ReadOffsetType.MEMORY_FIRST_THEN_STORE):
            with self._mutex:
                offset = self._table.get(mq)
            if offset is not None:
                return offset
            if read_type == ReadOffsetType.READ_FROM_MEMORY:
                return -1
        offset = self._group_offsets(self._read_file()).get(mq)
        if offset is None:
            return -1
        with self._mutex:  # RocketMQ keeps what it read from the store in memory
            self._table[mq] = offset
        return offset

    def persist(self, mq) -> None:
        self.persist_all([mq])

    def persist_all(self, mqs: Optional[Iterable] = None) -> None:
        """Write offsets to the file: those of `mqs`, or (None) every entry this object updated or removed
        since it last persisted. Entries of other groups, and of this group that this object did not touch,
        are kept as the file has them now."""
        with self._mutex:
            if mqs is None:
                chosen = set(self._dirty)
                removed = set(self._removed)
            else:
                wanted = {_check_mq(mq) for mq in mqs}
                chosen = {mq for mq in wanted if mq in self._table}
                removed = wanted & self._removed
            entries = {mq: self._table[mq] for mq in chosen}
        if not entries and not removed:
            return
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        fd = os.open(self.path + ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            data = self._read_file()
            table = data.get("offsetTable")
            if not isinstance(table, dict):
                table = {}
            table = {k: {str(q): o for q, o in v.items()} if isinstance(v, dict) else v for k, v in table.items()}
            for (topic, qid), offset in sorted(entries.items()):
                table.setdefault(self._key(topic), {})[str(qid)] = offset
            for topic, qid in removed:
                queues = table.get(self._key(topic))
                if isinstance(queues, dict):
                    queues.pop(str(qid), None)
                    if not queues:
                        table.pop(self._key(topic))
            data["offsetTable"] = table
            # compact past a thousand queues: the pretty printer is Python code, the compact one C
            atomic_write_json(self.path, data, indent=4 if sum(len(v) for v in table.values()
                                                                if isinstance(v, dict)) <= 1000 else None)
        finally:
            os.close(fd)  # releases the flock
        with self._mutex:
            for mq, offset in entries.items():
                if self._table.get(mq) == offset:
                    self._dirty.discard(mq)
            self._removed -= removed

    def remove_offset(self, mq) -> None:
        """Forget the queue's offset; the next persist removes it from the file too."""
        mq = _check_mq(mq)
        with self._mutex:
            self._table.pop(mq, None)
            self._dirty.discard(mq)
            self._removed.add(mq)

    def remove_topic(self, topic: str) -> int:
        """Forget every queue of the topic (persisted at the next persist); how many there were."""
        with self._mutex:
            gone = [mq for mq in self._table if mq[0] == topic]
        for mq in gone:
            self.remove_offset(mq)
        return len(gone)

    def topics(self) -> list[str]:
        """The topics this group has offsets of (RocketMQ's whichTopicByConsumer)."""
        with self._mutex:
            return sorted({t for t, _ in self._table})

    def clone_offset_table(self, topic: str) -> dict[int, int]:
        """{queue_id: offset} of one topic, from memory."""
        with self._mutex:
            return {qid: off for (t, qid), off in sorted(self._table.items()) if t == topic}

    def __repr__(self):
        return f"OffsetStore({self.store_path!r}, group={self.group!r})"


def read_offsets_file(path: str) -> dict:
    """The parsed file; the .bak (with a warning) when the main file is missing, empty or corrupt;
    ConfigFileError naming the file and what is wrong when neither can be used (starting with no committed
    offsets would send every group back to where it starts)."""
    main, problem = _read_offsets(path)
    if main is not None:
        return main
    bak_path = path + ".bak"
    bak, bak_problem = _read_offsets(bak_path)
    if isinstance(bak, dict):
        warnings.warn(f"{path} {problem}; loaded consumer offsets from {bak_path}", OffsetFileWarning,
                      stacklevel=4)
        return bak
    if problem == MISSING and bak_problem == MISSING:
        return {}  # a fresh store: nothing committed yet
    raise unreadable(path, problem, bak_problem)


def committed_groups(store_path) -> dict[str, list[str]]:
    """{group: the topics it has committed offsets of} in the store's consumerOffset.json (RocketMQ's
    ConsumerOffsetManager keys, topic@group)."""
    out: dict[str, set[str]] = {}
    path = os.path.join(os.path.abspath(os.fspath(store_path)), CONSUMER_OFFSET_FILE)
    for key in (read_offsets_file(path).get("offsetTable") or {}):
        topic, at, group = str(key).rpartition("@")
        if at and topic and group:
            out.setdefault(group, set()).add(topic)
    return {g: sorted(t) for g, t in sorted(out.items())}


def _read_offsets(path: str) -> tuple[Optional[dict], str]:
    data, problem = read_json_object(path)
    if data is not None and not isinstance(data.get("offsetTable", {}), dict):
        return None, "has an offsetTable that is not an object"
    return data, problem
