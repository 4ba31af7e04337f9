"""ReadStore: what the source's readers ask of a store, answered by a store directory (DirectoryStore, a read-only
store.MessageStore) and by the brokers of a cluster (wire.WireStore). Each location answers every method; where it
has nothing to say (a directory keeps no queues of absent brokers, the brokers give no topic-table version) its
answer says so (False, None, every queue asked each time)."""
from __future__ import annotations

from typing import Any, Optional, Protocol

import numpy as np

from store import MessageStore


class BoundsTracker(Protocol):
    """The (min, max) offsets of a fixed list of queues as arrays by its order, brought up to date by update();
    updates counts the updates that read any queue again."""

    mins: np.ndarray
    maxs: np.ndarray
    updates: int

    def update(self) -> Any: ...


class ReadStore(Protocol):
    """What the readers ask of a store. A queue is a queue id in a directory, a BrokerQueue over the wire."""

    def topics(self) -> list[str]: ...

    def queues(self, topic: str, /) -> list: ...

    def assigned(self, topic: str, queue_ids, /) -> list:
        """The queues option assign's ids name in a topic (over the wire: that queue id of every broker)."""
        ...

    def min_offset(self, topic: str, queue: Any, /) -> int: ...

    def max_offset(self, topic: str, queue: Any, /) -> int: ...

    def queue_bounds(self, queues, /) -> dict: ...

    def bounds_tracker(self, queues, /) -> BoundsTracker:
        """The queues' bounds as arrays kept up to date (a directory reads again only the queues appended to)."""
        ...

    def topics_version(self) -> Optional[int]:
        """A number that changes whenever topics() or queues() may answer differently; None: unknown (asked
        again each time)."""
        ...

    def keep_checkpointed(self, positions: dict, /) -> bool:
        """A restarted query's checkpointed queues the store does not list now, kept at those offsets (over the
        wire: queues of a broker away at the restart); True when the queues listed change."""
        ...

    def offset_for_timestamp(self, topic: str, queue: Any, timestamp_ms: int, /) -> int: ...

    def record_sizes(self, topic: str, queue: Any, start: int, end: int, /) -> Optional[np.ndarray]:
        """The stored size of each message of [start, end) (maxBytesPerTrigger); None: not known here."""
        ...

    def close(self) -> None: ...

    def __enter__(self) -> Any: ...

    def __exit__(self, *exc) -> Any: ...


class DirectoryStore(MessageStore):
    """A store directory as the readers' ReadStore: MessageStore's reads, and the answers of a location whose
    queues are exactly those its files hold."""

    def assigned(self, topic: str, queue_ids) -> list[int]:
        return list(queue_ids)

    def keep_checkpointed(self, positions: dict) -> bool:
        return False  # every queue of the directory is listed; one that is gone is gone
