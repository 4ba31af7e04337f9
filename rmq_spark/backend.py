"""Where the source and the sink meet the place the messages live: the rmq_log.MessageLog their options name, chosen
once (as Spark's Kafka source picks one KafkaOffsetReader). The source's readers read through its reads()
(SourceBackend), the sink through its writes() (sink_log); rmq_log.open_log chooses the log for both.
Nothing else asks which place it is."""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from rmq_log.open_log import open_log
from rmq_log.reads import LogReads, ReadSettings

from .options import SourceOptions
from .partition import LogPartition, read_partition
from .read_policy import POLICY
from .schema import Selection

if TYPE_CHECKING:  # the sink's modules import this one
    from rmq_log import MessageLog

    from .sink.sink_options import SinkOptions


class SourceBackend:
    """The log the source's options name, and how its readers read it (group, selectors, failOnDataLoss's
    policy, pull and metrics settings)."""

    def __init__(self, opts: SourceOptions):
        self.opts = opts
        self.log = open_log(store=opts.path, namesrv=opts.namesrv_addr, account=opts.credentials,
                            timeout_ms=opts.broker_timeout_ms)
        self.settings = ReadSettings(group=opts.consumer_group, policy=POLICY, tags=opts.tags, sql=opts.sql,
                                     metrics_path=opts.metrics_path, pull_batch_size=opts.pull_batch_size,
                                     pulls_in_flight=opts.pulls_in_flight, query_key=opts.query_key)

    def open(self) -> LogReads:
        return self.log.reads(self.settings)

    def partitions(self, reads: LogReads, ranges: list, scan_filter, client_filter, residual,
                   selection: Selection) -> list[LogPartition]:
        """The partitions of (topic, queue, start, end) ranges (LogReads.range_readers says what the filters
        are)."""
        return [LogPartition(r) for r in reads.range_readers(ranges, scan_filter, client_filter, residual, selection,
                                                             self.opts.fail_on_data_loss)]

    @staticmethod
    def read(partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(partition)


def backend_for(opts: SourceOptions) -> SourceBackend:
    return SourceBackend(opts)


def sink_log(opts: SinkOptions) -> MessageLog:
    """The log the sink writes to (rmq_log.open_log chooses it): the brokers of namesrvAddr, else the store
    directory; its writes() does the rest."""
    from rmq_log import open_log
    return open_log(store=opts.path, namesrv=opts.namesrv_addr, config=opts.store_config)
