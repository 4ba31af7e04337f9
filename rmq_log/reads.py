"""The read side of a MessageLog that the Spark source asks (MessageLog.reads): LogReads answers what a reader
plans with (topics, queues, their offsets, the group's committed offsets and their commit, the runs an index
finds) and hands out RangeReaders, each a picklable [start, end) of one queue whose read() yields Arrow record
batches on an executor. A store directory (store_reads.StoreReads) and the brokers of a cluster
(cluster_reads.ClusterReads) implement it.

A queue is (topic, QueueKey(brokerName, queueId)) in both places (a store directory's carry STORE_BROKER_NAME).
How a queue is named, in the Spark source's checkpointed offsets and in messages, is the place's: "3" in a store
directory, "broker-a:3" on brokers (LogReads.queue_name and parse_queue). What the caller decides (whether lost
messages fail the read, which of its settings a broker's refusal names) comes in as a ReadPolicy."""
from __future__ import annotations

import abc
import dataclasses
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional, Protocol, Union

from .queue_key import QueueKey

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

Queue = tuple[str, QueueKey]  # (topic, queue) in either place


class BoundsTracker(Protocol):
    """The (min, max) offsets of a fixed list of queues as arrays by its order, brought up to date by update();
    updates counts the updates that read any queue again."""

    mins: np.ndarray
    maxs: np.ndarray
    updates: int

    def update(self) -> Any: ...


class ReadPolicy(Protocol):
    """What the caller decides about a read's failures; picklable, as range readers carry it to executors."""

    def report_data_loss(self, text: str, fail: bool, instead: str, then: Union[str, Callable[[], str]]) -> None:
        """Messages to read are gone (`text`): raise when `fail`, else say so and go on as `then` says."""

    def lost(self, text: str) -> Exception:
        """The error of a request that would lose messages (a group offset past a queue's end)."""

    def setting_error(self, setting: str, text: str) -> Exception:
        """The error naming a setting of the place to fix: "namesrv", "access_key" or "secret_key"."""


@dataclasses.dataclass(frozen=True)
class ReadSettings:
    """How a reader reads: its consumer group, its policy, its tag and SQL92 selectors (a broker filters with one
    of them), and what tunes one place's reads (metrics_path: a store directory's scan counters, one JSON line per
    range read; pull_batch_size and pulls_in_flight: a broker's pulls; query_key: names the reader in what is
    logged once per query)."""
    group: str
    policy: ReadPolicy
    tags: Optional[str] = None
    sql: Optional[str] = None
    metrics_path: Optional[str] = None
    pull_batch_size: int = 1024
    pulls_in_flight: int = 4
    query_key: str = ""
    log_order: bool = True


def check_data_loss(topic: str, queue: Union[int, str], wanted: int, available: int, fail: bool,
                    policy: ReadPolicy) -> None:
    """Kafka's failOnDataLoss: an offset below the queue's minimum means retention deleted unread messages (queue:
    as the place names it)."""
    if wanted >= available:
        return
    text = (f"topic {topic!r} queue {queue}: wanted offset {wanted} but the earliest available is {available}; "
            f"messages {wanted}..{available - 1} were deleted (retention) before they were read")
    policy.report_data_loss(text, fail, "continue from the earliest available offset", f"continuing at {available}")


class RangeReader(abc.ABC):
    """One queue's [start, end) of a topic, and all an executor needs to read it (pickled to it)."""

    topic: str
    start: int
    end: int

    @abc.abstractmethod
    def key(self) -> tuple:
        """What identifies the range (topic, queue, start, end): the value of the Spark partition that wraps it."""

    @abc.abstractmethod
    def read(self) -> Iterator[pa.RecordBatch]:
        """The range's messages as record batches of the selected columns, filtered."""

    @property
    def offsets(self) -> int:
        """How many offsets it reads (what partitions are sized by)."""
        return self.end - self.start


class RangeRuns(RangeReader):
    """Several ranges read one after another (the runs an index lookup found: few rows each)."""

    def __init__(self, ranges: list[RangeReader]):
        self.ranges = ranges
        self.topic, self.start, self.end = ranges[0].topic, ranges[0].start, ranges[-1].end

    def key(self) -> tuple:
        return tuple(r.key() for r in self.ranges)

    @property
    def offsets(self) -> int:
        return sum(r.offsets for r in self.ranges)

    def read(self) -> Iterator[pa.RecordBatch]:
        for r in self.ranges:
            yield from r.read()


class Committer(Protocol):
    """Writes the group's offsets after each microbatch (a report for outside tools: the reader's checkpoint is the
    truth). pending: positions that failed to go out wait for the next commit."""

    @property
    def pending(self) -> bool: ...

    def commit(self, positions: dict, reads: Any) -> None: ...

    def commit_moved(self, moved: dict, reads: Any) -> None: ...


class LogReads(abc.ABC):
    """What a reader asks of where the messages live, open until closed. Each place answers every method; where it
    has nothing to say (a directory keeps no queues of absent brokers, the brokers give no topic-table version)
    its answer says so (False, None, every queue asked each time)."""

    def __enter__(self) -> "LogReads":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @abc.abstractmethod
    def close(self) -> None: ...

    @abc.abstractmethod
    def describe(self) -> str:
        """Where the data is, for messages: 'the store at /dir' or 'the cluster of name server(s) ...'."""

    # -- topics, queues and their offsets --

    @abc.abstractmethod
    def queue_name(self, queue: QueueKey, /) -> str:
        """How offsets JSON and messages name the queue: "3" in a store directory, "broker-a:3" on brokers."""

    @abc.abstractmethod
    def parse_queue(self, name: str, /) -> QueueKey:
        """The queue that `name` (as queue_name gives it) names here; ValueError saying how this place names its
        queues when it is not such a name."""

    def describe_queues(self, queues: list, /) -> str:
        """A topic's queues, for messages."""
        return ", ".join(self.queue_name(q) for q in queues)

    @abc.abstractmethod
    def topics(self) -> list[str]: ...

    @abc.abstractmethod
    def queues(self, topic: str, /) -> list[QueueKey]: ...

    @abc.abstractmethod
    def assigned(self, topic: str, queue_ids, /) -> list[QueueKey]:
        """The queues option assign's ids name in a topic (on brokers: that queue id of every broker)."""

    @abc.abstractmethod
    def min_offset(self, topic: str, queue: QueueKey, /) -> int: ...

    @abc.abstractmethod
    def max_offset(self, topic: str, queue: QueueKey, /) -> int: ...

    @abc.abstractmethod
    def queue_bounds(self, queues, /) -> dict: ...

    @abc.abstractmethod
    def bounds_tracker(self, queues, /) -> BoundsTracker:
        """The queues' bounds as arrays kept up to date (a directory reads again only the queues appended to)."""

    @abc.abstractmethod
    def topics_version(self) -> Optional[int]:
        """A number that changes whenever topics() or queues() may answer differently; None: unknown (asked
        again each time)."""

    @abc.abstractmethod
    def keep_checkpointed(self, positions: dict, /) -> bool:
        """A restarted query's checkpointed queues the place does not list now, kept at those offsets (on brokers:
        queues of a broker away at the restart); True when the queues listed change."""

    @abc.abstractmethod
    def offset_for_timestamp(self, topic: str, queue: QueueKey, timestamp_ms: int, /) -> int: ...

    @abc.abstractmethod
    def record_sizes(self, topic: str, queue: QueueKey, start: int, end: int, /) -> Optional[np.ndarray]:
        """The stored size of each message of [start, end) (maxBytesPerTrigger); None: not known here."""

    # -- the group's offsets --

    @abc.abstractmethod
    def committed_offsets(self, queues: list) -> dict:
        """The group's committed offset of each (topic, queue) (None or negative where it has none)."""

    @abc.abstractmethod
    def committer(self) -> Committer: ...

    # -- what to read --

    def note_batch_plan(self, queues: list) -> None:
        """A batch read's queues are known: say where they come from when that may surprise."""

    def index_runs(self, ranges: list, key: Optional[str], uniq_key: Optional[str],
                   msg_ids: Optional[frozenset]) -> Optional[list]:
        """The (topic, queue, start, end) runs within `ranges` of the messages with `key` among their keys, with
        UNIQ_KEY `uniq_key` and with one of the offset `msg_ids`, found through an index; None when there is no
        index to ask (then the ranges are scanned)."""
        return None

    @abc.abstractmethod
    def range_readers(self, ranges: list, scan_filter, client_filter, residual, selection,
                      fail_on_data_loss: bool) -> list[RangeReader]:
        """The readers of (topic, queue, start, end) ranges. scan_filter: what a directory's scan applies (tags,
        SQL and pushed filters combined); client_filter: what is checked on the client of brokers (a broker takes
        one expression: the tags or the SQL); residual: position conditions as a row mask (`columns`,
        `row_mask(batch)`); selection: the columns to give (`scan_columns(*needed)`, `to_spark_batch(batch)`)."""

    def log_windows(self, readers: list[RangeReader], min_offsets: int) -> list[RangeReader]:
        """The same ranges for partitions that read a stretch of one log each, across a topic's queues (where the
        queues share one log); those of fewer than min_offsets offsets, and any this place reads queue by queue,
        as they are. Brokers serve a queue at a time: their readers stay as they are."""
        return readers
