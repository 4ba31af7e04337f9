"""RocketMQ's IndexService over the store's index/ directory: entries written as records are appended (under the
store's write lock), caught up from the commitlog after a crash or a lag, queried by key, and expired with the
commitlog files they point into.

The index is derived data: a failure to write it (a full disk, say) is logged and never fails an append; the next
writer, or the next open, catches it up from the commitlog past the index's end offset."""
from __future__ import annotations

import logging
import os
import struct
import time
from typing import NamedTuple, Optional

import numpy as np

from rmq_common import message_codec as codec

from .compiled import _index
from .errors import MissingFileError
from .index_file import IndexFile, file_name, file_size, key_hash

log = logging.getLogger(__name__)

_NO_ENTRIES = (np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros(0, np.int64))


class QueryOffsetResult(NamedTuple):
    offsets: list  # commitlog offsets, newest first
    index_last_update_timestamp: int
    index_last_update_phy_offset: int


def _entries_of(raw) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (np.frombuffer(raw[0], np.int32), np.frombuffer(raw[1], np.int64), np.frombuffer(raw[2], np.int64))


def _record_entries(view, rel: int, phy: int, out: list) -> int:
    """Without the compiled module: the entries of one record (record_entries in store/_index.c); its size, or
    -1 when none is there."""
    try:
        m = codec.decode_record(view, rel, check_crc=False)
    except codec.RecordFormatError:
        return -1
    if m.sys_flag & codec.TRANSACTION_TYPE_MASK == codec.TRANSACTION_ROLLBACK_TYPE:
        return m.store_size
    uniq = m.properties.get(codec.PROPERTY_UNIQ_KEY)
    keys = [uniq] if uniq is not None else []
    keys += [k for k in (m.properties.get(codec.PROPERTY_KEYS) or "").split(" ") if k]
    out.extend((key_hash(f"{m.topic}#{k}"), phy, m.store_timestamp) for k in keys)
    return m.store_size


def _as_arrays(entries: list):
    if not entries:
        return _NO_ENTRIES
    h, o, t = zip(*entries)
    return np.array(h, np.int32), np.array(o, np.int64), np.array(t, np.int64)


def _record_keys_compiled(view, starts: np.ndarray, phys: np.ndarray):
    raw = _index.record_keys(view, np.ascontiguousarray(starts, np.int64), np.ascontiguousarray(phys, np.int64))
    return _entries_of(raw)


def _record_keys_in_python(view, starts: np.ndarray, phys: np.ndarray):
    out: list = []
    for s, p in zip(starts.tolist(), phys.tolist()):
        if _record_entries(view, s, p, out) < 0:
            break
    return _as_arrays(out)


def _walk_keys_compiled(view, start: int, limit: int, base: int):
    """(entries of the records back to back in view[start:limit], where the walk stopped)."""
    raw = _index.walk_keys(view, start, limit, base)
    return _entries_of(raw), raw[3]


def _walk_keys_in_python(view, start: int, limit: int, base: int):
    out: list = []
    pos = start
    while pos < limit:
        size = _record_entries(memoryview(view)[:limit], pos, base + pos, out)
        if size < 0:
            break
        pos += size
    return _as_arrays(out), pos


# Chosen once: store/_index.c's loops when built, else Python's.
record_keys = _record_keys_compiled if _index is not None else _record_keys_in_python
walk_keys = _walk_keys_compiled if _index is not None else _walk_keys_in_python


class IndexService:
    def __init__(self, store):
        self.store = store
        self.directory = os.path.join(store.path, "index")
        self.enabled = store.config.messageIndexEnable
        self.slots, self.entries = store.config.maxHashSlotNum, store.config.maxIndexNum
        self._files: dict[str, IndexFile] = {}
        self._writable = not store.read_only
        self.indexed_to: Optional[int] = None  # the log end up to which this process knows the index complete
        self._listed: Optional[list] = None  # files() as last listed, and the directory's mtime then
        self._listed_at: Optional[int] = None

    # -- files ----------------------------------------------------------------------------------------------

    def files(self) -> list[IndexFile]:
        """The index files, oldest first (another process's new or deleted files seen: the directory is listed
        again when its mtime changed)."""
        try:
            stamp = os.stat(self.directory).st_mtime_ns
        except FileNotFoundError:
            stamp = None
        if stamp is not None and stamp == self._listed_at and self._listed is not None:
            return self._listed
        try:
            names = sorted(n for n in os.listdir(self.directory) if n.isdigit())
        except FileNotFoundError:
            names = []
        for gone in set(self._files) - set(names):
            self._files.pop(gone).close()
        out = []
        for n in names:
            f = self._files.get(n)
            if f is None:
                try:
                    f = self._files[n] = self._open(os.path.join(self.directory, n))
                except (ValueError, OSError) as e:
                    log.warning("store %s: index file %s skipped: %s", self.store.path, n, e)
                    continue
            out.append(f)
        self._listed, self._listed_at = out, stamp
        return out

    def _open(self, path: str) -> IndexFile:
        """A file of the configured geometry, or of one its size shows with RocketMQ's ratio of four entries a
        slot (a broker's store read with another config)."""
        size = os.path.getsize(path)
        slots, entries = self.slots, self.entries
        if size != file_size(slots, entries) and (size - 40) % 84 == 0 and size > 40:
            slots = (size - 40) // 84
            entries = 4 * slots
        return IndexFile(path, slots, entries, self._writable)

    def _new_file(self, prev: Optional[IndexFile]) -> IndexFile:
        os.makedirs(self.directory, exist_ok=True)
        now = int(time.time() * 1000)
        while os.path.exists(os.path.join(self.directory, file_name(now))):
            now += 1  # a file filled within the same millisecond
        name = file_name(now)
        end_phy, end_ts = (prev.end_phy_offset, prev.end_timestamp) if prev is not None else (0, 0)
        f = IndexFile(os.path.join(self.directory, name), self.slots, self.entries, True, create=True,
                      end_phy=end_phy, end_ts=end_ts)
        self._files[name] = f
        self._listed = None
        if prev is not None:  # IndexService.flush of a full file: what an abnormal start keeps of the index
            prev.flush()
            cp = self.store.checkpoint
            cp.index_msg_timestamp = max(cp.index_msg_timestamp, prev.end_timestamp)
            cp.flush()
        return f

    def close(self) -> None:
        for f in self._files.values():
            f.close()
        self._files.clear()
        self._listed = None

    def flush(self) -> None:
        files = list(self._files.values())
        if files and self._writable:
            files[-1].flush()

    # -- writing (under the store's write lock) ---------------------------------------------------------------

    def add(self, hashes: np.ndarray, offsets: np.ndarray, timestamps: np.ndarray) -> None:
        """IndexService.buildIndex's putKey for many entries: into the last file, new files as each fills."""
        files = self.files()
        f = files[-1] if files else None
        i = 0
        while i < len(hashes):
            if f is None or f.is_full():
                f = self._new_file(f)
            i = f.put(hashes, offsets, timestamps, i)

    def index_records(self, positions: np.ndarray, write_pos: int, end: int) -> None:
        """The entries of records just appended at `positions` (commitlog offsets, ascending; the append ran
        from write_pos to end), after catching up whatever lies before them unindexed."""
        if not self.enabled or not len(positions):
            return
        try:
            if self.indexed_to != write_pos:
                self.catch_up(write_pos)
            size = self.store.commit_log.file_size
            if len(positions) == 1 or positions[0] // size == positions[-1] // size:
                parts = [positions]  # one file (a single record: no numpy splitting)
            else:
                parts = np.split(positions, np.flatnonzero(np.diff(positions // size)) + 1)
            for part in parts:
                view, base = self.store.commit_log.view_at(int(part[0]))
                self.add(*record_keys(view, part - base, part))
            self.indexed_to = end
        except Exception as e:
            self._lagging(write_pos, end, e)

    def index_caught_up(self, write_pos: int, end: int) -> None:
        """The entries of records appended from write_pos to end that another writer may have indexed already
        (from the index's end, ours among them): what is missing is caught up from there, nothing written twice.
        Never fails the append, as index_records."""
        if not self.enabled:
            return
        try:
            self.catch_up(end)
        except Exception as e:
            self._lagging(write_pos, end, e)

    def _lagging(self, write_pos: int, end: int, e: Exception) -> None:
        """The index lags; the next writer or open catches it up."""
        self.indexed_to = None
        log.error("store %s: index entries of the records at %d..%d not written (%s); they are rebuilt "
                  "from the commitlog later", self.store.path, write_pos, end, e)

    def catch_up(self, end: int) -> int:
        """Index the records between the index's end and `end` (the log end): after a crash, a writer that
        failed to index, or a store that had no index. Returns how many entries were added."""
        if not self.enabled:
            return 0
        files = self.files()
        cl = self.store.commit_log
        added = 0
        if files and self._writable and files[-1].repair_slots():
            log.warning("store %s: index file %s: slots a killed writer left were repaired", self.store.path,
                        files[-1].name)
        # the newest file holding entries (a crash may leave a new file empty behind it)
        last = next((f for f in reversed(files) if f.index_count > 1), None)
        if last is not None:
            start = last.end_phy_offset
            if start >= end:
                self.indexed_to = end
                return 0
            # the record at the end offset: entries a crash left out (the rest of its keys) go in now
            try:
                view, base = cl.view_at(start)
            except MissingFileError:
                view = None
            if view is None:
                return 0
            h, o, t = record_keys(view, np.array([start - base]), np.array([start]))
            have = set(last_hashes_at(last, start))
            missing = [k for k in range(len(h)) if int(h[k]) not in have]
            if missing:
                self.add(h[missing], o[missing], t[missing])
                added += len(missing)
            size = struct.unpack_from(">i", view, start - base)[0]
            pos = start + size
        else:
            pos = cl.min_offset()
        while pos < end:
            try:
                view, base = cl.view_at(pos)
            except MissingFileError:
                break
            if view is None:
                break
            (h, o, t), stop = walk_keys(view, pos - base, min(len(view), end - base), base)
            if len(h):
                self.add(h, o, t)
                added += len(h)
            pos = base + stop
            if pos < end and pos < base + cl.file_size:
                if stop + 8 <= len(view) and struct.unpack_from(">I", view, stop + 4)[0] == codec.BLANK_MAGIC:
                    pos = base + cl.file_size
                else:
                    log.warning("store %s: the index catch-up stopped at %d, before the log end %d", self.store.path,
                                pos, end)
                    break
        if added:
            log.info("store %s: index caught up to %d (%d entries)", self.store.path, end, added)
        self.indexed_to = end if pos >= end else None
        return added

    def delete_expired(self, min_offset: int) -> int:
        """IndexService.deleteExpiredFile: files (never the last) whose entries all point below the commitlog's
        min offset. Returns how many were deleted."""
        files = self.files()
        deleted = 0
        for f in files[:-1]:
            if f.end_phy_offset >= min_offset:
                break
            log.info("retention: deleting index file %s (its entries end at %d, below %d)", f.path,
                     f.end_phy_offset, min_offset)
            self._files.pop(f.name, None)
            self._listed = None
            f.close()
            os.remove(f.path)
            deleted += 1
        return deleted

    # -- reading --------------------------------------------------------------------------------------------

    def query_offset(self, topic: str, key: str, max_num: int, begin: int, end: int) -> QueryOffsetResult:
        """IndexService.queryOffset: newest files first, each file's matching entries newest first."""
        offsets: list = []
        last_ts = last_phy = 0
        files = self.files()
        for i in range(len(files) - 1, -1, -1):
            f = files[i]
            if i == len(files) - 1:
                last_ts, last_phy = f.end_timestamp, f.end_phy_offset
            if f.is_time_matched(begin, end):
                f.select(f"{topic}#{key}", max_num, begin, end, offsets)
            if f.begin_timestamp < begin or len(offsets) >= max_num:
                break
        return QueryOffsetResult(offsets, last_ts, last_phy)

    def covers_log(self) -> bool:
        """Whether the index holds every record of the log: the oldest file starts at or before the log's first
        record (a store indexed from its start, as ours and RocketMQ's are)."""
        files = self.files()
        if not files:
            return False
        cl_min = self.store.commit_log.min_offset()
        first = files[0]
        begin_phy = first.header()[2]
        return first.index_count <= 1 or begin_phy <= cl_min


def last_hashes_at(f: IndexFile, phy: int) -> list[int]:
    """The hashes of a file's newest entries that point at commitlog offset `phy` (one record's entries)."""
    count = f.index_count
    base = file_size(f.slots, 0)
    out = []
    at = count - 1
    while at >= 1:
        h, off, _, _ = struct.unpack_from(">iqii", f.map, base + at * 20)
        if off != phy:
            break
        out.append(h)
        at -= 1
    return out
