"""GetMessageStatus and GetMessageResult, as RocketMQ's DefaultMessageStore.getMessage returns them."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field


class GetMessageStatus(str, enum.Enum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"

    def __str__(self):
        return self.value


class PutMessageStatus(str, enum.Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"

    def __str__(self):
        return self.value


@dataclass
class GetMessageResult:
    status: GetMessageStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list = field(default_factory=list)
    records: int = 0  # messages found as their stored bytes (the broker's pull), not decoded into `messages`

    @property
    def message_count(self) -> int:
        return len(self.messages) or self.records

    @property
    def buffer_total_size(self) -> int:
        return sum(m.store_size for m in self.messages)


@dataclass
class PutResult:
    msg_id: str
    topic: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    status: PutMessageStatus = PutMessageStatus.PUT_OK
    uniq_key: str = ""
