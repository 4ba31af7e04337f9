"""StoreCheckpoint: the `checkpoint` file (physicMsgTimestamp, logicsMsgTimestamp, indexMsgTimestamp)."""
from __future__ import annotations

import os
import struct

CHECKPOINT_FILE_SIZE = 4096  # one OS page, as RocketMQ maps it


class StoreCheckpoint:
    def __init__(self, path: str, writable: bool):
        self.path = path
        self.physic_msg_timestamp = 0
        self.logics_msg_timestamp = 0
        self.index_msg_timestamp = 0
        try:
            with open(path, "rb") as f:
                head = f.read(24)
            if len(head) == 24:
                self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp = \
                    struct.unpack(">qqq", head)
        except FileNotFoundError:
            if writable:
                self.flush()

    def min_timestamp(self) -> int:
        """RocketMQ's getMinTimestamp: the older of the commitlog and consume-queue stamps, less 3 s."""
        return max(0, min(self.physic_msg_timestamp, self.logics_msg_timestamp) - 3000)

    def flush(self, sync: bool = True) -> None:
        data = struct.pack(">qqq", self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size < CHECKPOINT_FILE_SIZE:
                os.ftruncate(fd, CHECKPOINT_FILE_SIZE)
            os.pwrite(fd, data, 0)
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
