"""Staged rows: what a task attempt wrote, durable on disk but invisible to readers until the batch commits.

<store>/sink/<sink>/staging/<batchId>/<partition>-<taskAttemptId>-<random>.arrow: an Arrow IPC file written to
a temporary name and renamed, so a file that exists under its final name is complete. Attempts that failed leave
files nobody names; they go with their batch's directory.
"""
from __future__ import annotations

import logging
import os
import shutil
import time
from typing import Iterable, Iterator, Optional

import pyarrow as pa

from store.mapped_file import fsync_path

from .staged_rows import STAGED_SCHEMA


def batch_dir(sink_dir: str, batch_id) -> str:
    return os.path.join(sink_dir, "staging", str(batch_id))


# One call for both: fsync of a read-only descriptor works for files and directories alike.
fsync_file = fsync_dir = fsync_path


class StagedFile:
    """Write STAGED_SCHEMA batches to one task attempt's file; commit() makes it durable under its name."""

    def __init__(self, directory: str, name: str):
        os.makedirs(directory, exist_ok=True)
        self.directory = directory
        self.path = os.path.join(directory, name + ".arrow")
        self.tmp = self.path + f".tmp-{os.getpid()}"
        self._sink = pa.OSFile(self.tmp, "wb")
        self._writer = pa.ipc.new_file(self._sink, STAGED_SCHEMA)
        self.rows = 0

    def write(self, batch: pa.RecordBatch) -> None:
        self._writer.write_batch(batch)
        self.rows += batch.num_rows

    def commit(self) -> str:
        """Complete under its final name. Not fsynced here: a staged file only has to outlive a power loss once
        a commit has pinned it in an intent, and the commit fsyncs it then (see store_commit)."""
        self._writer.close()
        self._sink.close()
        os.replace(self.tmp, self.path)
        return self.path

    def discard(self) -> None:
        try:
            self._writer.close()
        except Exception:
            pass
        self._sink.close()
        try:
            os.remove(self.tmp)
        except FileNotFoundError:
            pass


def read_staged(paths: Iterable[str]) -> pa.Table:
    """All staged rows, in the order of `paths` (the commit messages' order, i.e. partition order), as the
    files' batches: memory-mapped, not copied (the commit combines them once, with its marker row)."""
    tables = []
    for p in paths:
        with pa.memory_map(p, "r") as source:
            tables.append(pa.ipc.open_file(source).read_all())
    if not tables:
        return STAGED_SCHEMA.empty_table()
    return pa.concat_tables(tables)


def remove_batches_through(sink_dir: str, batch_id: int) -> None:
    """Delete the staging directories of this batch and every earlier one (committed or aborted by now)."""
    root = os.path.join(sink_dir, "staging")
    for name in (os.listdir(root) if os.path.isdir(root) else []):
        if name.lstrip("-").isdigit() and int(name) <= batch_id:
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)


def remove_paths(paths: Iterable[str]) -> None:
    for p in paths:
        try:
            os.remove(p)
        except FileNotFoundError:
            pass


def iter_dirs(sink_dir: str) -> Iterator[str]:
    root = os.path.join(sink_dir, "staging")
    for name in (os.listdir(root) if os.path.isdir(root) else []):
        yield os.path.join(root, name)


# A one-off write's directory (sink/write-<uuid>) untouched this long belongs to a job that died between its
# tasks and its commit or abort; a live job touches it with every staged file.
ABANDONED_WRITE_AGE_S = 24 * 3600


def remove_abandoned_writes(path: str, now: Optional[float] = None) -> list:
    """Delete the staging of one-off batch writes abandoned by a dead job; returns what went."""
    root = os.path.join(path, "sink")
    now = time.time() if now is None else now
    gone = []
    for name in (os.listdir(root) if os.path.isdir(root) else []):
        d = os.path.join(root, name)
        if not name.startswith("write-") or not os.path.isdir(d):
            continue
        newest = max([os.path.getmtime(os.path.join(a, x)) for a, ds, fs in os.walk(d) for x in ds + fs]
                     + [os.path.getmtime(d)])
        if now - newest > ABANDONED_WRITE_AGE_S:
            shutil.rmtree(d, ignore_errors=True)
            logging.getLogger(__name__).warning("removed %s: the staging of a batch write abandoned %.0f h ago", d,
                                                (now - newest) / 3600)
            gone.append(d)
    return gone
