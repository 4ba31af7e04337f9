"""The one seam between the source and the sink and where the messages live: the source's readers read through
the rmq_log.MessageLog its options name (SourceBackend: rmq_log.open_reads_log chooses it once, as Spark's Kafka
source picks one KafkaOffsetReader); the sink asks a SinkBackend for its writers, sink_backend_for picks it once
from the parsed options. Nothing else asks which place it is."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Iterator

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from rmq_log.open_log import open_reads_log
from rmq_log.reads import LogReads, ReadSettings

from .options import SourceOptions
from .partition import LogPartition, read_partition
from .read_policy import POLICY
from .schema import Selection

if TYPE_CHECKING:  # the sink's modules import this one
    from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter

    from .sink.sink_options import SinkOptions


class SourceBackend:
    """The log the source's options name, and how its readers read it (group, selectors, failOnDataLoss's
    policy, pull and metrics settings)."""

    def __init__(self, opts: SourceOptions):
        self.opts = opts
        self.log = open_reads_log(opts.path, opts.namesrv_addr, opts.credentials, opts.broker_timeout_ms)
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


class SinkBackend:
    """Where the sink writes; LocalSink and WireSink implement it. columns: the input's accepted columns
    (sink.columns.check_input_schema)."""

    def __init__(self, opts: SinkOptions):
        self.opts = opts

    def stream_writer(self, columns: dict) -> DataSourceStreamArrowWriter:
        raise NotImplementedError

    def batch_writer(self, columns: dict) -> DataSourceArrowWriter:
        raise NotImplementedError


class LocalSink(SinkBackend):
    """A store directory (option path), created when missing: tasks stage their rows under it and the driver
    appends each batch once (sink/writer.py, sink/exactly_once.py)."""

    def stream_writer(self, columns: dict) -> DataSourceStreamArrowWriter:
        from .sink.writer import RmqStreamWriter, prepare_store
        return RmqStreamWriter(self.opts, columns, prepare_store(self.opts))

    def batch_writer(self, columns: dict) -> DataSourceArrowWriter:
        from .sink.staging import remove_abandoned_writes
        from .sink.writer import RmqBatchWriter, prepare_store

        config = prepare_store(self.opts)
        if self.opts.fresh:
            remove_abandoned_writes(self.opts.path)
        return RmqBatchWriter(self.opts, columns, config)


class WireSink(SinkBackend):
    """The brokers of a cluster (option namesrvAddr): transactional halves committed by the driver, or plain sends
    (sink/wire_writer.py)."""

    def _check_columns(self, columns: dict) -> None:
        from . import option_keys as K
        from .errors import RmqOptionError

        if "born_timestamp" in columns:
            raise RmqOptionError(K.NAMESRV_ADDR, "the born_timestamp column is not sent through brokers (a batch "
                                                 "frame carries one born timestamp for all its messages); drop the "
                                                 "column or write to a store directory")

    def stream_writer(self, columns: dict) -> DataSourceStreamArrowWriter:
        from .sink.transaction_log import TransactionLog
        from .sink.wire_writer import WireStreamWriter

        self._check_columns(columns)
        if self.opts.exactly_once:
            os.makedirs(TransactionLog(self.opts.checkpoint or "").dir, exist_ok=True)
        return WireStreamWriter(self.opts, columns)

    def batch_writer(self, columns: dict) -> DataSourceArrowWriter:
        from .sink.wire_writer import WireBatchWriter

        self._check_columns(columns)
        return WireBatchWriter(self.opts, columns)


def sink_backend_for(opts: SinkOptions) -> SinkBackend:
    """The sink's backend the options name: namesrvAddr the brokers, else the store directory."""
    return WireSink(opts) if opts.namesrv_addr is not None else LocalSink(opts)
