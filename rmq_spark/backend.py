"""Where the source and the sink meet the place the messages live: the rmq_log.MessageLog their options name, chosen
once (as Spark's Kafka source picks one KafkaOffsetReader). The source's readers read through its reads()
(SourceBackend), the sink through its writes() (sink_log); rmq_log.open_log opens the log for both, from the
settings the place parsed out of the options. Nothing here asks which place it is."""
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
    policy, and what its place tunes of the reads)."""

    def __init__(self, opts: SourceOptions):
        self.opts = opts
        self.log = open_log(**opts.place.log_settings)
        self.settings = ReadSettings(group=opts.consumer_group, policy=POLICY, tags=opts.tags, sql=opts.sql,
                                     query_key=opts.query_key, **opts.place.tuning)

    def open(self) -> LogReads:
        return self.log.reads(self.settings)

    def partitions(self, reads: LogReads, ranges: list, scan_filter, client_filter, residual,
                   selection: Selection, log_order: bool = True) -> list[LogPartition]:
        """The partitions of (topic, queue, start, end) ranges (LogReads.range_readers says what the filters
        are); with log_order, where the place can, those of minOffsetsPerPartition offsets or more as windows of
        its log across a topic's queues (LogReads.log_windows)."""
        readers = reads.range_readers(ranges, scan_filter, client_filter, residual, selection,
                                      self.opts.fail_on_data_loss)
        if log_order:
            readers = reads.log_windows(readers, self.opts.min_offsets_per_partition)
        return [LogPartition(r) for r in readers]

    @staticmethod
    def read(partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(partition)


def backend_for(opts: SourceOptions) -> SourceBackend:
    return SourceBackend(opts)


def sink_log(opts: SinkOptions) -> MessageLog:
    """The log the sink writes to: the place its options named (their log_settings); its writes() does the
    rest."""
    return open_log(**opts.log_settings)
