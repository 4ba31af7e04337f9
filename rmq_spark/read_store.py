"""ReadStore: what the source's readers ask of a store, answered by a store directory (store.MessageStore) and by
the brokers of a cluster (wire.WireStore)."""
from __future__ import annotations

from typing import Any, Protocol


class ReadStore(Protocol):
    """What the readers ask of a store: MessageStore (a directory) and wire.WireStore (the brokers of a cluster)
    both answer it. A queue is a queue id in a directory, a BrokerQueue over the wire. Optional extras the
    readers use when present: topics_version() and bounds_tracker(queues) (a directory: cheap change checks),
    assigned(topic, ids) (over the wire: that queue id of every broker)."""

    def topics(self) -> list[str]: ...

    def queues(self, topic: str, /) -> list: ...

    def min_offset(self, topic: str, queue: Any, /) -> int: ...

    def max_offset(self, topic: str, queue: Any, /) -> int: ...

    def queue_bounds(self, queues, /) -> dict: ...

    def offset_for_timestamp(self, topic: str, queue: Any, timestamp_ms: int, /) -> int: ...

    def close(self) -> None: ...

    def __enter__(self) -> Any: ...

    def __exit__(self, *exc) -> Any: ...
