"""The rmq sink's writers: tasks stage Arrow batches (write), the driver commits them once (commit/abort).

Spark runs write() in executor workers and commit()/abort() in a separate driver-side process on a fresh
writer, so everything commit needs travels in the RmqCommitMessage or is on disk.
"""
from __future__ import annotations

import logging
import os
import shutil
import uuid
from dataclasses import dataclass
from typing import Iterator, List, Optional, Tuple

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage

from rmq_common.message_codec import local_host_address
from store.store_config import StoreConfig

from .. import option_keys as K
from ..errors import RmqOptionError, RowError
from .columns import to_staged, validate_staged
from .exactly_once import abort_batch, commit_batch
from .sink_options import SinkOptions
from .staging import StagedFile, batch_dir

log = logging.getLogger(__name__)


@dataclass
class RmqCommitMessage(WriterCommitMessage):
    """One successful task attempt: its staged file, row count and the topics its rows go to."""
    path: Optional[str]
    rows: int
    topics: Tuple[str, ...]
    partition: int
    attempt: int


def prepare_store(options: SinkOptions) -> StoreConfig:
    """The store's settings (maxMessageSize, flushDiskType...: the storeConfig file, else the defaults), and the
    store created when missing (the sink may start a new one). An existing store is left to the commit, which opens
    it (and recovers it if needed) anyway: this runs for every microbatch, twice."""
    from store import MessageStore

    config = StoreConfig()
    if options.store_config is not None:
        try:
            config = StoreConfig.from_file(options.store_config)
        except ValueError as e:
            raise RmqOptionError(K.STORE_CONFIG, f"{options.store_config}: {e}") from None
    if not os.path.isdir(os.path.join(options.path, "commitlog")):
        with MessageStore(options.path, config):
            pass
    return config


def task_attempt() -> tuple[int, int]:
    """(partition id, task attempt id) of the running task; (0, 0) outside one."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return (ctx.partitionId(), ctx.taskAttemptId()) if ctx else (0, 0)


def stream_batch_id(default: str) -> str:
    """The microbatch id Spark gives a streaming write's tasks (default outside one)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    batch_id = ctx.getLocalProperty("streaming.sql.batchId") if ctx else None
    return batch_id if batch_id is not None else default


class _Writing:
    """write() for both writers: validate and stage one task attempt's rows."""

    options: SinkOptions
    columns: dict
    config: StoreConfig

    def _stage(self, iterator: Iterator[pa.RecordBatch], batch_id) -> RmqCommitMessage:
        partition, attempt = task_attempt()
        where = f"sink {self.options.sink_id} batch {batch_id} partition {partition}"
        address = local_host_address()
        staged = StagedFile(batch_dir(self.options.sink_dir, batch_id),
                            f"{partition}-{attempt}-{uuid.uuid4().hex[:8]}")
        topics = set()
        try:
            for batch in iterator:
                if batch.num_rows == 0:
                    continue
                try:
                    rows = to_staged(batch, self.columns, self.options.topic, address, staged.rows)
                except RowError as e:
                    raise RowError(f"{where}: {e}") from None
                try:
                    validate_staged(rows, self.config.maxMessageSize, staged.rows)
                    self._check_queue_ids(rows, staged.rows)
                except RowError as e:
                    raise RowError(f"{where}: {e}") from None
                topics.update(pc.unique(rows.column(0)).to_pylist())
                staged.write(rows)
            path = staged.commit()
        except BaseException:
            staged.discard()
            raise
        return RmqCommitMessage(path=path, rows=staged.rows, topics=tuple(sorted(topics)), partition=partition,
                                attempt=attempt)


    def _check_queue_ids(self, rows: pa.RecordBatch, first_row: int) -> None:
        """A queue_id past its topic's write queues fails here, in the task, with its row (the commit would
        refuse the whole batch later). Topics not created yet get defaultTopicQueueNums queues."""
        qids = rows.column("queue_id")
        if qids.null_count == len(qids):
            return
        from store.topic_config import TopicConfigManager
        table = TopicConfigManager(self.options.path).table if os.path.isdir(self.options.path) else {}
        topics = rows.column("topic")
        for topic in pc.unique(topics).to_pylist():
            cfg = table.get(topic)
            nq = cfg.writeQueueNums if cfg is not None else self.config.defaultTopicQueueNums
            bad = pc.and_(pc.equal(topics, topic), pc.greater_equal(qids, nq)).fill_null(False)
            if pc.any(bad).as_py():
                i = pc.index(bad, True).as_py()
                raise RowError(f"row {first_row + i}: queue_id {qids[i].as_py()} is outside topic {topic!r}'s "
                               f"write queues 0..{nq - 1}")


def _paths(messages) -> List[str]:
    return [m.path for m in messages if m is not None and m.path]


def _topics(messages) -> List[str]:
    return sorted({t for m in messages if m is not None for t in m.topics})


class RmqStreamWriter(_Writing, DataSourceStreamArrowWriter):
    def __init__(self, options: SinkOptions, columns: dict, config: StoreConfig):
        self.options, self.columns, self.config = options, columns, config

    def write(self, iterator: Iterator[pa.RecordBatch]) -> RmqCommitMessage:
        return self._stage(iterator, stream_batch_id("unknown"))

    def commit(self, messages, batchId: int) -> None:
        outcome = commit_batch(self.options.path, self.options.sink_dir, self.options.sink_id, int(batchId),
                               _paths(messages), _topics(messages), self.config)
        log.info("sink %s batch %d: %s", self.options.sink_id, batchId, outcome)

    def abort(self, messages, batchId: int) -> None:
        abort_batch(self.options.sink_dir, int(batchId), _paths(messages))


class RmqBatchWriter(_Writing, DataSourceArrowWriter):
    """df.write: one job is one batch; with sinkId + batchId options it is idempotent across jobs too."""

    def __init__(self, options: SinkOptions, columns: dict, config: StoreConfig):
        self.options, self.columns, self.config = options, columns, config
        self.fresh = options.fresh  # a sink id made for this job alone: its directory goes when the job ends

    @property
    def batch_id(self) -> int:
        assert self.options.batch_id is not None  # batch_options gives every batch write one
        return self.options.batch_id

    def write(self, iterator: Iterator[pa.RecordBatch]) -> RmqCommitMessage:
        return self._stage(iterator, self.batch_id)

    def commit(self, messages) -> None:
        try:
            commit_batch(self.options.path, self.options.sink_dir, self.options.sink_id, self.batch_id,
                         _paths(messages), _topics(messages), self.config)
        except BaseException:
            if self.fresh:  # Spark does not abort a job whose commit failed; nobody would replay this one
                self.abort(messages)
            raise
        if self.fresh:
            shutil.rmtree(self.options.sink_dir, ignore_errors=True)

    def abort(self, messages) -> None:
        abort_batch(self.options.sink_dir, self.batch_id, _paths(messages))
        if self.fresh:
            shutil.rmtree(self.options.sink_dir, ignore_errors=True)
