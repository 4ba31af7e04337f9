"""The one seam between a store directory and a cluster: the source's readers ask a SourceBackend for what they
read offsets of (a ReadStore), the group's committed offsets, where to commit them, the partitions of a plan and
how an executor reads one; the sink writes through the MessageLog that sink_log opens (rmq_log.open_log). backend_for
and open_log pick the implementation once, from the parsed options (as Spark's Kafka source picks one
KafkaOffsetReader); nothing else asks which one it is."""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Iterator, Optional, Protocol

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from .offsets import OffsetCommitter, Positions, open_store
from .options import SourceOptions
from .read_store import ReadStore
from .schema import Selection

if TYPE_CHECKING:  # the sink's modules import this one
    from rmq_log import MessageLog

    from .sink.sink_options import SinkOptions

log = logging.getLogger(__name__)


class Committer(Protocol):
    """Writes the group's offsets after each microbatch (a report for outside tools: the checkpoint is the
    truth). pending: positions that failed to go out wait for the next commit."""

    @property
    def pending(self) -> bool: ...

    def commit(self, positions: Positions, store: Any) -> None: ...

    def commit_moved(self, moved: Positions, store: Any) -> None: ...


class SourceBackend:
    """The interface; LocalBackend and WireBackend implement it."""

    wire = False  # offsets JSON names queues as brokerName:queueId (True) or plain ids

    def __init__(self, opts: SourceOptions):
        self.opts = opts

    def open(self) -> ReadStore:
        raise NotImplementedError

    def describe(self) -> str:
        """Where the data is, for messages: 'the store at /dir' or 'the cluster of name server(s) ...'."""
        raise NotImplementedError

    def committed_offsets(self, store: ReadStore, queues: list) -> dict:
        """The group's committed offset of each queue (None or negative where it has none)."""
        raise NotImplementedError

    def committer(self) -> Committer:
        raise NotImplementedError

    def note_batch_plan(self, queues: list) -> None:
        """A batch read's queues are known: say where they come from when that may surprise."""

    def index_runs(self, store: ReadStore, ranges: list, msg_ids) -> Optional[list]:
        """The runs of a batch read's key, unique-key or msg_id lookup found through the store's index, or None
        when there is no index to ask (then the ranges are scanned)."""
        return None

    def partitions(self, ranges: list, scan_filter, client_filter, residual, selection: Selection) -> list:
        """The InputPartitions of (topic, queue, start, end) ranges. scan_filter: what a directory's scan applies
        (tags, SQL and pushed filters combined); client_filter: what is checked on the client over the wire (the
        broker takes one expression: the tags or the SQL)."""
        raise NotImplementedError

    @staticmethod
    def read(partition: InputPartition) -> Iterator[pa.RecordBatch]:
        raise NotImplementedError


class LocalBackend(SourceBackend):
    """A store directory (option path), opened read-only; offsets in its config/consumerOffset.json."""

    def open(self) -> ReadStore:
        return open_store(self.opts.path)

    def describe(self) -> str:
        return f"the store at {self.opts.path}"

    def committed_offsets(self, store: ReadStore, queues: list) -> dict:
        from store import OffsetStore, ReadOffsetType

        offset_store = OffsetStore(self.opts.path, self.opts.consumer_group)
        offset_store.load()
        return {q: offset_store.read_offset(q, ReadOffsetType.READ_FROM_STORE) for q in queues}

    def committer(self) -> Committer:
        return OffsetCommitter(self.opts.path, self.opts.consumer_group)

    def index_runs(self, store: ReadStore, ranges: list, msg_ids) -> Optional[list]:
        from .index_lookup import lookup_runs
        return lookup_runs(store, ranges, self.opts.key, self.opts.uniq_key, msg_ids)

    def partitions(self, ranges: list, scan_filter, client_filter, residual, selection: Selection) -> list:
        from .partition import QueueRange

        o = self.opts
        return [QueueRange(o.path, t, q, s, e, scan_filter, o.fail_on_data_loss, o.metrics_path, residual, selection)
                for t, q, s, e in ranges]

    @staticmethod
    def read(partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from .partition import read_partition
        return read_partition(partition)


class WireBackend(SourceBackend):
    """The brokers of a cluster (option namesrvAddr): routes from the name servers, offsets from each broker."""

    wire = True

    def open(self) -> ReadStore:
        from .wire import WireStore

        o = self.opts
        assert o.namesrv_addr is not None
        return WireStore(o.namesrv_addr, o.consumer_group, o.broker_timeout_ms, o.credentials)

    def describe(self) -> str:
        return f"the cluster of name server(s) {self.opts.namesrv_addr}"

    def committed_offsets(self, store: ReadStore, queues: list) -> dict:
        # QUERY_CONSUMER_OFFSET of each queue, from its broker
        return {(t, q): store.committed_offset(t, q) for t, q in queues}  # type: ignore[attr-defined]

    def committer(self) -> Committer:
        from .wire import WireOffsetCommitter
        return WireOffsetCommitter(self.opts.consumer_group)

    def note_batch_plan(self, queues: list) -> None:
        by_broker: dict = {}
        for _, q in queues:
            by_broker[q.broker_name] = by_broker.get(q.broker_name, 0) + 1
        log.warning("batch read through %s: the route lists broker(s) %s; a stopped broker's queues are not in the "
                    "read", self.describe(), ", ".join(f"{b} ({n} queue(s))" for b, n in sorted(by_broker.items()))
                    or "none")

    def partitions(self, ranges: list, scan_filter, client_filter, residual, selection: Selection) -> list:
        from .wire import wire_ranges
        return wire_ranges(self.opts, ranges, client_filter, residual, selection)

    @staticmethod
    def read(partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from .wire import read_wire_partition
        return read_wire_partition(partition)


def backend_for(opts: SourceOptions) -> SourceBackend:
    """The backend the options name: namesrvAddr the brokers, else the store directory."""
    return WireBackend(opts) if opts.namesrv_addr is not None else LocalBackend(opts)


def sink_log(opts: SinkOptions) -> MessageLog:
    """The log the sink writes to (rmq_log.open_log chooses it): the brokers of namesrvAddr, else the store
    directory; its writes() does the rest."""
    from rmq_log import open_log
    return open_log(store=opts.path, namesrv=opts.namesrv_addr, config=opts.store_config)
