"""The sink's commit protocol: every microbatch of a sink appended once, whole, or not at all.

Tasks (write) only stage rows (staging.py). The commit, on the driver, under the store's write lock:

1. Commit table: is (sinkId, batchId) committed? The table is the commit markers in the system topic
   RMQ_SYS_SINK_COMMIT (queue 0); a marker is appended by the SAME put_batch as the batch's rows, as its last
   message, so "rows appended" and "batch recorded" are one event. sink/<sink>/commits.json only caches what
   was read of that topic. Committed: nothing is appended (a restarted query replaying its last batch, or a
   retried commit).
2. Otherwise, unless an intent for the batch exists, move the batch's staged files to sink/<sink>/commit/<batch>/
   and write the intent (those files + every target queue's end offset), fsynced, before anything is appended.
3. Append the rows + marker in one put_batch (atomic=True when the store offers it).
4. Clean up: the intent, the batch's files, staging of this and earlier batches.

An intent found in step 2 means an earlier commit of this batch died between 2 and 4. The rows it was
appending are the intent's files (a replayed batch stages new files and new UNIQ_KEYs, which are ignored).
Rows of those files already in the store (found by UNIQ_KEY in the target queues past the intent's offsets)
are not appended again. With an atomic put_batch there are none (a torn batch is cut by recovery); with a
plain one a killed append leaves a prefix of the batch, which the next commit completes.
"""
from __future__ import annotations

import inspect
import json
import logging
import os
import shutil
from enum import Enum
from typing import Optional, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from rmq_common.message_codec import PROPERTY_UNIQ_KEY, new_uniq_keys
from rmq_common.properties_column import map_lookup
from store import SYNC_FLUSH, MessageStore

from .staged_rows import MAP_TYPE, STAGED_SCHEMA
from .staging import batch_dir, fsync_dir, fsync_file, read_staged, remove_batches_through

log = logging.getLogger(__name__)

class CommitOutcome(str, Enum):
    """What commit_batch did with a batch."""
    COMMITTED = "committed"  # appended now
    RESUMED = "resumed"      # an interrupted commit's rest appended (its intent file was found)
    ALREADY = "already"      # its marker is in the store: nothing appended again

    def __str__(self) -> str:
        return self.value


SINK_COMMIT_TOPIC = "RMQ_SYS_SINK_COMMIT"
PROP_SINK_ID = "SINK_ID"
PROP_BATCH_ID = "SINK_BATCH_ID"
PROP_ROWS = "SINK_ROWS"


def exclusive(store: MessageStore):
    """The store's cross-process write lock, with the log end brought up to date on entry (a dead writer's
    complete records dispatched, a torn tail cut), so what we read under it is what the next append builds on."""
    return store.exclusive()


def supports_atomic(store: MessageStore) -> bool:
    return "atomic" in inspect.signature(store.put_batch).parameters


def _write_json(path: str, data) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(path))


def _read_json(path: str) -> Optional[dict]:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except ValueError:
        log.warning("ignoring unreadable %s", path)
        return None


class CommitTable:
    """Committed batch ids of one sink, read from the commit markers; commits.json caches the ids found and
    how far the marker queue was read (losing it only costs a re-read)."""

    def __init__(self, sink_dir: str, sink_id: str):
        self.path = os.path.join(sink_dir, "commits.json")
        self.sink_id = sink_id

    def committed(self, store: MessageStore) -> set:
        cache = _read_json(self.path) or {}
        if cache.get("sinkId") != self.sink_id:
            cache = {}
        ids = set(cache.get("batches", []))
        start = int(cache.get("scannedTo", 0))
        if SINK_COMMIT_TOPIC not in store.topics():
            return ids
        end = store.max_offset(SINK_COMMIT_TOPIC, 0)
        if end > start:
            for b in store.scan(SINK_COMMIT_TOPIC, 0, start, end):
                props = b.column("properties")
                mine = pc.fill_null(pc.equal(map_lookup(props, PROP_SINK_ID), self.sink_id), False)
                ids.update(int(x) for x in map_lookup(props, PROP_BATCH_ID).filter(mine).to_pylist())
            self._save(ids, end)
        return ids

    def _save(self, ids: set, scanned_to: int) -> None:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        _write_json(self.path, {"sinkId": self.sink_id, "scannedTo": scanned_to, "batches": sorted(ids)})


def marker_row(sink_id: str, batch_id: int, rows: int, address: bytes) -> pa.Table:
    uniq = new_uniq_keys(1, address)
    props = {PROP_SINK_ID: sink_id, PROP_BATCH_ID: str(batch_id), PROP_ROWS: str(rows),
             PROPERTY_UNIQ_KEY: uniq[0].as_py()}
    body = json.dumps({"sinkId": sink_id, "batchId": batch_id, "rows": rows}).encode("utf-8")
    return pa.table([pa.array([SINK_COMMIT_TOPIC]), pa.array([body], pa.binary()), pa.nulls(1, pa.string()),
                     pa.nulls(1, pa.string()), pa.array([list(props.items())], MAP_TYPE), pa.array([0], pa.int32()),
                     pa.nulls(1, pa.string()), pa.nulls(1, pa.timestamp("ms")), uniq], schema=STAGED_SCHEMA)


def _queue_ends(store: MessageStore, topics: Sequence[str]) -> dict:
    have = set(store.topics())
    return {t: {str(q): store.max_offset(t, q) for q in store.queues(t)} if t in have else {} for t in topics}


def _already_appended(store: MessageStore, staged: pa.Table, starts: dict) -> int:
    """How many of the staged rows (a prefix, in order) a killed commit left in the store."""
    if staged.num_rows == 0:
        return 0
    uniq = staged.column("uniq_key").combine_chunks()
    have = set(store.topics())
    found = []
    for topic, queue_starts in starts.items():
        if topic not in have:
            continue
        for q in store.queues(topic):
            for b in store.scan(topic, q, int(queue_starts.get(str(q), 0))):
                keys = map_lookup(b.column("properties"), PROPERTY_UNIQ_KEY)
                found.append(keys.filter(pc.fill_null(pc.is_in(keys, value_set=uniq), False)))
    if not found:
        return 0
    found_keys = pa.concat_arrays(found)
    k = len(found_keys)
    if k and not pc.all(pc.is_in(uniq.slice(0, k), value_set=found_keys)).as_py():
        raise RuntimeError(f"{k} rows of the interrupted commit are in the store, but not the first {k} staged "
                           "ones: refusing to guess which rows to append")
    return k


def _append(store: MessageStore, rows: pa.Table) -> None:
    rows = rows.combine_chunks()  # put_batch takes arrays: the staged files' batches and the marker, one copy

    def present(name):
        col = rows.column(name).combine_chunks()
        return col if col.null_count < len(col) else None

    kwargs = {"atomic": True} if supports_atomic(store) else {}
    store.put_batch(
        rows.column("topic").combine_chunks(), rows.column("body").combine_chunks(),
        tags=present("tags"), keys=present("keys"), properties=rows.column("properties").combine_chunks(),
        queue_id=present("queue_id"), sharding_key=present("sharding_key"),
        born_timestamp=present("born_timestamp"), **kwargs)


def commit_batch(path: str, sink_dir: str, sink_id: str, batch_id: int, paths: Sequence[str],
                 topics: Sequence[str], config=None, crash_point=None) -> CommitOutcome:
    """Make batch `batch_id` of the sink visible once, and say how (CommitOutcome).
    `crash_point(name)`, for tests, is called between the steps."""
    step = crash_point or (lambda name: None)
    commit_dir = os.path.join(sink_dir, "commit", str(batch_id))
    intent_path = os.path.join(sink_dir, f"intent-{batch_id}.json")
    os.makedirs(sink_dir, exist_ok=True)
    with MessageStore(path, config) as store:
        if SINK_COMMIT_TOPIC not in store.topics():
            store.create_topic(SINK_COMMIT_TOPIC, 1)
        table = CommitTable(sink_dir, sink_id)
        with exclusive(store):
            if batch_id in table.committed(store):
                outcome = CommitOutcome.ALREADY
                log.info("sink %s: batch %d is committed already; not appending it again", sink_id, batch_id)
            else:
                intent = _read_json(intent_path)
                if intent is not None:
                    outcome = CommitOutcome.RESUMED
                    staged = read_staged(intent["paths"])
                    skip = _already_appended(store, staged, intent["queueEnds"])
                    log.warning("sink %s: resuming the interrupted commit of batch %d (%d of %d rows were "
                                "appended)", sink_id, batch_id, skip, staged.num_rows)
                else:
                    outcome = CommitOutcome.COMMITTED
                    moved = _move_staged(paths, commit_dir, durable=store.config.flushDiskType == SYNC_FLUSH)
                    step("moved")
                    _write_json(intent_path, {"sinkId": sink_id, "batchId": batch_id, "paths": moved,
                                              "queueEnds": _queue_ends(store, list(topics))})
                    step("intent")
                    staged = read_staged(moved)
                    skip = 0
                marker = marker_row(sink_id, batch_id, staged.num_rows, store.store_host[0])
                _append(store, pa.concat_tables([staged.slice(skip), marker]))
                step("appended")
        if outcome != CommitOutcome.ALREADY or os.path.exists(intent_path):
            table.committed(store)  # refresh the cache with the new marker
    _clean_up(sink_dir, batch_id, intent_path, commit_dir)
    step("cleaned")
    return outcome


def _move_staged(paths: Sequence[str], commit_dir: str, durable: bool) -> list[str]:
    """The tasks' staged files moved under commit/<batch>, where an interrupted commit finds them again."""
    os.makedirs(commit_dir, exist_ok=True)
    moved = []
    for p in paths:
        dest = os.path.join(commit_dir, os.path.basename(p))
        if os.path.exists(p) or not os.path.exists(dest):  # (moved by an earlier try)
            os.replace(p, dest)
        if durable:  # the intent will point at it: it must outlive a power loss too
            fsync_file(dest)
        moved.append(dest)
    fsync_dir(commit_dir)
    return moved


def _clean_up(sink_dir: str, batch_id: int, intent_path: str, commit_dir: str) -> None:
    """After the marker is in: the intent, the batch's files, and staging of this and earlier batches."""
    try:
        os.remove(intent_path)
    except FileNotFoundError:
        pass
    shutil.rmtree(commit_dir, ignore_errors=True)
    remove_batches_through(sink_dir, batch_id)


def abort_batch(sink_dir: str, batch_id: int, paths: Sequence[str]) -> None:
    """Drop what the batch's tasks staged. An interrupted commit's files (under commit/) stay for its replay."""
    for p in paths:
        try:
            os.remove(p)
        except FileNotFoundError:
            pass
    shutil.rmtree(batch_dir(sink_dir, batch_id), ignore_errors=True)
