"""Stores with known contents, and the store's own get_message results as the expected DataFrame."""
from __future__ import annotations

import datetime as dt
import json
import os

from store_fill import fill_store

from rmq_spark.schema import COLUMNS, SCHEMA
from store import MessageStore, StoreConfig

TAG_CYCLE = ["Aa", "BB", "TagC", None, "TagD"]  # "Aa" and "BB" share String.hashCode 2112


def fill(path, topic="T", n=40, queues=2, start=0, config=None, **extra):
    """n messages over `queues` queues (round robin by index), tags cycling TAG_CYCLE, properties a=<i>,
    region=eu|us, keys k<i>."""
    idx = range(start, start + n)
    fill_store(path, n, topic=topic, body=f"body-{topic}-%d".encode(), start=start, queue_id=lambda i: i % queues,
               queues=queues, config=config, tags=[TAG_CYCLE[i % len(TAG_CYCLE)] for i in idx],
               keys=[f"k{i} x{i % 3}" for i in idx],
               properties=[{"a": str(i), "region": "eu" if i % 2 else "us"} for i in idx], **extra)
    return str(path)


def small_files_config():
    # Several commitlog files, so retention has something to delete.
    return StoreConfig(mappedFileSizeCommitLog=4096, mappedFileSizeConsumeQueue=20 * 64)


def get_message_rows(path, topic, queue_id, start=0, end=None, message_filter=None):
    """What the store's own RocketMQ-style pull returns for [start, end), as tuples in the source's columns."""
    rows = []
    with MessageStore(path, read_only=True) as s:
        end = s.max_offset(topic, queue_id) if end is None else end
        offset = max(start, s.min_offset(topic, queue_id))
        while offset < end:
            r = s.get_message("test", topic, queue_id, offset, 32, message_filter)
            for m in r.messages:
                if m.queue_offset < end:
                    rows.append(tuple(_value(c, getattr(m, c)) for c in COLUMNS))
            if r.next_begin_offset <= offset:
                break
            offset = r.next_begin_offset
    return rows


def _value(column, v):
    if column in ("born_timestamp", "store_timestamp"):
        # Naive local time, as createDataFrame and collect() both use.
        return dt.datetime.fromtimestamp(v // 1000) + dt.timedelta(milliseconds=v % 1000)
    if column == "body":
        return bytearray(v)
    return v


def expected_df(spark, rows):
    return spark.createDataFrame(rows, SCHEMA).orderBy("topic", "queue_id", "queue_offset")


def ordered(df):
    return df.orderBy("topic", "queue_id", "queue_offset")


def group_offsets(path, group):
    f = os.path.join(path, "config", "consumerOffset.json")
    if not os.path.exists(f):
        return {}
    with open(f) as fh:
        table = json.load(fh).get("offsetTable", {})
    return {k.split("@", 1)[0]: {str(q): o for q, o in v.items()} for k, v in table.items()
            if k.split("@", 1)[1] == group}


def read_metrics(directory):
    out = []
    if os.path.isdir(directory):
        for name in sorted(os.listdir(directory)):
            with open(os.path.join(directory, name)) as fh:
                out.extend(json.loads(line) for line in fh if line.strip())
    return out
