"""StoreCheckpoint: the `checkpoint` file (physicMsgTimestamp, logicsMsgTimestamp, indexMsgTimestamp), plus the
commitlog offset the last flush covered, in a part of the page RocketMQ does not read."""
from __future__ import annotations

import os
import struct
import zlib
from typing import Optional

CHECKPOINT_FILE_SIZE = 4096  # one OS page, as RocketMQ maps it

# Ours: the commitlog offset up to which every record was fsynced when the timestamps were last stamped.
# RocketMQ 4.x reads bytes 0..24 and 5.x also 24..40; this lies far past both. Magic and CRC tell it apart
# from the zeros of a checkpoint written by a broker.
_FLUSHED = struct.Struct(">8sqI")
_FLUSHED_POS = 2048
_FLUSHED_MAGIC = b"RMQSPKFL"


class StoreCheckpoint:
    def __init__(self, path: str, writable: bool):
        self.path = path
        self.physic_msg_timestamp = 0
        self.logics_msg_timestamp = 0
        self.index_msg_timestamp = 0
        self.flushed_offset: Optional[int] = None
        try:
            with open(path, "rb") as f:
                head = f.read(24)
                f.seek(_FLUSHED_POS)
                flushed = f.read(_FLUSHED.size)
            if len(head) == 24:
                self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp = \
                    struct.unpack(">qqq", head)
            self.flushed_offset = _decode_flushed(flushed)
        except FileNotFoundError:
            if writable:
                self.flush()

    def min_timestamp(self) -> int:
        """RocketMQ's getMinTimestamp: the older of the commitlog and consume-queue stamps, less 3 s."""
        return max(0, min(self.physic_msg_timestamp, self.logics_msg_timestamp) - 3000)

    def read_flushed_offset(self) -> Optional[int]:
        """The flushed offset as the file has it now (another writer may have stamped it since we opened)."""
        try:
            with open(self.path, "rb") as f:
                f.seek(_FLUSHED_POS)
                return _decode_flushed(f.read(_FLUSHED.size))
        except FileNotFoundError:
            return None

    def flush(self, sync: bool = True) -> None:
        data = struct.pack(">qqq", self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size < CHECKPOINT_FILE_SIZE:
                os.ftruncate(fd, CHECKPOINT_FILE_SIZE)
            os.pwrite(fd, data, 0)
            if self.flushed_offset is not None:
                head = struct.pack(">8sq", _FLUSHED_MAGIC, self.flushed_offset)
                os.pwrite(fd, head + struct.pack(">I", zlib.crc32(head)), _FLUSHED_POS)
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)


def _decode_flushed(raw: bytes) -> Optional[int]:
    if len(raw) != _FLUSHED.size:
        return None
    magic, offset, crc = _FLUSHED.unpack(raw)
    if magic != _FLUSHED_MAGIC or crc != zlib.crc32(raw[:16]) or offset < 0:
        return None
    return offset
