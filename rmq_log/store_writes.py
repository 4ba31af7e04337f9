"""StoreWrites: a store directory's two-phase writes. Tasks stage their rows as files under the store
(staging.py); the driver appends each batch once, under the store's write lock, with its commit marker
(store_commit.py). Staging and commit run in different processes: everything the commit needs is in the receipts
or on disk."""
from __future__ import annotations

import logging
import os
import shutil
import uuid
from dataclasses import dataclass
from typing import Iterable, List, Optional, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rmq_common.numpy_arrow import null_mask, string_scalar, true_where_valid, values
from store.store_config import StoreConfig

from .errors import RowError
from .staged_rows import validate_staged
from .staging import StagedFile, batch_dir, remove_abandoned_writes
from .store_commit import abort_batch, commit_batch
from .writes import BatchId, LogWrites, WriteOptionError, WriteOptions, with_task_label

log = logging.getLogger(__name__)


@dataclass
class StagedReceipt:
    """One successful task attempt: its staged file, row count and the topics its rows go to."""
    path: Optional[str]
    rows: int
    topics: Tuple[str, ...]
    partition: int
    attempt: int


def prepare_store(options: WriteOptions) -> StoreConfig:
    """The store's settings (maxMessageSize, flushDiskType...: the storeConfig file, else the defaults), and the
    store created when missing (the sink may start a new one). An existing store is left to the commit, which opens
    it (and recovers it if needed) anyway: this runs for every microbatch, twice."""
    from store import MessageStore

    config = StoreConfig()
    if options.store_config is not None:
        try:
            config = StoreConfig.from_file(options.store_config)
        except ValueError as e:
            raise WriteOptionError("store_config", f"{options.store_config}: {e}") from None
    if not os.path.isdir(os.path.join(options.path, "commitlog")):
        with MessageStore(options.path, config):
            pass
    return config


class StoreWrites(LogWrites):
    """Writes into the store directory options.path, created when missing. A batch write with a sink id of its own
    (options.fresh) removes its sink directory when it ends, and the staging of batch writes abandoned long ago."""

    def __init__(self, options: WriteOptions, config: Optional[StoreConfig] = None):
        super().__init__(options)
        self.config = config if config is not None else prepare_store(options)
        if config is None and options.fresh:
            remove_abandoned_writes(options.path)

    def stage(self, rows: Iterable[pa.RecordBatch], batch_id: BatchId, partition: int, attempt: int
              ) -> StagedReceipt:
        batch_id = "unknown" if batch_id is None else batch_id
        staged = StagedFile(batch_dir(self.options.sink_dir, batch_id),
                            f"{partition}-{attempt}-{uuid.uuid4().hex[:8]}")
        topics = set()
        try:
            for batch in rows:
                try:
                    validate_staged(batch, self.config.maxMessageSize, staged.rows)
                    self._check_queue_ids(batch, staged.rows)
                except RowError as e:
                    raise with_task_label(e, self.options, batch_id, partition) from None
                topics.update(pc.unique(batch.column(0)).to_pylist())
                staged.write(batch)
            path = staged.commit()
        except BaseException:
            staged.discard()
            raise
        return StagedReceipt(path=path, rows=staged.rows, topics=tuple(sorted(topics)), partition=partition,
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
        given = ~null_mask(qids)
        ids = values(qids)  # a null's slot holds anything: `given` masks it
        for topic in pc.unique(topics).to_pylist():
            cfg = table.get(topic)
            nq = cfg.writeQueueNums if cfg is not None else self.config.defaultTopicQueueNums
            bad = true_where_valid(pc.equal(topics, string_scalar(topic))) & given & (ids >= nq)
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise RowError(f"row {first_row + i}: queue_id {int(ids[i])} is outside topic {topic!r}'s "
                               f"write queues 0..{nq - 1}")

    def commit(self, receipts: list, batch_id: int) -> None:
        o = self.options
        try:
            outcome = commit_batch(o.path, o.sink_dir, o.sink_id, int(batch_id), _paths(receipts), _topics(receipts),
                                   self.config)
        except BaseException:
            if o.fresh:  # Spark does not abort a job whose commit failed; nobody would replay this one
                self.abort(receipts, batch_id)
            raise
        if o.stream:
            log.info("sink %s batch %d: %s", o.sink_id, batch_id, outcome)
        if o.fresh:
            shutil.rmtree(o.sink_dir, ignore_errors=True)

    def abort(self, receipts: list, batch_id: int) -> None:
        abort_batch(self.options.sink_dir, int(batch_id), _paths(receipts))
        if self.options.fresh:
            shutil.rmtree(self.options.sink_dir, ignore_errors=True)


def _paths(receipts) -> List[str]:
    return [r.path for r in receipts if r is not None and r.path]


def _topics(receipts) -> List[str]:
    return sorted({t for r in receipts if r is not None for t in r.topics})
