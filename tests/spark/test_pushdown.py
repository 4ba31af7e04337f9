"""Spark filter pushdown: what is taken must give exactly Spark's answer
(Spark does not re-check it); what cannot be done exactly goes back."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
)

from filters import MessageFilter, properties_to_map, tags_hash_code
from rmq_spark.pushdown import ValueRange, translate

UTC = dt.timezone.utc
T0 = dt.datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
T0_MS = int(T0.timestamp() * 1000)

ROWS = [
    # topic, queue_id, queue_offset, store ms offset from T0, msg_id, TAGS
    ("orders", 0, 0, 0, "m0", "TagA"),
    ("orders", 0, 1, 1, "m1", "TagB"),
    ("orders", 1, 0, 2, "m2", None),
    ("orders", 1, 1, 3, "m3", "TagA||TagB"),
    ("audit", 2, 5, 1000, "m4", "xTagAx"),
    ("audit", 3, 6, -1, "m5", "BB"),
    ("audit", 3, 7, 5, "m6", "Aa"),
]


def batch():
    props = []
    for *_, tags in ROWS:
        props.append("KEYS\x01k\x02" + (f"TAGS\x01{tags}\x02" if tags is not None else ""))
    return pa.RecordBatch.from_arrays(
        [
            pa.array([r[0] for r in ROWS]),
            pa.array([r[1] for r in ROWS], pa.int32()),
            pa.array([r[2] for r in ROWS], pa.int64()),
            pa.array([100 + i for i in range(len(ROWS))], pa.int64()),
            pa.array([r[4] for r in ROWS]),
            pa.array([r[5] for r in ROWS]),
            properties_to_map(props),
            pa.array([T0_MS + r[3] for r in ROWS], pa.timestamp("ms")),
            pa.array([T0_MS for r in ROWS], pa.timestamp("ms")),
        ],
        names=[
            "topic", "queue_id", "queue_offset", "commit_log_offset", "msg_id", "tags", "properties",
            "store_timestamp", "born_timestamp",
        ],
    )


def spark_value(f, row: dict):
    """Spark's own three-valued answer for one row (None is NULL)."""
    name = type(f).__name__
    if name == "Not":
        v = spark_value(f.child, row)
        return None if v is None else not v
    x = row[f.attribute[0]]
    if name == "IsNull":
        return x is None
    if name == "IsNotNull":
        return x is not None
    if name == "EqualNullSafe":
        return x == f.value
    if x is None:
        return None
    if name == "EqualTo":
        return x == f.value
    if name == "In":
        return x in f.value
    if name == "GreaterThan":
        return x > f.value
    if name == "GreaterThanOrEqual":
        return x >= f.value
    if name == "LessThan":
        return x < f.value
    if name == "LessThanOrEqual":
        return x <= f.value
    if name == "StringStartsWith":
        return x.startswith(f.value)
    if name == "StringEndsWith":
        return x.endswith(f.value)
    if name == "StringContains":
        return f.value in x
    raise AssertionError(name)


def spark_rows():
    b = batch().to_pylist()
    for row in b:
        for c in ("store_timestamp", "born_timestamp"):
            row[c] = row[c].replace(tzinfo=UTC)
    return b


TAKEN = [
    EqualTo(("tags",), "TagA"),
    EqualTo(("tags",), ""),
    EqualNullSafe(("tags",), "TagA"),
    EqualNullSafe(("tags",), None),
    Not(EqualNullSafe(("tags",), "TagA")),
    In(("tags",), ("TagA", "BB")),
    Not(In(("tags",), ("TagA", "BB"))),
    IsNull(("tags",)),
    IsNotNull(("tags",)),
    Not(EqualTo(("tags",), "TagA")),
    StringStartsWith(("tags",), "Tag"),
    Not(StringStartsWith(("tags",), "Tag")),
    StringEndsWith(("tags",), "B"),
    Not(StringContains(("tags",), "TagA")),
    StringContains(("tags",), ""),
    Not(StringContains(("tags",), "")),
    Not(Not(StringEndsWith(("tags",), "A"))),
    EqualTo(("topic",), "orders"),
    In(("topic",), ("audit", "nope")),
    EqualTo(("queue_id",), 1),
    In(("queue_id",), (0, 3)),
    GreaterThan(("queue_offset",), 0),
    GreaterThanOrEqual(("queue_offset",), 5),
    LessThan(("queue_offset",), 1),
    LessThanOrEqual(("queue_offset",), 6),
    GreaterThan(("commit_log_offset",), 102),
    EqualTo(("msg_id",), "m3"),
    In(("msg_id",), ("m1", "m6")),
    IsNotNull(("queue_offset",)),
    IsNull(("topic",)),
    GreaterThan(("store_timestamp",), T0),
    GreaterThan(("store_timestamp",), T0 + dt.timedelta(microseconds=1500)),
    GreaterThanOrEqual(("store_timestamp",), T0 + dt.timedelta(microseconds=1500)),
    LessThan(("store_timestamp",), T0 + dt.timedelta(microseconds=2500)),
    LessThan(("store_timestamp",), T0 + dt.timedelta(milliseconds=2)),
    LessThanOrEqual(("store_timestamp",), T0 - dt.timedelta(microseconds=1)),
    EqualTo(("store_timestamp",), T0 + dt.timedelta(milliseconds=3)),
    EqualTo(("store_timestamp",), T0 + dt.timedelta(microseconds=3001)),
    In(("store_timestamp",), (T0, T0 + dt.timedelta(seconds=1), T0 + dt.timedelta(microseconds=5))),
    GreaterThanOrEqual(("born_timestamp",), T0),
]


@pytest.mark.parametrize("f", TAKEN, ids=[repr(f) for f in TAKEN])
def test_taken_filters_give_sparks_answer(f):
    result = translate([f])
    assert result.accepted == [f] and result.unsupported == []
    expected = [spark_value(f, row) is True for row in spark_rows()]
    assert result.row_mask(batch()).to_pylist() == expected


RETURNED = [
    GreaterThan(("tags",), "TagA"),  # string ordering: RocketMQ compares numbers there
    EqualTo(("tags",), 5),
    In(("tags",), ("TagA", None)),
    EqualTo(("keys",), ["k"]),
    EqualTo(("body",), b"x"),
    EqualTo(("a", "b"), 1),
    GreaterThan(("store_timestamp",), dt.datetime(2024, 1, 1)),  # naive: zone unknown
    GreaterThan(("queue_offset",), 1.5),
    StringStartsWith(("topic",), "ord"),
    Not(EqualTo(("topic",), "orders")),
    Not(GreaterThan(("queue_offset",), 3)),
    Not(StringStartsWith(("msg_id",), "m")),
]


@pytest.mark.parametrize("f", RETURNED, ids=[repr(f) for f in RETURNED])
def test_inexact_filters_go_back_to_spark(f):
    result = translate([f])
    assert result.accepted == [] and result.unsupported == [f]
    assert result.message_filter is None


def test_tags_equality_and_in_prune_the_consume_queue():
    result = translate([In(("tags",), ("TagA", "TagB")), EqualTo(("tags",), "TagA")])
    f = result.message_filter
    assert f.is_matched_by_consume_queue(tags_hash_code("TagA"))
    assert not f.is_matched_by_consume_queue(tags_hash_code("TagB"))  # both must hold
    assert not f.is_matched_by_consume_queue(0)
    codes = np.array([tags_hash_code("TagA"), tags_hash_code("TagC")], dtype=np.int64)
    assert f.consume_queue_mask(codes).tolist() == [True, False]


def test_ranges_and_sets_narrow_the_scan():
    result = translate(
        [
            GreaterThan(("queue_offset",), 10),
            LessThanOrEqual(("queue_offset",), 20),
            GreaterThanOrEqual(("queue_offset",), 12),
            In(("queue_id",), (1, 2, 3)),
            EqualTo(("queue_id",), 2),
            EqualTo(("topic",), "orders"),
            GreaterThanOrEqual(("store_timestamp",), T0),
            LessThan(("store_timestamp",), T0 + dt.timedelta(seconds=1)),
            In(("msg_id",), ("a", "b")),
            StringEndsWith(("tags",), "A"),
            EqualTo(("keys",), "k"),
        ]
    )
    assert result.queue_offset_range == ValueRange(12, 20)
    assert result.queue_ids == frozenset([2])
    assert result.topics == frozenset(["orders"])
    assert result.msg_ids == frozenset(["a", "b"])
    assert result.store_timestamp_range == ValueRange(T0_MS, T0_MS + 999)
    assert [type(f).__name__ for f in result.unsupported] == ["EqualTo"]
    assert not result.is_empty
    assert str(result.message_filter) == "TAGS ENDSWITH 'A' OR TAGS"


def test_contradiction_is_empty():
    assert translate([EqualTo(("queue_id",), 1), EqualTo(("queue_id",), 2)]).is_empty
    assert translate([GreaterThan(("queue_offset",), 5), LessThan(("queue_offset",), 3)]).is_empty
    assert not translate([GreaterThan(("queue_offset",), 5)]).is_empty


def test_no_filters():
    result = translate([])
    assert result.message_filter is None and result.accepted == [] and result.unsupported == []
    assert result.topics is None and result.queue_offset_range == ValueRange()


def test_result_filter_pickles():
    import pickle

    f = translate([Not(StringContains(("tags",), "x"))]).message_filter
    g = pickle.loads(pickle.dumps(f))
    assert isinstance(g, MessageFilter) and g == f
