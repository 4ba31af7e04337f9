"""CommitLog: one append-only log of every topic's records, split into MappedFiles."""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import Iterator, NamedTuple, Optional

import numpy as np

from rmq_common import message_codec as codec
from rmq_common import native

from .errors import CorruptRecordError, MissingFileError
from .mapped_file import MappedFileQueue


@dataclass
class AppendSegment:
    """A run of consecutive records that land in one file; `blank_after` marks a roll to the next file."""
    file_from_offset: int
    position: int  # absolute commitlog offset of the first record
    first: int     # index range in the batch
    last: int
    blank_after: bool
    nbytes: int = 0  # of its records


class AppendLayout(NamedTuple):
    """Where a batch's records go (CommitLog.plan)."""
    positions: Optional[np.ndarray]  # each record's offset; None when all fit in the current file, back to back
    segments: list[AppendSegment]    # runs of records per file, with the end-of-file blanks between
    end: int                         # the log end after the batch


@dataclass
class WalkedRecord:
    """What dispatch and recovery need of a record, read from its header."""
    offset: int
    size: int
    sys_flag: int
    queue_id: int
    queue_offset: int
    topic: str
    tags: Optional[str]
    store_timestamp: int


class CommitLog:
    def __init__(self, root: str, file_size: int, writable: bool):
        self.directory = os.path.join(root, "commitlog")
        self._file_size = file_size
        self.files = MappedFileQueue(self.directory, file_size, writable)
        self._size_known = bool(self.files.files)

    @property
    def file_size(self) -> int:
        """mappedFileSizeCommitLog as the files on disk have it. A store opened before its first file existed
        (a reader started ahead of the writers, or a writer with another config) takes the size of the first
        file another process created, so offsets map to the right files."""
        if not self._size_known:
            self.files.refresh()
            size = self.files.first_file_size_on_disk()
            if size:
                self._file_size = self.files.file_size = size
                self._size_known = True
        return self._file_size

    def min_offset(self) -> int:
        self.files.refresh()
        return self.files.min_offset()

    def file_start(self, offset: int) -> int:
        return offset - offset % self.file_size

    def roll_next_file(self, offset: int) -> int:
        return self.file_start(offset) + self.file_size

    # -- reading ---------------------------------------------------------------------------------------------

    def view_at(self, offset: int, *, unit: bool = False):
        """(mmap of the file holding offset, file start) or (None, None) when the file is gone by retention
        (below the first file) or not written yet (past the last); MissingFileError for a file missing between
        others, whose messages are lost. unit=True: a consume-queue unit points at offset, and units are
        written after their records, so a file past the last one is missing too (MissingFileError), not
        unwritten."""
        f = self.files.find(offset)
        if f is None:
            self.files.refresh()
            f = self.files.find(offset)
            if f is None:
                self._check_not_a_gap(offset, unit)
                return None, None
        try:
            return f.view(), f.file_from_offset
        except FileNotFoundError:  # deleted by retention in another process since we listed it
            self.files.refresh()
            self._check_not_a_gap(offset, unit)
            return None, None

    def read_records(self, offsets: np.ndarray, sizes: np.ndarray) -> Optional[np.ndarray]:
        """The stored bytes of the records at these commitlog offsets, back to back, as they lie in the files
        (for a pull's response body: sent as they are, never re-encoded), the store's reserved SYSFLAG bits
        cleared. Each record's TOTALSIZE and MAGICCODE
        are checked against what the consume queue said (CorruptRecordError naming the first that differs), so
        nothing torn or overwritten is sent. None when the first record's file is gone by retention."""
        offsets, sizes = np.asarray(offsets, dtype=np.int64), np.asarray(sizes, dtype=np.int64)
        out = np.empty(int(sizes.sum()), dtype=np.uint8)
        file_size = self.file_size
        first_file, last_file = int(offsets[0]) // file_size, int(offsets[-1]) // file_size
        if first_file == last_file:  # the usual case: one gather
            runs = [(0, len(offsets))]
        else:  # records never span files: one gather per file
            cuts = (np.flatnonzero(np.diff(offsets // file_size)) + 1).tolist()
            runs = list(zip([0, *cuts], [*cuts, len(offsets)]))
        at = 0
        for a, b in runs:
            view, base = self.view_at(int(offsets[a]), unit=True)
            if view is None:
                if a == 0:
                    return None
                raise MissingFileError("the file was removed while its records were read",
                                       self._file_path(int(offsets[a])), int(offsets[a]))
            length = int(sizes[a:b].sum())
            bad = native.gather_records(view, offsets[a:b] - base, sizes[a:b], out[at:at + length])
            if bad >= 0:
                i = a + bad
                head = bytes(view[int(offsets[i]) - base:int(offsets[i]) - base + 8])
                raise CorruptRecordError(f"the record does not match its consume-queue unit (it begins "
                                         f"{head.hex()}, expected TOTALSIZE {int(sizes[i])} and a MAGICCODE)",
                                         self._file_path(int(offsets[i])), int(offsets[i]))
            at += length
        # the store's own SYSFLAG bits (atomic batches, for recovery) stay in the store: readers see RocketMQ's
        # flags only. They lie in the high byte of the big-endian SYSFLAG, 36 bytes into each record.
        starts = np.cumsum(sizes) - sizes
        out[starts + codec.POS_SYSFLAG] &= np.uint8(~(codec.RESERVED_SYS_FLAGS >> 24) & 0xFF)
        return out

    def _file_path(self, offset: int) -> str:
        return os.path.join(self.directory, f"{self.file_start(offset):020d}")

    def _check_not_a_gap(self, offset: int, unit: bool = False) -> None:
        files = self.files.files
        if unit and (not files or offset >= files[-1].file_from_offset):
            end = files[-1].file_from_offset + os.path.getsize(files[-1].path) if files else 0
            newest = f"the newest is {files[-1].file_name}" if files else "the commitlog has no file"
            raise MissingFileError(
                f"commitlog file {self.file_start(offset):020d} is missing ({newest}): a consume-queue unit points "
                f"at commitlog offset {offset}, past the end of the log's files at offset {end}; the messages "
                f"from there on are lost", self.path_of(offset), offset)
        if files and files[0].file_from_offset <= offset and files[-1].file_from_offset > offset:
            raise MissingFileError(
                f"commitlog file {self.file_start(offset):020d} is missing between {files[0].file_name} and "
                f"{files[-1].file_name}: the messages it held are lost (retention deletes only from the front)",
                self.path_of(offset), offset)

    def read_message(self, offset: int, size: int, *, decompress: bool = True) -> Optional[codec.MessageExt]:
        """The validated record at offset, None if its file was deleted; CorruptRecordError if it is bad."""
        view, base = self.view_at(offset, unit=True)
        if view is None:
            return None
        pos = offset - base
        try:
            msg = codec.decode_record(view, pos, limit=len(view))
        except codec.RecordFormatError as e:
            raise CorruptRecordError(str(e), self.path_of(offset), offset) from None
        if msg.store_size != size or msg.commit_log_offset != offset:
            raise CorruptRecordError(
                f"record (TOTALSIZE {msg.store_size}, PHYSICALOFFSET {msg.commit_log_offset}) does not match its "
                f"consume-queue unit (size {size}, offset {offset})", self.path_of(offset), offset)
        return msg

    def nothing_written_at(self, offset: int) -> bool:
        """Zeros where a record would start at offset (or no file there yet): a walk from offset would find no
        record and no torn tail."""
        try:
            view, base = self.view_at(offset)
        except MissingFileError:
            return False
        if view is None:
            return True
        rel = offset - base
        return rel + 8 <= len(view) and view[rel:rel + 8] == bytes(8)

    def has_bytes_from(self, offset: int, whole_file: bool) -> bool:
        """Non-zero bytes at offset (the start of a torn record), or anywhere after it with whole_file,
        including files after its file."""
        try:
            view, base = self.view_at(offset)
        except MissingFileError:
            return True  # a hole with files after it
        if view is not None:
            rel = offset - base
            f = self.files.find(offset)
            if f is not None and f.any_nonzero(rel, None if whole_file else rel + 8):
                return True
        if whole_file:
            return any(f.file_from_offset > offset for f in self.files.files)
        return False

    def path_of(self, offset: int) -> str:
        return os.path.join(self.directory, f"{self.file_start(offset):020d}")

    def walk(self, start: int, *, check_crc: bool = True) -> Iterator[WalkedRecord]:
        """Valid records from start on, rolling over end-of-file blanks; stops at the first offset that does not
        hold a valid record (the end of the log, or a torn write). `self.walk_end` is that offset afterwards."""
        pos = start
        self.walk_end = pos
        written: dict[int, int] = {}  # file start -> its data end, taken once per file
        while True:
            try:
                view, base = self.view_at(pos)
            except MissingFileError:
                return  # the valid log ends before the gap; recovery decides what the records after it mean
            if view is None:
                return
            rel = pos - base
            limit = len(view)
            if base not in written:
                f = self.files.find(base)
                written[base] = f.data_end() if f is not None else limit
            if rel >= written[base] and rel + 8 <= limit:
                return  # an unwritten hole: the end of the log, never mapped in
            if rel + 8 > limit:
                if limit < self.file_size:
                    return  # a file cut short (truncated while closed, a torn copy): not a roll to the next
                pos = base + self.file_size
                self.walk_end = pos
                continue
            total, magic = struct.unpack_from(">iI", view, rel)
            if magic == codec.BLANK_MAGIC and total == limit - rel:
                pos = base + self.file_size
                self.walk_end = pos
                continue
            if not codec.is_message_magic(magic):
                return
            try:
                m = codec.decode_record(view, rel, check_crc=check_crc, limit=limit)
            except codec.RecordFormatError:
                return
            if m.commit_log_offset != pos:
                return
            if view[rel + m.store_size - 1] == 0:
                # A record always ends in a non-zero byte (the last property's \x02, or the topic's last
                # character). A zero there is a write cut short inside the properties, which the body CRC
                # cannot see: a torn record, not a message.
                return
            yield WalkedRecord(pos, m.store_size, m.sys_flag, m.queue_id, m.queue_offset, m.topic,
                               m.properties.get(codec.PROPERTY_TAGS), m.store_timestamp)
            pos += m.store_size
            self.walk_end = pos

    # -- writing (under the store's write lock) --------------------------------------------------------------

    def plan(self, write_pos: int, sizes: np.ndarray, total: Optional[int] = None) -> AppendLayout:
        """Physical offsets for records of the given sizes from write_pos, rolling files as RocketMQ does:
        a record that does not fit with 8 bytes to spare goes to the next file after an end-of-file blank.
        The usual batch fits in the current file: positions None then, each record right after the one before
        from write_pos (assign_offsets computes them in its pass). total: the sizes' sum, when known."""
        n = len(sizes)
        segments: list[AppendSegment] = []
        pos = write_pos
        file_from = self.file_start(pos)
        total = int(sizes.sum()) if total is None else total
        if n and pos + total <= file_from + self.file_size - codec.END_FILE_MIN_BLANK_LENGTH:
            segments.append(AppendSegment(file_from, pos, 0, n, False, total))
            return AppendLayout(None, segments, pos + total)
        positions = np.empty(n, dtype=np.int64)
        i = 0
        while i < n:
            file_from = self.file_start(pos)
            file_end = file_from + self.file_size
            ends = pos + np.cumsum(sizes[i:])
            fits = int(np.searchsorted(ends, file_end - codec.END_FILE_MIN_BLANK_LENGTH, side="right"))
            if fits == 0:
                if pos == file_from:
                    raise ValueError(
                        f"a record of {int(sizes[i])} bytes cannot fit in a commitlog file of {self.file_size} bytes "
                        f"(mappedFileSizeCommitLog)")
                segments.append(AppendSegment(file_from, pos, i, i, True))
                pos = file_end
                continue
            positions[i] = pos
            positions[i + 1:i + fits] = ends[:fits - 1]
            roll = i + fits < n
            seg_end = int(ends[fits - 1])
            segments.append(AppendSegment(file_from, pos, i, i + fits, roll, seg_end - pos))
            pos = seg_end
            i += fits
            if roll:
                pos = file_end
        return AppendLayout(positions, segments, pos)

    # Records are encoded this many bytes at a time, each chunk written while the next is encoded: a chunk stays
    # in the CPU's cache from encoding to the copy into the page cache, and the page cache takes bigger writes
    # for less per byte; 1 MiB measured faster than 256 KiB (benchmarks/store_bench.py).
    WRITE_CHUNK = 1 << 20
    # A second thread writes one chunk while the next is encoded only with more than two CPUs: on two cores it
    # lost in sustained appends, though one batch timed alone gains; two busy threads on two vCPUs slow each
    # other more than the overlap gives, and Spark or the kernel's writeback want the other core anyway.
    WRITE_THREAD = len(os.sched_getaffinity(0)) > 2 if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1) > 2

    # Disk blocks are allocated ahead of the write position, this many bytes at a time (fallocate): a write into
    # allocated blocks costs the page cache less than one into a hole, and a full disk fails the allocation,
    # before any byte of the batch is written, rather than a write in the middle of it. A file system without
    # fallocate gets glibc's emulation (posix_fallocate), which reserves the blocks by writing. The reservation
    # runs as far ahead as the file is written (a small store reserves little), at most ALLOCATE_AHEAD.
    ALLOCATE_AHEAD = 16 << 20

    def _allocate(self, f, rel_start: int, rel_end: int) -> None:
        """Make sure [rel_start, rel_end) of file f has its disk blocks, reserving up to ALLOCATE_AHEAD beyond."""
        done = f.allocated_end
        if done is not None and done >= rel_end:
            return
        start = rel_start if done is None else max(done, rel_start)
        end = min(f.file_size, rel_end + min(self.ALLOCATE_AHEAD, rel_end))
        if end > start and hasattr(os, "posix_fallocate"):  # not on macOS
            os.posix_fallocate(f._open_fd(), start, end - start)
        f.allocated_end = end

    def write(self, segments: list[AppendSegment], records, sizes: np.ndarray, sync: bool) -> None:
        """Write a batch's records where plan() put them, in order, each file's end-of-file record after its
        records. records: record_encoder.new_encoder's."""
        files = [self.files.get_or_create(seg.file_from_offset, sync=sync) for seg in segments]
        for f in files:
            f.pin()  # their descriptors are handed to the encoder's writes
        try:
            self._write_files(files, segments, records, sync)
        finally:
            for f in files:
                f.unpin()

    def append_record(self, write_pos: int, record, sync: bool, new_file_sync: bool = False):
        """Write one record at write_pos when it fits in the current file with the end-of-file blank's room to
        spare (as plan() places it): the file written (fsynced when sync), or None, with nothing written, when it
        would roll the file (put_batch does). new_file_sync: a file created here has its name fsynced too."""
        file_from = self.file_start(write_pos)
        rel = write_pos - file_from
        if rel + len(record) > self.file_size - codec.END_FILE_MIN_BLANK_LENGTH:
            return None
        f = self.files.get_or_create(file_from, sync=sync or new_file_sync)
        f.pin()
        try:
            self._allocate(f, rel, rel + len(record))
            f.write(rel, record)
            if sync:
                f.flush()
        finally:
            f.unpin()
        return f

    def _write_files(self, files: list, segments: list[AppendSegment], records, sync: bool) -> None:
        for f, seg in zip(files, segments):
            rel = seg.position - seg.file_from_offset
            self._allocate(f, rel, rel + seg.nbytes + (codec.END_FILE_MIN_BLANK_LENGTH if seg.blank_after else 0))
        records.write_files(files, segments, self.file_size, self.WRITE_CHUNK, self.WRITE_THREAD)
        if sync:
            for f in {id(f): f for f in files}.values():
                f.flush()

    def truncate(self, offset: int) -> None:
        """Drop everything at offset and after: delete later files, then zero the rest of its file. Last files
        first, so a process killed half way leaves its remains right at `offset`, where recovery looks."""
        self.files.refresh()
        for f in reversed(list(self.files.files)):
            if f.file_from_offset > offset or (f.file_from_offset == offset and f is not self.files.first()):
                self.files.delete_file(f)
            elif f.file_from_offset <= offset < f.file_from_offset + f.file_size:
                f.truncate_to(offset - f.file_from_offset)

    def flush(self, files: int = 2) -> None:
        """fsync the last files (the ones being written)."""
        for f in self.files.files[-files:]:
            f.flush()

    def close(self) -> None:
        self.files.close()
