"""The write side of a MessageLog, as the Spark sink uses it: two phases, so that a batch of rows written by many
tasks becomes visible once, whole, or not at all.

- stage (in each task): the task's rows put where the log can make them visible later, and a receipt saying
  where (picklable: it travels to the driver in Spark's commit message);
- commit (on the driver, once per batch, with every successful task's receipt): the batch made visible, exactly
  once when the options ask for it (a commit repeated for a batch it made visible already appends nothing);
- abort: what the receipts name dropped.

A store directory stages files and appends them under its write lock with a commit table (store_writes.py); a
cluster sends transactional halves and ends them with END_TRANSACTION after recording its decision in the
checkpoint (cluster_writes.py). The options come as a WriteOptions, which the Spark sink's option parser builds.
"""
from __future__ import annotations

import abc
import hashlib
import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Optional, Union

import pyarrow as pa

from rmq_acl import SessionCredentials

from .broker_wait import DEFAULT_BROKER_TIMEOUT_MS
from .errors import RowError

if TYPE_CHECKING:
    from rmq_client import MQClientError

_SAFE_DIR = re.compile(r"[A-Za-z0-9._-]{1,100}")

# A batch's id as the writer is told it: Spark's microbatch id, a batch write's own id, or None outside either.
BatchId = Union[int, str, None]


@dataclass(frozen=True)
class WriteOptions:
    """What a batch of writes is told: where (path, or namesrv_addr: the place the log was opened on, and
    log_settings, what open_log opens it from), the sink it belongs to, and how (exactly_once, stream); the place
    the Spark sink's options name builds it from them (place.Place.writes)."""

    path: str                     # the store directory ("" through brokers)
    topic: Optional[str]          # every row goes there (wins over a topic column)
    sink_id: str                  # names the sink in its commit records
    batch_id: Optional[int]       # a directory's batch writes only: the id of this write
    checkpoint: Optional[str]
    store_config: Optional[str] = None  # a broker.conf-style file (maxMessageSize, flushDiskType, ...)
    fresh: bool = False           # a directory's batch write without sinkId: a sink id made for this job alone
    # Through brokers (namesrv_addr; None: into the store directory `path`)
    namesrv_addr: Optional[str] = None
    producer_group: str = ""
    exactly_once: bool = True     # transactional halves (else plain sends)
    broker_timeout_ms: int = DEFAULT_BROKER_TIMEOUT_MS
    credentials: Optional[SessionCredentials] = None  # every request signed
    stream: bool = False          # a streaming query's microbatches (else one batch write)
    log_settings: dict = field(default_factory=dict)  # open_log's settings for the place written to

    @property
    def namesrv(self) -> str:
        """The name servers of a sink through brokers."""
        assert self.namesrv_addr is not None, "a sink into a store directory has no name servers"
        return self.namesrv_addr

    @property
    def sink_dir(self) -> str:
        """<store>/sink/<sinkId, or its sha1 when it is not a safe file name>: staging and the commit cache."""
        key = self.sink_id if _SAFE_DIR.fullmatch(self.sink_id) and self.sink_id not in (".", "..") else \
            "id-" + hashlib.sha1(self.sink_id.encode("utf-8")).hexdigest()
        return os.path.join(self.path, "sink", key)


def local_checkpoint(checkpoint: str) -> str:
    """A checkpoint location as a local path (file: URIs too); ValueError for other file systems."""
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", checkpoint) and not checkpoint.startswith("file:"):
        raise ValueError(f"{checkpoint}: the wire sink keeps its decisions in the checkpoint and needs it on a local "
                         "or mounted file system (file:/... or a path)")
    path = checkpoint[len("file:"):] if checkpoint.startswith("file:") else checkpoint
    return os.path.abspath(re.sub(r"^/+", "/", path) if path.startswith("//") else path)


class WriteOptionError(ValueError):
    """Options this log cannot write with; `field`: the WriteOptions field at fault (the caller names its option)."""

    def __init__(self, field: str, message: str):
        self.field, self.message = field, message
        super().__init__(message)


class WriteRefused(Exception):
    """A broker refused what `what` describes (`cause`: the client's error), which the caller may name an option
    for (an ACL refusal: the account's)."""

    def __init__(self, cause: MQClientError, what: str):
        super().__init__(str(cause))
        self.cause, self.what = cause, what


def task_label(options: WriteOptions, batch_id: BatchId, partition: int) -> str:
    """How a task's row errors name the task."""
    return f"sink {options.sink_id} batch {batch_id} partition {partition}"


def with_task_label(error: RowError, options: WriteOptions, batch_id: BatchId, partition: int) -> RowError:
    return RowError(f"{task_label(options, batch_id, partition)}: {error}")


class LogWrites(abc.ABC):
    """A log's two-phase writes with one WriteOptions."""

    def __init__(self, options: WriteOptions):
        self.options = options

    @abc.abstractmethod
    def stage(self, rows: Iterable[pa.RecordBatch], batch_id: BatchId, partition: int, attempt: int) -> Any:
        """Stage one task attempt's rows (STAGED_SCHEMA batches) and return its receipt (picklable); a RowError
        names the task and the row. On failure nothing of this attempt is left to commit."""

    @abc.abstractmethod
    def commit(self, receipts: list, batch_id: int) -> None:
        """Make the batch whose tasks returned `receipts` visible (once, with exactly_once)."""

    @abc.abstractmethod
    def abort(self, receipts: list, batch_id: int) -> None:
        """Drop what the receipts staged."""

