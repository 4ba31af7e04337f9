"""MappedFile and MappedFileQueue: fixed-size files named by their start offset (20 digits).

Writes go through pwrite on a file descriptor and reads through a shared read-only mmap; both see the same
page cache, so a reader in another process sees a write as soon as pwrite returns.
"""
from __future__ import annotations

import itertools
import mmap
import os
import re
import time
from collections import OrderedDict
from typing import Optional

import numpy as np

_NAME = re.compile(r"\d{20}")
_ZERO_CHUNK = 1 << 20


def offset_to_file_name(offset: int) -> str:
    return f"{offset:020d}"


def pwrite_all(fd: int, data, position: int) -> None:
    """pwrite all of data at position (pwrite may write less than asked)."""
    view = memoryview(data).cast("B")
    written = 0
    while written < len(view):
        written += os.pwrite(fd, view[written:], position + written)


def data_extents(fd: int, start: int, end: int) -> list[tuple[int, int]]:
    """The allocated extents of [start, end) (SEEK_DATA/SEEK_HOLE); all of it where holes are not reported."""
    out, pos = [], start
    while pos < end:
        try:
            a = os.lseek(fd, pos, os.SEEK_DATA)
        except OSError:  # ENXIO: no data from pos on
            break
        if a >= end:
            break
        pos = min(end, os.lseek(fd, a, os.SEEK_HOLE))
        out.append((a, pos))
    return out


def fsync_path(path: str) -> None:
    """fsync a file or a directory (a directory's entries: a new or renamed name survives a power loss)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _descriptor_budget() -> int:
    try:
        import resource
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if soft == resource.RLIM_INFINITY:
            soft = 1 << 20
    except (ImportError, OSError, ValueError):
        soft = 1024
    # a mapped file holds up to two descriptors (its own and the one mmap keeps); leave half for everything else
    return max(64, min(16384, soft // 4))


class _OpenFiles:
    """The MappedFiles holding descriptors and mappings in this process, least recently used first. Past the
    budget the oldest are let go (a file's mapping and descriptor come back on its next use): a store of tens of
    thousands of queues must not run out of descriptors (or of vm.max_map_count). A file is kept while pinned
    (its descriptor handed to a write in progress) or while something still holds a view into its mapping."""

    def __init__(self, budget: int):
        self.budget = budget
        self.files: "OrderedDict[MappedFile, None]" = OrderedDict()

    def touch(self, f: "MappedFile") -> None:
        files = self.files
        if f in files:
            files.move_to_end(f)
            return
        files[f] = None
        if len(files) > self.budget:
            for old in list(itertools.islice(files, 32)):  # the oldest few; busy ones are passed over
                if old is not f and old._release():
                    del files[old]
                    if len(files) <= self.budget:
                        break

    def forget(self, f: "MappedFile") -> None:
        self.files.pop(f, None)


OPEN_FILES = _OpenFiles(_descriptor_budget())


class MappedFile:
    def __init__(self, path: str, file_from_offset: int, file_size: int, writable: bool):
        self.path = path
        self.file_from_offset = file_from_offset
        self.file_size = file_size
        self._writable = writable
        self._fd: Optional[int] = None
        self._mmap: Optional[mmap.mmap] = None
        self._pins = 0             # writes in progress with this file's descriptor
        self._needs_sync = False   # written, and its descriptor let go before an fsync
        self.allocated_end: Optional[int] = None  # disk blocks known allocated up to here (CommitLog's writes)
        # a consume-queue file's first unit (commitlog offset), once read non-empty: units are written once, so
        # only truncate_to (recovery's cut) changes it here; retention reads it instead of the file
        self.first_unit_position: Optional[int] = None

    @property
    def file_name(self) -> str:
        return os.path.basename(self.path)

    def _open_fd(self) -> int:
        """The file's descriptor, for immediate use (or pin() the file while a write holds it)."""
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR if self._writable else os.O_RDONLY)
        OPEN_FILES.touch(self)
        return self._fd

    def pin(self) -> None:
        self._pins += 1
        OPEN_FILES.touch(self)

    def unpin(self) -> None:
        self._pins -= 1

    def view(self) -> mmap.mmap:
        """A read-only mapping of the whole file (files are created at full size)."""
        if self._mmap is None:
            fd = self._open_fd()
            size = os.fstat(fd).st_size
            if size == 0:
                raise OSError(f"{self.path} is empty")
            self._mmap = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ)
        else:
            OPEN_FILES.touch(self)
        return self._mmap

    def _release(self) -> bool:
        """Let go of the mapping and the descriptor, unless a write holds it or a view still points into it."""
        if self._pins:
            return False
        if self._mmap is not None:
            try:
                self._mmap.close()
            except BufferError:
                return False
            self._mmap = None
        if self._fd is not None:
            if self._writable:
                self._needs_sync = True  # flush() fsyncs it through a new descriptor
            os.close(self._fd)
            self._fd = None
        return True

    def pread(self, n: int, position: int) -> bytes:
        """n bytes at position, read from the mapping or descriptor when the file has one, else through a
        descriptor opened for this read alone: a pass over every file of a large store (retention) must not map
        them all and churn the descriptor budget. FileNotFoundError when another process deleted the file."""
        if self._mmap is not None:
            return bytes(self._mmap[position:position + n])
        if self._fd is not None:
            return os.pread(self._fd, n, position)
        fd = os.open(self.path, os.O_RDONLY)
        try:
            return os.pread(fd, n, position)
        finally:
            os.close(fd)

    def data_end(self) -> int:
        """The end of the file's last allocated extent (SEEK_DATA/SEEK_HOLE): past it the file is a hole, zeros
        that no one wrote. A reader must not map pages there: on tmpfs a read fault in a hole allocates a
        page, and on a full file system that is SIGBUS. File systems without hole reporting say the whole
        file is data."""
        fd = self._open_fd()
        extents = data_extents(fd, 0, os.fstat(fd).st_size)
        return extents[-1][1] if extents else 0

    def any_nonzero(self, start: int, end: Optional[int] = None) -> bool:
        """Whether a byte in [start, end) is non-zero, reading only allocated extents."""
        view = self.view()
        stop = min(self.data_end(), len(view), len(view) if end is None else end)
        return stop > start and bool(np.frombuffer(view, dtype=np.uint8)[start:stop].any())

    def write(self, position: int, data) -> None:
        """Write data at a position relative to the file start."""
        pwrite_all(self._open_fd(), data, position)

    def flush(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)
        elif self._needs_sync:
            fsync_path(self.path)
        self._needs_sync = False

    def truncate_to(self, position: int) -> None:
        """Zero everything from position to the end of the file, keeping its size (as a fresh file has).

        Zeroes with pwrite, never by shrinking the file: a reader in another process may have it mapped, and
        touching a page past a shrunk end is SIGBUS. Chunks are zeroed from the last non-zero one backwards, so
        a writer killed half way leaves non-zero bytes right at `position`, where the next recovery looks."""
        self.first_unit_position = None
        fd = self._open_fd()
        size = os.fstat(fd).st_size
        dirty = []
        pos = position
        while pos < size:
            end = min(size, (pos // _ZERO_CHUNK + 1) * _ZERO_CHUNK)
            data = os.pread(fd, end - pos, pos)
            if data.count(0) != len(data):
                dirty.append((pos, end))
            pos = end
        for a, b in reversed(dirty):
            for x, y in reversed(data_extents(fd, a, b)):  # holes read as zeros: writing them would allocate
                self.write(x, bytes(y - x))
        if size < self.file_size:
            os.ftruncate(fd, self.file_size)

    def last_modified(self) -> float:
        return os.stat(self.path).st_mtime

    def close(self) -> None:
        OPEN_FILES.forget(self)
        if self._mmap is not None:
            try:
                self._mmap.close()
            except BufferError:
                pass  # an Arrow/numpy view still points into it; the mapping goes when they do
            self._mmap = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def destroy(self) -> None:
        self.close()
        try:
            os.remove(self.path)
        except FileNotFoundError:
            pass


_SETTLED_NS = 200_000_000  # a directory mtime this old is past any coarse timestamp tick


class MappedFileQueue:
    """The files of one log (the commitlog, or one consume queue), ordered by start offset."""

    def __init__(self, directory: str, file_size: int, writable: bool):
        self.directory = directory
        self.file_size = file_size
        self.writable = writable
        self.files: list[MappedFile] = []
        self._stamp: Optional[tuple] = None  # the directory's (inode, mtime) at the last complete listing
        self.refresh()

    def refresh(self) -> None:
        """Pick up files created or deleted by other processes, keeping open handles of unchanged ones. One stat of
        the directory when nothing was added or removed since the last listing: a change moves its mtime (trusted
        only once that mtime is older than the filesystem's coarse clock tick, and when the last listing saw no
        file still being created)."""
        try:
            st = os.stat(self.directory)
            stamp: Optional[tuple] = (st.st_ino, st.st_mtime_ns)
        except FileNotFoundError:
            st, stamp = None, None
        if stamp is not None and stamp == self._stamp:
            return
        try:
            names = sorted(n for n in os.listdir(self.directory) if _NAME.fullmatch(n))
        except FileNotFoundError:
            names = []
        known = {f.file_name: f for f in self.files}
        files = []
        complete = True
        for name in names:
            existing = known.pop(name, None)
            if existing is None:
                path = os.path.join(self.directory, name)
                try:
                    size = os.path.getsize(path)
                except FileNotFoundError:  # removed by retention in another process meanwhile
                    continue
                if size == 0:
                    complete = False
                    continue  # being created by another process
                existing = MappedFile(path, int(name), max(size, self.file_size) if self.writable else size,
                                      self.writable)
            files.append(existing)
        for gone in known.values():
            gone.close()
        self.files = files
        settled = st is not None and time.time_ns() - st.st_mtime_ns > _SETTLED_NS
        self._stamp = stamp if complete and settled else None

    def first_file_size_on_disk(self) -> int:
        """The size of the first file as it is on disk; 0 while there is none."""
        first = self.first()
        if first is None:
            return 0
        try:
            return os.path.getsize(first.path)
        except FileNotFoundError:  # removed by retention in another process meanwhile
            return 0

    def first(self) -> Optional[MappedFile]:
        return self.files[0] if self.files else None

    def last(self) -> Optional[MappedFile]:
        return self.files[-1] if self.files else None

    def min_offset(self) -> int:
        return self.files[0].file_from_offset if self.files else 0

    def find(self, offset: int) -> Optional[MappedFile]:
        """The file holding the byte at offset, or None."""
        if not self.files or offset < self.files[0].file_from_offset:
            return None
        lo, hi = 0, len(self.files) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.files[mid].file_from_offset <= offset:
                lo = mid
            else:
                hi = mid - 1
        f = self.files[lo]
        if offset < f.file_from_offset + f.file_size:
            return f
        return None

    def get_or_create(self, file_from_offset: int, sync: bool = False) -> MappedFile:
        """The file starting at file_from_offset, created at full size (zero-filled) when missing."""
        f = self.find(file_from_offset)
        if f is not None and f.file_from_offset == file_from_offset:
            return f
        os.makedirs(self.directory, exist_ok=True)
        path = os.path.join(self.directory, offset_to_file_name(file_from_offset))
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size < self.file_size:
                os.ftruncate(fd, self.file_size)
        finally:
            os.close(fd)
        if sync:
            fsync_path(self.directory)  # the new name must survive a power loss with the data in it
        self.refresh()
        f = self.find(file_from_offset)
        assert f is not None and f.file_from_offset == file_from_offset
        return f

    def delete_file(self, f: MappedFile) -> None:
        f.destroy()
        self.files = [x for x in self.files if x is not f]

    def close(self) -> None:
        for f in self.files:
            f.close()
