"""One RocketMQ 4.x IndexFile (store/index/IndexFile.java), byte for byte:

    header (40 bytes, big-endian): beginTimestamp i64, endTimestamp i64, beginPhyOffset i64, endPhyOffset i64,
                                   hashSlotCount i32, indexCount i32
    hash slots: maxHashSlotNum x i32, the newest entry of keys hashing to the slot (0: none)
    entries:    maxIndexNum x 20 bytes: keyHash i32, phyOffset i64, timeDiff i32 (seconds after
                beginTimestamp), prevIndex i32 (the slot's entry before this one, 0: none)

Entry 0 is never used (indexCount starts at 1), so a file holds maxIndexNum - 1 entries. A key is `topic#key`,
hashed as |String.hashCode()| (0 for Integer.MIN_VALUE). Files are named by the local time they were created
(yyyyMMddHHmmssSSS)."""
from __future__ import annotations

import mmap
import os
import struct
import time
from typing import Optional

import numpy as np

from .compiled import _index
from .mapped_file import data_extents
from .tag_hash import tags_hash_code

HEADER_SIZE = 40
SLOT_SIZE = 4
ENTRY_SIZE = 20
_HEADER = struct.Struct(">qqqqii")
_ENTRY = struct.Struct(">iqii")


ALLOCATE_AHEAD = 1 << 20  # at most this many bytes of entries allocated at a time (52,428 entries)
# Bytes of hash slots allocated at a time, where a put's keys land: a file reserves the parts of its 20 MB of
# slots its keys touched, as a stock file (sparse, mapped) takes only the pages written, so a small store costs
# kilobytes, not the whole slot table.
SLOT_CHUNK = 64 << 10


def file_size(slots: int, entries: int) -> int:
    return HEADER_SIZE + slots * SLOT_SIZE + entries * ENTRY_SIZE


def key_hash(key: str) -> int:
    """IndexFile.indexKeyHashMethod."""
    h = abs(tags_hash_code(key))
    return 0 if h > 0x7FFFFFFF else h


def file_name(now_ms: Optional[int] = None) -> str:
    """UtilAll.timeMillisToHumanString: the local time, to the millisecond."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    t = time.localtime(now_ms // 1000)
    return time.strftime("%Y%m%d%H%M%S", t) + f"{now_ms % 1000:03d}"


class IndexFile:
    def __init__(self, path: str, slots: int, entries: int, writable: bool, create: bool = False,
                 end_phy: int = 0, end_ts: int = 0):
        """create=True makes a new file of its full size (sparse) whose begin and end are the previous file's
        end, as IndexService.getAndCreateLastIndexFile does."""
        self.path, self.name = path, os.path.basename(path)
        self.slots, self.entries = slots, entries
        size = file_size(slots, entries)
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0) if writable else os.O_RDONLY
        fd = os.open(path, flags, 0o644)
        # The pages a put writes are allocated first (posix_fallocate), so a full disk is an OSError (ENOSPC) the
        # index service logs, never a SIGBUS on a sparse file's hole. Slots are read with pread, never through
        # the map: slots no key touched are holes (here and in a stock file), and a mapped read of a hole
        # allocates a page on tmpfs, a SIGBUS when it is full.
        self.fd: Optional[int] = fd
        self.writable = writable
        self._slot_chunks: Optional[np.ndarray] = None  # chunks of the header and slots this process allocated
        self._allocated_to = 0  # entries allocated below this file offset by this process
        try:
            if create:
                os.ftruncate(fd, size)
                self._allocate_slots()
            actual = os.fstat(fd).st_size
            if actual != size:
                raise ValueError(f"index file {path} is {actual} bytes, not the {size} of maxHashSlotNum={slots} "
                                 f"and maxIndexNum={entries}")
            self.map = mmap.mmap(fd, size, access=mmap.ACCESS_WRITE if writable else mmap.ACCESS_READ)
        except BaseException:
            self.fd = None
            os.close(fd)
            if create:
                os.unlink(path)
            raise
        if create and (end_phy > 0 or end_ts > 0):
            self.map[0:32] = struct.pack(">qqqq", end_ts, end_ts, end_phy, end_phy)

    def header(self) -> tuple[int, int, int, int, int, int]:
        """(begin ts, end ts, begin phy, end phy, hash slot count, index count)."""
        return _HEADER.unpack_from(self.map, 0)

    @property
    def begin_timestamp(self) -> int:
        return self.header()[0]

    @property
    def end_timestamp(self) -> int:
        return self.header()[1]

    @property
    def end_phy_offset(self) -> int:
        return self.header()[3]

    @property
    def index_count(self) -> int:
        return max(1, self.header()[5])

    def is_full(self) -> bool:
        return self.index_count >= self.entries

    def _allocate_slots(self, hashes: Optional[np.ndarray] = None) -> None:
        """The header's chunk and those of the slots `hashes` land in, each allocated once by this process;
        neighbouring chunks in one call."""
        if not self.writable or self.fd is None:
            return
        table = HEADER_SIZE + self.slots * SLOT_SIZE
        if self._slot_chunks is None:
            self._slot_chunks = np.zeros(-(-table // SLOT_CHUNK), dtype=bool)
        chunks = np.zeros(1, dtype=np.int64)
        if hashes is not None and len(hashes):
            at = HEADER_SIZE + (hashes.astype(np.int64) % self.slots) * SLOT_SIZE
            chunks = np.concatenate((chunks, at // SLOT_CHUNK))
        chunks = chunks[~self._slot_chunks[chunks]]  # most puts: none new, and no sorting
        if not len(chunks):
            return
        new = np.unique(chunks)
        for run in np.split(new, np.flatnonzero(np.diff(new) != 1) + 1):
            start = int(run[0]) * SLOT_CHUNK
            os.posix_fallocate(self.fd, start, min((int(run[-1]) + 1) * SLOT_CHUNK, table) - start)
        self._slot_chunks[new] = True

    def _allocate_entries(self, n: int) -> None:
        """After _allocate_slots (the header's chunk among them): the places of the next n entries (appended
        after the counted ones), allocated ahead (as far as the file is written, at most ALLOCATE_AHEAD) so that
        single puts do not pay a system call each."""
        if not self.writable or self.fd is None:
            return
        base = HEADER_SIZE + self.slots * SLOT_SIZE
        count = max(1, self.header()[5])
        end = base + min(count + n, self.entries) * ENTRY_SIZE
        start = max(self._allocated_to, base + count * ENTRY_SIZE)
        if end > start:
            ahead = min(ALLOCATE_AHEAD, max(SLOT_CHUNK, end - base))  # as far ahead as the file is written
            upto = min(max(end, start + ahead), base + self.entries * ENTRY_SIZE)
            os.posix_fallocate(self.fd, start, upto - start)
            self._allocated_to = upto

    def put(self, hashes: np.ndarray, offsets: np.ndarray, timestamps: np.ndarray, first: int = 0) -> int:
        """IndexFile.putKey for entries first.. until the file is full; returns the first entry not written."""
        self._allocate_slots(hashes[first:])
        self._allocate_entries(len(hashes) - first)
        return _put_entries(self, hashes, offsets, timestamps, first)

    def _put_entries_in_python(self, hashes: np.ndarray, offsets: np.ndarray, timestamps: np.ndarray,
                               first: int) -> int:
        begin_ts, _, _, _, used, count = self.header()
        count = max(count, 1)
        base = HEADER_SIZE + self.slots * SLOT_SIZE
        i = first
        for i in range(first, len(hashes)):
            if count >= self.entries:
                break
            h, off, ts = int(hashes[i]), int(offsets[i]), int(timestamps[i])
            slot = HEADER_SIZE + (h % self.slots) * SLOT_SIZE
            prev = struct.unpack_from(">i", self.map, slot)[0]
            prev = 0 if prev <= 0 or prev > count else prev
            diff = 0 if begin_ts <= 0 else min(max(int((ts - begin_ts) / 1000), 0), 0x7FFFFFFF)
            _ENTRY.pack_into(self.map, base + count * ENTRY_SIZE, h, off, diff, prev)
            struct.pack_into(">i", self.map, slot, count)
            if count <= 1:
                begin_ts = ts
                struct.pack_into(">q", self.map, 0, ts)
                struct.pack_into(">q", self.map, 16, off)
            used += prev == 0
            count += 1
            struct.pack_into(">q", self.map, 8, ts)
            struct.pack_into(">q", self.map, 24, off)
        else:
            i = len(hashes)
        struct.pack_into(">ii", self.map, 32, used, count)
        return i

    def repair_slots(self) -> int:
        """Slots a writer killed in the middle of a batch left pointing at entries past the header's count (written,
        never counted): each set back to the newest counted entry of its chain, before new entries take those
        places. Returns how many were repaired."""
        if self.fd is None:
            raise ValueError(f"index file {self.path} is closed")
        count = self.index_count
        base = HEADER_SIZE + self.slots * SLOT_SIZE
        repaired = 0
        for start, end in data_extents(self.fd, HEADER_SIZE, base):  # holes: slots never written
            first = (start - HEADER_SIZE) // SLOT_SIZE
            vals = np.frombuffer(self._read_slots(first, (end - start) // SLOT_SIZE), dtype=">i4")
            stale = np.flatnonzero(vals >= count)
            for k in stale.tolist():
                at, seen = int(vals[k]), 0
                while at >= count and at < self.entries and seen < 1000:
                    at = struct.unpack_from(">i", self.map, base + at * ENTRY_SIZE + 16)[0]
                    seen += 1
                struct.pack_into(">i", self.map, HEADER_SIZE + (first + k) * SLOT_SIZE, at if 0 < at < count else 0)
            repaired += len(stale)
        return repaired

    def _read_slots(self, first: int, n: int) -> bytes:
        if self.fd is None:
            raise ValueError(f"index file {self.path} is closed")
        want = n * SLOT_SIZE
        raw = os.pread(self.fd, want, HEADER_SIZE + first * SLOT_SIZE)
        if len(raw) != want:
            raise OSError(f"index file {self.path}: {len(raw)} bytes of hash slots read, not {want}")
        return raw

    def is_time_matched(self, begin: int, end: int) -> bool:
        b, e = self.header()[:2]
        return (begin < b and end > e) or b <= begin <= e or b <= end <= e

    def select(self, key: str, max_num: int, begin: int, end: int, out: list) -> None:
        """IndexFile.selectPhyOffset: append to `out` the commitlog offsets of the entries whose hash is the key's
        and whose time lies in [begin, end], newest first, until out holds max_num."""
        h = key_hash(key)
        begin_ts, _, _, _, _, count = self.header()
        slot = struct.unpack(">i", self._read_slots(h % self.slots, 1))[0]
        if slot <= 0 or slot > count or count <= 1:
            return
        base = HEADER_SIZE + self.slots * SLOT_SIZE
        at, seen = slot, 0
        while len(out) < max_num and seen <= count:
            read_hash, off, diff, prev = _ENTRY.unpack_from(self.map, base + at * ENTRY_SIZE)
            if diff < 0:
                break
            when = begin_ts + diff * 1000
            if read_hash == h and begin <= when <= end:
                out.append(off)
            if prev <= 0 or prev > count or prev == at or when < begin:
                break
            at, seen = prev, seen + 1

    def flush(self) -> None:
        self.map.flush()

    def __del__(self) -> None:
        if getattr(self, "fd", None) is not None:
            os.close(self.fd)  # type: ignore[arg-type]
            self.fd = None

    def close(self) -> None:
        try:
            self.map.close()
        except BufferError:  # a reader's view still open: the mapping goes with it
            pass
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _put_entries_compiled(f: IndexFile, hashes: np.ndarray, offsets: np.ndarray, timestamps: np.ndarray,
                          first: int) -> int:
    return _index.put_entries(f.map, f.slots, f.entries, hashes, offsets, timestamps, first)


# Chosen once: store/_index.c's loop when built, else Python's.
_put_entries = _put_entries_compiled if _index is not None else IndexFile._put_entries_in_python
