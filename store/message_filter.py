"""What the store asks of a message filter: RocketMQ's store-side MessageFilter, and its vector form.

The store owns this interface (PerMessageFilter: RocketMQ's store-side MessageFilter, named apart from the filter
library's class) and the filter library implements it (filters.MessageFilter), as RocketMQ's store defines
MessageFilter and the broker implements it. A filter that only has the per-message methods is
wrapped by `vectorised`, which loops over them.
"""
from __future__ import annotations

from typing import Mapping, Optional, Protocol, runtime_checkable

import numpy as np
import pyarrow as pa

from rmq_common.message_properties import parse_properties


@runtime_checkable
class PerMessageFilter(Protocol):
    """RocketMQ's MessageFilter: first on a consume-queue unit's tagsCode, then on the record's properties."""

    def is_matched_by_consume_queue(self, tags_code: int) -> bool: ...

    def is_matched_by_commit_log(self, properties: Optional[Mapping[str, str]]) -> bool: ...


@runtime_checkable
class BatchMessageFilter(PerMessageFilter, Protocol):
    """The same decisions over many messages at once (what the scan calls)."""

    def consume_queue_mask(self, tags_codes: np.ndarray) -> np.ndarray:
        """Which units may match, from their tagsCodes (int64) -> bool array."""
        ...

    def properties_text_mask(self, texts: pa.Array) -> pa.BooleanArray:
        """Which records match, from their stored properties texts (key \\x01 value \\x02 ...)."""
        ...


class _PerMessage:
    """A PerMessageFilter with only the per-message methods, asked once per distinct tagsCode and per record."""

    def __init__(self, message_filter: PerMessageFilter):
        self.message_filter = message_filter

    def is_matched_by_consume_queue(self, tags_code: int) -> bool:
        return self.message_filter.is_matched_by_consume_queue(tags_code)

    def is_matched_by_commit_log(self, properties: Optional[Mapping[str, str]]) -> bool:
        return self.message_filter.is_matched_by_commit_log(properties)

    def consume_queue_mask(self, tags_codes: np.ndarray) -> np.ndarray:
        uniq, inverse = np.unique(tags_codes, return_inverse=True)
        decided = np.array([bool(self.is_matched_by_consume_queue(int(c))) for c in uniq], dtype=bool)
        return decided[inverse]

    def properties_text_mask(self, texts: pa.Array) -> pa.BooleanArray:
        return pa.array([bool(self.is_matched_by_commit_log(parse_properties(t))) for t in texts.to_pylist()],
                        pa.bool_())


def vectorised(message_filter: PerMessageFilter) -> BatchMessageFilter:
    """The filter itself when it has the vector methods, else a wrapper that loops over the per-message ones."""
    if isinstance(message_filter, BatchMessageFilter):
        return message_filter
    if not isinstance(message_filter, PerMessageFilter):
        raise TypeError(f"message_filter must have is_matched_by_consume_queue and is_matched_by_commit_log, got "
                        f"{type(message_filter).__name__}")
    return _PerMessage(message_filter)
