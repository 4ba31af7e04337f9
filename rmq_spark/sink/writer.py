"""The rmq sink's writers over the log's two-phase writes (rmq_log.writes.LogWrites): tasks convert their rows
and stage them (write), the driver commits each batch once (commit/abort).

Spark runs write() in executor workers and commit()/abort() in a separate driver-side process on a fresh
writer, so everything commit needs travels in the RmqCommitMessage (the log's receipt) or is kept by the log.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage

from rmq_common.message_codec import local_host_address
from rmq_log.writes import LogWrites, WriteOptionError, WriteRefused, with_task_label

from ..backend import sink_log
from ..errors import RmqOptionError, RowError
from ..worker_gc import freeze_imported_objects
from .columns import to_staged
from .sink_options import SinkOptions, option_of_field

log = logging.getLogger(__name__)


@dataclass
class RmqCommitMessage(WriterCommitMessage):
    """One successful task attempt: the receipt of what the log staged for it."""
    receipt: Any


def open_writes(options: SinkOptions, columns: dict) -> LogWrites:
    """The writes of the log the options name, for rows of the input's accepted `columns`; what the log refuses
    of them as the error of the option to change."""
    try:
        return sink_log(options).writes(options, columns)
    except WriteOptionError as e:
        raise RmqOptionError(option_of_field(e.field), e.message) from None


def task_attempt() -> tuple[int, int]:
    """(partition id, task attempt id) of the running task; (0, 0) outside one."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return (ctx.partitionId(), ctx.taskAttemptId()) if ctx else (0, 0)


def stream_batch_id() -> Any:
    """The microbatch id Spark gives a streaming write's tasks (None outside one)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return ctx.getLocalProperty("streaming.sql.batchId") if ctx else None


def _receipts(messages) -> list:
    return [m.receipt if m is not None else None for m in messages]


class _Writing:
    """write() for both writers: one task attempt's rows converted and staged by the log."""

    options: SinkOptions
    columns: dict
    writes: LogWrites

    def _stage(self, iterator: Iterator[pa.RecordBatch], batch_id) -> RmqCommitMessage:
        freeze_imported_objects()
        partition, attempt = task_attempt()
        address = local_host_address()

        def staged_rows() -> Iterator[pa.RecordBatch]:
            first = 0
            for batch in iterator:
                if batch.num_rows == 0:
                    continue
                try:
                    rows = to_staged(batch, self.columns, self.options.topic, address, first)
                except RowError as e:
                    raise with_task_label(e, self.options, batch_id, partition) from None
                yield rows
                first += batch.num_rows
        try:
            return RmqCommitMessage(self.writes.stage(staged_rows(), batch_id, partition, attempt))
        except WriteRefused as e:
            from ..read_policy import refused_by_acl
            raise refused_by_acl(e) from None  # an ACL refusal names accessKey or secretKey


class RmqStreamWriter(_Writing, DataSourceStreamArrowWriter):
    def __init__(self, options: SinkOptions, columns: dict, writes: LogWrites):
        self.options, self.columns, self.writes = options, columns, writes

    def write(self, iterator: Iterator[pa.RecordBatch]) -> RmqCommitMessage:
        return self._stage(iterator, stream_batch_id())

    def commit(self, messages, batchId: int) -> None:
        self.writes.commit(_receipts(messages), int(batchId))

    def abort(self, messages, batchId: int) -> None:
        self.writes.abort(_receipts(messages), int(batchId))


class RmqBatchWriter(_Writing, DataSourceArrowWriter):
    """df.write: one job is one batch; into a store directory with sinkId + batchId options it is idempotent
    across jobs too."""

    def __init__(self, options: SinkOptions, columns: dict, writes: LogWrites):
        self.options, self.columns, self.writes = options, columns, writes

    @property
    def batch_id(self):
        return self.options.batch_id

    def write(self, iterator: Iterator[pa.RecordBatch]) -> RmqCommitMessage:
        return self._stage(iterator, self.batch_id)

    def commit(self, messages) -> None:
        self.writes.commit(_receipts(messages), self.batch_id or 0)

    def abort(self, messages) -> None:
        self.writes.abort(_receipts(messages), self.batch_id or 0)
