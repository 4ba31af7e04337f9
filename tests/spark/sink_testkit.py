"""Helpers for the sink tests: what a store holds, counted the way the exactly-once promise is stated."""
from __future__ import annotations

import collections
import os

import pyarrow as pa

from rmq_common.properties_column import map_lookup
from store import MessageStore


def stored(path, topic) -> pa.Table:
    """Every message of `topic`, all queues, as the store's scan gives them."""
    if not os.path.isdir(os.path.join(str(path), "commitlog")):
        return pa.table({"body": pa.array([], pa.binary())})
    with MessageStore(str(path), read_only=True) as s:
        if topic not in s.topics():
            return pa.table({"body": pa.array([], pa.binary())})
        batches = [b for q in s.queues(topic) for b in s.scan(topic, q, 0)]
    return pa.Table.from_batches(batches) if batches else pa.table({"body": pa.array([], pa.binary())})


def counts(path, topic, expected_bodies):
    """(rows, distinct UNIQ_KEYs, duplicated bodies, lost bodies) of a topic against the expected bodies."""
    t = stored(path, topic)
    bodies = t.column("body").to_pylist()
    uniq = map_lookup(t.column("properties").combine_chunks(), "UNIQ_KEY") if t.num_rows else pa.array([])
    seen = collections.Counter(bodies)
    dup = sum(c - 1 for c in seen.values() if c > 1)
    lost = len(set(expected_bodies) - set(seen))
    return t.num_rows, len(set(uniq.to_pylist())), dup, lost


def markers(path, sink_id=None):
    """(sinkId, batchId, rows) of every commit marker."""
    t = stored(path, "RMQ_SYS_SINK_COMMIT")
    if t.num_rows == 0:
        return []
    props = t.column("properties").combine_chunks()
    out = list(zip(map_lookup(props, "SINK_ID").to_pylist(), map(int, map_lookup(props, "SINK_BATCH_ID").to_pylist()),
                   map(int, map_lookup(props, "SINK_ROWS").to_pylist())))
    return [m for m in out if sink_id is None or m[0] == sink_id]
