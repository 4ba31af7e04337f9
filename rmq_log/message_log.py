"""Where the messages live, as the `rmq` commands ask about it: MessageLog, the interface that a store directory
(store_log.StoreLog) and a cluster of brokers (cluster_log.ClusterLog) implement, and the values it answers with.

A queue is a QueueKey (brokerName, queueId) in both: a store directory is one broker's, so its queues carry a
broker name too (queue_key.STORE_BROKER_NAME). A log that `names_brokers` is shown queue by brokerName:queueId; a
store by queue id alone."""
from __future__ import annotations

import abc
import dataclasses
from typing import TYPE_CHECKING, Any, Callable, Collection, Optional

from .queue_key import QueueKey

if TYPE_CHECKING:
    from .reads import LogReads, ReadSettings
    from .writes import LogWrites, WriteOptions

# A consume's start: ("earliest" | "latest" | "group", None), ("offset", N) or ("time", ms)
Start = tuple[str, Optional[int]]
DEFAULT_GROUP = "rmq-cli"  # the consumer group of a read that names none
FOREVER = 2**63 - 1  # a time range's open end (ms)
EARLIEST, LATEST = 0, -1  # reset_offsets's `when` for either end (else ms since the epoch), as rmq_client.admin's


@dataclasses.dataclass
class QueueStat:
    """A queue's offsets and, with a group, the group's committed offset (None: none) and lag."""
    topic: str
    queue: QueueKey
    min_offset: int
    max_offset: int
    committed: Optional[int] = None
    lag: Optional[int] = None


@dataclasses.dataclass
class Sent:
    """One message written: where, and `details` the log adds (ordered: its JSON fields after msg_id)."""
    status: str
    topic: str
    queue: QueueKey
    queue_offset: int
    msg_id: str
    details: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class TopicChange:
    """A topic created or deleted: on `brokers` (a cluster), or in the store (`brokers` None) with its queue
    count, whether it existed already (create) and the groups whose offsets of it were removed (delete)."""
    topic: str
    queues: int
    brokers: Optional[list[str]] = None
    existed: bool = False
    groups: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Consume:
    """What `rmq consume` asks for: a topic (one queue id, or all), where to start, at most `max` messages,
    a tag and/or SQL92 selector, the group whose offsets start it and are committed, and whether to follow."""
    topic: str
    queue_id: Optional[int]
    start: Start
    max: Optional[int]
    tags: Optional[str]
    sql: Optional[str]
    group: Optional[str]
    commit: bool
    follow: bool


# emit(message, queue): a consumed message (its attributes as store's MessageExt: topic, queue_offset, body...)
Emit = Callable[[Any, QueueKey], None]


class LineWriter(abc.ABC):
    """Where `produce --file`'s messages go: check(message, lineno) each before it is written, flush(messages,
    first_line) lines_per_flush at a time (message: rmq_cli.message_lines.Message's attributes); closed after."""
    lines_per_flush: int

    def __enter__(self) -> "LineWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @abc.abstractmethod
    def close(self) -> None: ...

    @abc.abstractmethod
    def check(self, m: Any, lineno: int) -> None: ...

    @abc.abstractmethod
    def flush(self, batch: list, first_line: int) -> None: ...


class MessageLog(abc.ABC):
    """Topics, their queues and messages, and consumer groups' offsets: in a store directory or on brokers."""

    names_brokers: bool  # queues are shown as brokerName:queueId
    knows_members: bool  # groups() says which groups have members online

    @abc.abstractmethod
    def where(self) -> dict:
        """What the log is, for JSON output: {"store": path} or {"namesrv": addresses}."""

    @abc.abstractmethod
    def commit_log_bounds(self) -> Optional[dict]:
        """{"min_offset", "max_offset"} of the commitlog, where the log has one place for all messages."""

    # -- topics and queues --

    @abc.abstractmethod
    def topics(self) -> list[dict]:
        """Every topic with messages to show: {"topic", "queues", "messages", ...} (JSON rows of `rmq topics`)."""

    @abc.abstractmethod
    def queue_stats(self, topic: Optional[str], group: Optional[str]) -> list[QueueStat]:
        """Each queue of `topic` (or of every topic): offsets, and `group`'s committed offset and lag."""

    @abc.abstractmethod
    def create_topic(self, topic: str, queues: int, cluster: Optional[str]) -> TopicChange: ...

    @abc.abstractmethod
    def delete_topic(self, topic: str, cluster: Optional[str]) -> TopicChange: ...

    # -- groups --

    @abc.abstractmethod
    def groups(self) -> list[dict]:
        """Per group and topic: {"group", "topic", "queues", "committed", "lag"} (and "online" if knows_members)."""

    @abc.abstractmethod
    def reset_offsets(self, group: str, topic: str, when: int) -> tuple[list[dict], str]:
        """Commit `group`'s offset of every queue of `topic` at time `when` (or EARLIEST / LATEST): the queues'
        rows ({queue fields, "old", "new"}) and how it was done."""

    # -- messages --

    @abc.abstractmethod
    def send(self, topic: str, bodies: list[bytes], tags: Optional[str], keys: Optional[str],
             properties: Optional[dict], sharding_key: Optional[str],
             queue: Optional[tuple[Optional[str], int]], on_sent: Callable[[Sent], None]) -> None:
        """Write messages to `queue` ((brokerName or None, queue id); None: the log chooses), each one written
        handed to on_sent."""

    @abc.abstractmethod
    def line_writer(self, batch_size: int) -> LineWriter:
        """A writer of `produce --file`'s messages (batch_size: messages per append or per batch sent)."""

    @abc.abstractmethod
    def consume(self, request: Consume, emit: Emit) -> None:
        """Read messages as a pull consumer does, each handed to emit; commit the group's offsets if asked."""

    @abc.abstractmethod
    def find_by_key(self, topic: str, key: str, max_count: int, begin: int, end: int) -> list:
        """Messages of `topic` with `key` among their KEYS, stored in [begin, end] (ms), newest first."""

    @abc.abstractmethod
    def find_by_msg_id(self, topic: str, msg_id: str) -> list:
        """The message a producer was given `msg_id` for (its UNIQ_KEY), if there is one."""

    @abc.abstractmethod
    def find_by_offset_msg_id(self, offset_msg_id: str) -> list:
        """The message at an offset msgId (store host and commitlog offset), if there is one."""

    # -- the Spark sink's writes --

    @abc.abstractmethod
    def writes(self, options: WriteOptions, columns: Collection[str]) -> LogWrites:
        """The two-phase writes (writes.LogWrites) of rows with the given columns, with `options` (a
        writes.WriteOptions); writes.WriteOptionError for what this log cannot write."""

    # -- what a reader of ranges asks (the Spark source) --

    @abc.abstractmethod
    def reads(self, settings: ReadSettings) -> LogReads:
        """The log open for a reader's questions and its range readers, read as `settings` say."""
