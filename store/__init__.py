"""An embedded message store in Apache RocketMQ 4.x's on-disk format (CommitLog + ConsumeQueue)."""
from rmq_common.message_codec import MessageExt
from rmq_common.record_decoder import SCAN_SCHEMA

from .clean_expired import CleanSummary
from .errors import (
    ConfigFileError,
    CorruptRecordError,
    DiskFullError,
    InvalidMessageError,
    MissingFileError,
    ReadOnlyStoreError,
    StoreError,
    StoreRecoveryError,
    UnknownTopicError,
)
from .get_message_result import GetMessageResult, GetMessageStatus, PutMessageStatus, PutResult
from .message_store import MessageStore
from .offset_store import OffsetStore, ReadOffsetType
from .put_batch import PutBatchResult
from .store_config import ASYNC_FLUSH, SYNC_FLUSH, StoreConfig
from .topic_config import TopicConfigError, TopicConfigWarning

__all__ = [
    "MessageStore", "StoreConfig", "ASYNC_FLUSH", "SYNC_FLUSH", "GetMessageStatus", "GetMessageResult",
    "PutResult", "PutBatchResult", "PutMessageStatus", "MessageExt", "SCAN_SCHEMA", "StoreError",
    "CorruptRecordError", "InvalidMessageError", "UnknownTopicError", "ReadOnlyStoreError", "StoreRecoveryError",
    "MissingFileError", "DiskFullError", "ConfigFileError", "TopicConfigError", "TopicConfigWarning",
    "OffsetStore", "ReadOffsetType", "CleanSummary",
]
