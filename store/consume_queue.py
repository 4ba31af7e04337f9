"""ConsumeQueue: per topic/queue index of 20-byte units (commitlog offset i64, size i32, tagsCode i64).

Unit k is the message with queue offset k; files hold mappedFileSizeConsumeQueue bytes, are named by their
starting byte position in the queue's logical file, and are created zero-filled. A queue ends at the first
unit whose size is 0.
"""
from __future__ import annotations

import mmap
import os
import struct

import numpy as np

from rmq_common.compiled import _encode

from .errors import CorruptRecordError, disk_full_named
from .mapped_file import MappedFileQueue, pwrite_all

CQ_STORE_UNIT_SIZE = 20
UNIT_DTYPE = np.dtype([("offset", ">i8"), ("size", ">i4"), ("tags_code", ">i8")])
assert UNIT_DTYPE.itemsize == CQ_STORE_UNIT_SIZE
_SIZE = struct.Struct(">i")
_SIZE_AT = 8  # a unit's size field, bytes from its start (after the i8 commitlog offset)


def _write_units_compiled(writes: list, units: np.ndarray) -> None:
    """Write runs of units (UnitWrites) from one array, each run's first size last: the run's bytes with that size
    zeroed, then the size. One compiled call for all runs of a batch."""
    _encode.write_units(writes, units.view(np.uint8))


def write_units_in_python(writes: list, units: np.ndarray) -> None:
    """_write_units_compiled's results, a pwrite at a time."""
    raw = units.view(np.uint8)
    for fd, at, i, n in writes:
        staged = raw[i * CQ_STORE_UNIT_SIZE:(i + n) * CQ_STORE_UNIT_SIZE]
        first_size = staged[8:12].tobytes()  # the first unit's size field (big-endian int32)
        staged[8:12] = 0
        try:
            pwrite_all(fd, staged, at)
        finally:
            staged[8:12] = np.frombuffer(first_size, dtype=np.uint8)
        pwrite_all(fd, first_size, at + 8)


# Chosen once: the compiled writer when rmq_common/_encode.c is built.
write_units = _write_units_compiled if _encode is not None else write_units_in_python


class UnitWrites:
    """The consume-queue units of a batch, written together by write_units when flushed. Units that go to a
    file not created yet are preceded by writing everything gathered so far: a reader takes the existence of a
    queue's later file to mean the files before it are full (ConsumeQueue.max_offset)."""

    def __init__(self, units: np.ndarray):
        self.units = units  # the caller's: used as a buffer, handed back unchanged
        self.writes: list[tuple[int, int, int, int]] = []
        self._pinned: list = []  # the files whose descriptors the writes hold

    def add(self, cq: "ConsumeQueue", start: int, first: int, count: int) -> None:
        """units[first:first+count] are cq's units for queue offsets [start, start+count)."""
        per_file = cq.units_per_file
        pos, i, end = start, first, first + count
        while i < end:
            file_start = pos - pos % per_file
            n = min(end - i, file_start + per_file - pos)
            file_offset = file_start * CQ_STORE_UNIT_SIZE
            f = cq.files.find(file_offset)
            if f is None or f.file_from_offset != file_offset:
                self.flush()
                f = cq.files.get_or_create(file_offset)
            f.pin()
            self._pinned.append(f)
            self.writes.append((f._open_fd(), (pos - file_start) * CQ_STORE_UNIT_SIZE, i, n))
            pos += n
            i += n

    def flush(self) -> None:
        try:
            if self.writes:
                write_units(self.writes, self.units)
        finally:
            self.writes = []
            for f in self._pinned:
                f.unpin()
            self._pinned = []


class ConsumeQueue:
    def __init__(self, root: str, topic: str, queue_id: int, file_size: int, writable: bool,
                 size_known: bool = False):
        """size_known: file_size is the store's own (recorded, or shown by its file names); else it is taken
        from the first file found on disk, for a store that could tell neither."""
        self.topic = topic
        self.queue_id = queue_id
        self.directory = os.path.join(root, "consumequeue", topic, str(queue_id))
        self._file_size = file_size
        self.files = MappedFileQueue(self.directory, file_size, writable)
        self._size_known = size_known
        self._known_max = 0  # a hint: units below it are known written

    @property
    def file_size(self) -> int:
        """mappedFileSizeConsumeQueue as this queue's files have it (see CommitLog.file_size)."""
        if not self._size_known:
            if not self.files.files:
                self.files.refresh()
            size = self.files.first_file_size_on_disk()
            if size and size % CQ_STORE_UNIT_SIZE == 0:
                self._file_size = self.files.file_size = size
                self._size_known = True
        return self._file_size

    @property
    def units_per_file(self) -> int:
        return self.file_size // CQ_STORE_UNIT_SIZE

    # -- reading ---------------------------------------------------------------------------------------------

    def _file_units(self, f) -> np.ndarray:
        try:
            view = f.view()
        except FileNotFoundError:  # deleted by retention in another process since we listed it
            return np.zeros(0, dtype=UNIT_DTYPE)
        return np.frombuffer(view, dtype=UNIT_DTYPE, count=len(view) // CQ_STORE_UNIT_SIZE)

    def refresh(self) -> None:
        self.files.refresh()

    def max_offset(self) -> int:
        """One past the last written unit (RocketMQ's getMaxOffsetInQueue)."""
        if self._known_end_holds():
            return self._known_max
        self.files.refresh()
        last = self.files.last()
        if last is None:
            return 0
        start_unit = last.file_from_offset // CQ_STORE_UNIT_SIZE
        units = self._file_units(last)
        begin = max(0, self._known_max - start_unit)
        if begin >= len(units):
            return start_unit + len(units)
        # never past the file's written extent: the hole after it is zeros, and mapping it in allocates pages
        # on tmpfs (SIGBUS when full)
        written = min(len(units), last.data_end() // CQ_STORE_UNIT_SIZE)
        count = _first_empty_unit(units["size"][:written], min(begin, written))
        if count == 0 and len(self.files.files) > 1 and begin == 0:
            # The next file was created but nothing landed in it yet.
            prev = self.files.files[-2]
            return prev.file_from_offset // CQ_STORE_UNIT_SIZE + len(self._file_units(prev))
        self._known_max = start_unit + count
        return self._known_max

    def _known_end_holds(self) -> bool:
        """Whether the end found last time is still the end, checked without listing the directory (an append
        calls max_offset for every queue it writes): it lies inside the last file we know, whose name is still
        linked, the unit there is empty and the one before it is not. Anything else (units appended, a new
        file, a cut by recovery) takes the full path."""
        last = self.files.last()
        if last is None or self._known_max <= 0:
            return False
        k = self._known_max - last.file_from_offset // CQ_STORE_UNIT_SIZE
        if k * CQ_STORE_UNIT_SIZE % mmap.PAGESIZE == 0:
            return False  # the empty unit starts a page that may be an unwritten hole: not mapped in here
        try:
            view = last.view()  # the two sizes read where they lie: no array over the whole file per pull
            at = k * CQ_STORE_UNIT_SIZE + _SIZE_AT
            if not (0 < k and (k + 1) * CQ_STORE_UNIT_SIZE <= len(view)) or _SIZE.unpack_from(view, at)[0] != 0 \
                    or _SIZE.unpack_from(view, at - CQ_STORE_UNIT_SIZE)[0] == 0:
                return False
            return os.fstat(last._open_fd()).st_nlink > 0  # the file mapped is still the queue's
        except OSError:
            return False

    def first_unit_offset(self) -> int:
        """Queue offset of the first unit still on disk (before correcting for deleted commitlog)."""
        self.files.refresh()
        first = self.files.first()
        return 0 if first is None else first.file_from_offset // CQ_STORE_UNIT_SIZE

    def min_offset(self, commit_log_min_offset: int) -> int:
        """RocketMQ's minLogicOffset: the first unit whose message is still in the commitlog."""
        start = self.first_unit_offset()
        end = self.max_offset()
        if start >= end or commit_log_min_offset <= 0:
            return start
        first = self.units(start, min(end, start + 1))
        if len(first) and first["offset"][0] >= commit_log_min_offset:
            return start
        # Units are in commitlog order: binary search inside the first file(s).
        lo, hi = start, end
        while lo < hi:
            mid = (lo + hi) // 2
            if self.units(mid, mid + 1)["offset"][0] < commit_log_min_offset:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def units(self, start: int, end: int) -> np.ndarray:
        """Units [start, end) as a structured array (a copy for spans over several files, else a view)."""
        if end <= start:
            return np.zeros(0, dtype=UNIT_DTYPE)
        parts = []
        pos = start
        while pos < end:
            f = self.files.find(pos * CQ_STORE_UNIT_SIZE)
            if f is None:
                self.files.refresh()
                f = self.files.find(pos * CQ_STORE_UNIT_SIZE)
                if f is None:
                    self._check_no_gap(pos)
                    break
            first_unit = f.file_from_offset // CQ_STORE_UNIT_SIZE
            units = self._file_units(f)
            if len(units) == 0:  # deleted by retention in another process: nothing to read there any more
                self.files.refresh()
                break
            if pos >= first_unit + len(units):
                # The file is shorter than its place in the queue: a torn last file ends the queue; a short
                # file with others after it is corruption (looping here would never advance).
                self._check_no_gap(pos, short=f)
                break
            stop = min(end, first_unit + len(units))
            parts.append(units[pos - first_unit:stop - first_unit])
            pos = stop
        if not parts:
            return np.zeros(0, dtype=UNIT_DTYPE)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def _check_no_gap(self, pos: int, short=None) -> None:
        """CorruptRecordError when queue offset pos lies in a hole between this queue's files (a missing or
        short file with later files after it). Offsets below the first file are retention's, not a hole."""
        byte_pos = pos * CQ_STORE_UNIT_SIZE
        files = self.files.files
        if not files or byte_pos < files[0].file_from_offset or not any(x.file_from_offset > byte_pos for x in files):
            return
        if short is not None:
            size = os.path.getsize(short.path)
            raise CorruptRecordError(
                f"consume-queue file is {size} bytes, shorter than mappedFileSizeConsumeQueue ({self.file_size}), "
                f"with later files after it: units from queue offset {pos} are missing", short.path,
                byte_pos - short.file_from_offset)
        start = byte_pos - byte_pos % self.file_size
        raise CorruptRecordError(
            f"consume-queue file {start:020d} is missing between the queue's files: units from queue offset {pos} "
            f"are missing", os.path.join(self.directory, f"{start:020d}"), 0)

    def short_files(self) -> list[tuple[str, int]]:
        """(path, size) of this queue's files shorter than mappedFileSizeConsumeQueue."""
        out = []
        for f in self.files.files:
            try:
                size = os.path.getsize(f.path)
            except FileNotFoundError:
                continue
            if size < self.file_size:
                out.append((f.path, size))
        return out

    def repair_short_last_file(self) -> bool:
        """A torn last file (shorter than its configured size): zero its partial unit and extend it to full
        size, as files are created; the units it lost are re-dispatched from the commitlog by recovery."""
        last = self.files.last()
        if last is None:
            return False
        size = os.path.getsize(last.path)
        if size >= self.file_size:
            return False
        self.extend_short_file(last.path, size)
        self._known_max = min(self._known_max, last.file_from_offset // CQ_STORE_UNIT_SIZE)
        return True

    def extend_short_file(self, path: str, size: int) -> None:
        """Zero the partial unit at the end of a short file and give it its full size (zeros: no units)."""
        for f in self.files.files:
            if f.path == path:
                f.close()
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.ftruncate(fd, size - size % CQ_STORE_UNIT_SIZE)
            os.ftruncate(fd, self.file_size)
        finally:
            os.close(fd)
        self.files.refresh()

    def holes(self) -> list[tuple[int, int, str, int]]:
        """Ranges of queue offsets [lo, hi) that lie between this queue's files but in none of them (a short or
        missing file with later files after it), with the path of the file that should hold them and its size
        on disk (0 when missing)."""
        out = []
        files = self.files.files
        per_file = self.units_per_file
        for f, nxt in zip(files, files[1:]):
            first = f.file_from_offset // CQ_STORE_UNIT_SIZE
            try:
                size = os.path.getsize(f.path)
            except FileNotFoundError:
                continue
            have = first + size // CQ_STORE_UNIT_SIZE
            if have < first + per_file:
                out.append((have, first + per_file, f.path, size))
            nxt_first = nxt.file_from_offset // CQ_STORE_UNIT_SIZE
            for gap in range(first + per_file, nxt_first, per_file):
                out.append((gap, gap + per_file, os.path.join(self.directory, f"{gap * CQ_STORE_UNIT_SIZE:020d}"),
                            0))
        return out

    def file_end(self, queue_offset: int) -> int:
        """First queue offset past the file holding queue_offset."""
        return (queue_offset // self.units_per_file + 1) * self.units_per_file

    # -- writing (under the store's write lock) --------------------------------------------------------------

    def put_units(self, start: int, units: np.ndarray) -> None:
        """Write units for queue offsets [start, start+len). In each file, the run's first size goes last, so a
        reader in another process sees the run's units in a file at once or none of them, and a file's units
        only after those in the file before: max_offset, which counts the units of the last file, never runs
        past a unit still held back in the file before it."""
        if len(units) == 0:
            return
        writes = UnitWrites(np.array(units, dtype=UNIT_DTYPE))  # a copy: its first sizes are held back in it
        writes.add(self, start, 0, len(units))
        with disk_full_named(self.directory, f"the consume-queue units of {self.topic}/{self.queue_id} from queue "
                             f"offset {start} (their records are in the commitlog; the next writable open "
                             f"dispatches them)"):
            writes.flush()
        self.written_to(start + len(units))

    def written_to(self, end: int) -> None:
        """Units below queue offset `end` are written."""
        self._known_max = max(self._known_max, end)

    def truncate_from(self, queue_offset: int) -> None:
        """Drop units at queue_offset and after (recovery)."""
        self.files.refresh()
        byte_pos = queue_offset * CQ_STORE_UNIT_SIZE
        first = self.files.first()
        for f in reversed(list(self.files.files)):  # last files first, as CommitLog.truncate
            if f.file_from_offset >= byte_pos and f is not first:
                self.files.delete_file(f)
            elif f.file_from_offset + f.file_size > byte_pos:
                f.truncate_to(max(0, byte_pos - f.file_from_offset))
        self._known_max = min(self._known_max, queue_offset)

    def delete_expired_files(self, commit_log_min_offset: int) -> int:
        """RocketMQ's ConsumeQueue.deleteExpiredFile: delete files (never the last) whose every unit points
        below the commitlog's minimum offset. Returns how many were deleted."""
        return self.clean_expired(commit_log_min_offset)[0]

    def clean_expired(self, commit_log_min_offset: int, delete: bool = True,
                      trust_first_unit: bool = False) -> tuple[int, int]:
        """Retention's pass over this queue: (files deleted, as delete_expired_files, and the queue's min offset
        afterwards, as min_offset gives it). Reads a unit or two with pread (no mapping) instead of the files:
        nothing when no commitlog file was ever removed, the first unit of the first file otherwise (none when
        trust_first_unit and it was read before: the caller knows no other writer was here since), and only a
        queue whose first unit lies below the commitlog minimum is searched further.
        delete=False: only the min offset."""
        cl_min = commit_log_min_offset
        self.files.refresh()
        files = self.files.files
        if not files:
            return 0, 0
        deleted = 0
        if delete and cl_min > 0 and len(files) > 1:
            first = self._first_unit_position(files[0], trust_first_unit)
            if first is None or first < cl_min:  # units are in commitlog order: else no file is wholly below
                for f in list(files[:-1]):
                    unit = self._read_unit(f, last=True)
                    if unit is None or unit[1] == 0 or unit[0] >= cl_min:
                        break
                    self.files.delete_file(f)
                    deleted += 1
        first_file = self.files.first()
        assert first_file is not None  # the last file is never deleted
        start = first_file.file_from_offset // CQ_STORE_UNIT_SIZE
        if cl_min <= 0:
            return deleted, start
        first = self._first_unit_position(first_file, trust_first_unit)
        if first is not None and first >= cl_min:
            return deleted, start
        return deleted, self.min_offset(cl_min)

    def _first_unit_position(self, f, trust: bool):
        """The commitlog offset of f's first unit (None while empty), from memory when trusted."""
        if trust and f.first_unit_position is not None:
            return f.first_unit_position
        unit = self._read_unit(f)
        if unit is None or unit[1] == 0:
            return None
        f.first_unit_position = unit[0]
        return unit[0]

    def _read_unit(self, f, last: bool = False):
        """(commitlog offset, size) of f's first unit, or of its last; None when the file is gone or shorter
        than a unit."""
        try:
            at = (os.path.getsize(f.path) // CQ_STORE_UNIT_SIZE - 1) * CQ_STORE_UNIT_SIZE if last else 0
            if at < 0:
                return None
            raw = f.pread(CQ_STORE_UNIT_SIZE, at)
        except FileNotFoundError:
            return None
        if len(raw) < CQ_STORE_UNIT_SIZE:
            return None
        unit = np.frombuffer(raw, dtype=UNIT_DTYPE)[0]
        return int(unit["offset"]), int(unit["size"])

    def flush(self) -> None:
        for f in self.files.files[-2:]:
            f.flush()

    def close(self) -> None:
        self.files.close()


def _first_empty_unit(sizes: np.ndarray, begin: int) -> int:
    """Index of the first unit with size 0 at or after begin (len(sizes) if none), looking at windows that
    double in size, so the cost follows the number of new units rather than the file size. A linear scan, not a
    binary search: a run being written has a zero first unit in front of written ones."""
    window = 64
    pos = begin
    n = len(sizes)
    while pos < n:
        chunk = sizes[pos:pos + window]
        empty = np.flatnonzero(chunk == 0)
        if len(empty):
            return pos + int(empty[0])
        pos += len(chunk)
        window *= 2
    return n
