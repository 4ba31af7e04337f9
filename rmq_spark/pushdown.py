"""Spark filter pushdown (pyspark.sql.datasource filters) -> what the scan
can do exactly itself.

Filters on the `tags` column become conditions on the TAGS property (the
tags column is the TAGS property, null when missing), so an equality or IN
also prunes by tag code in the consume queue.  Filters on the scan's
position columns (topic, queue_id, queue_offset, commit_log_offset,
store_timestamp, born_timestamp, msg_id) become value sets and inclusive
ranges the reader narrows its scan with.  Spark does not re-check a filter
it was told we took, so a filter is taken only when it is applied exactly:
the tree part by the message filter, the range part by `row_mask` (or by an
exact narrowing of the scan).  Anything else is handed back to Spark.

Each Spark filter on `tags` is translated to a condition with exactly the
same three-valued result as Spark's (so NOT of it is exact too): e.g. Spark's
`tags LIKE 'x%'` is NULL for a null tag where RocketMQ's STARTSWITH is FALSE.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import datasource as spark

from filters import MessageFilter
from filters.expressions import And, AsCondition, Expression, In, IsNull, Not, Or, Property, StringMatch
from filters.tag_selector import TAGS_PROPERTY

INTEGER_COLUMNS = ("queue_id", "queue_offset", "commit_log_offset")
TIMESTAMP_COLUMNS = ("store_timestamp", "born_timestamp")
STRING_COLUMNS = ("topic", "msg_id")
RANGE_COLUMNS = INTEGER_COLUMNS + TIMESTAMP_COLUMNS
POSITION_COLUMNS = RANGE_COLUMNS + STRING_COLUMNS
TAGS_COLUMN = "tags"

_STRING_MATCH = {spark.StringStartsWith: "STARTSWITH", spark.StringEndsWith: "ENDSWITH",
                 spark.StringContains: "CONTAINS"}
_RANGE_OPS = (spark.GreaterThan, spark.GreaterThanOrEqual, spark.LessThan, spark.LessThanOrEqual)
_EQUALS = (spark.EqualTo, spark.EqualNullSafe)


@dataclass(frozen=True)
class ValueRange:
    """Inclusive bounds; None is unbounded.  Timestamps are epoch milliseconds."""

    low: Optional[int] = None
    high: Optional[int] = None

    @property
    def is_empty(self) -> bool:
        return self.low is not None and self.high is not None and self.low > self.high

    def intersect(self, other: "ValueRange") -> "ValueRange":
        low = self.low if other.low is None else other.low if self.low is None else max(self.low, other.low)
        high = self.high if other.high is None else other.high if self.high is None else min(self.high, other.high)
        return ValueRange(low, high)

    def contains(self, value: int) -> bool:
        return (self.low is None or value >= self.low) and (self.high is None or value <= self.high)


@dataclass
class PushdownResult:
    """What `translate` took and what it hands back."""

    message_filter: Optional[MessageFilter] = None
    accepted: list = field(default_factory=list)
    unsupported: list = field(default_factory=list)
    ranges: dict[str, ValueRange] = field(default_factory=dict)
    value_sets: dict[str, frozenset] = field(default_factory=dict)
    key: Optional[str] = None       # option key: rows whose keys hold it
    uniq_key: Optional[str] = None  # option uniqKey: rows whose UNIQ_KEY property is it

    @property
    def columns(self) -> list:
        """The scan columns row_mask reads."""
        return sorted(set(self.ranges) | set(self.value_sets) | ({"keys"} if self.key is not None else set())
                      | ({"properties"} if self.uniq_key is not None else set()))

    # ---- what the reader narrows its scan with
    @property
    def is_empty(self) -> bool:
        """True when the taken filters contradict: nothing can match."""
        if any(r.is_empty for r in self.ranges.values()):
            return True
        for column, values in self.value_sets.items():
            if not values:
                return True
            r = self.ranges.get(column)
            if r is not None and not any(r.contains(v) for v in values):
                return True
        return False

    def range_of(self, column: str) -> ValueRange:
        return self.ranges.get(column, ValueRange())

    def allowed(self, column: str) -> Optional[frozenset]:
        """The allowed values of a column, or None when unrestricted."""
        values = self.value_sets.get(column)
        if values is None:
            return None
        r = self.ranges.get(column)
        return values if r is None else frozenset(v for v in values if r.contains(v))

    @property
    def topics(self) -> Optional[frozenset]:
        return self.allowed("topic")

    @property
    def queue_ids(self) -> Optional[frozenset]:
        return self.allowed("queue_id")

    @property
    def msg_ids(self) -> Optional[frozenset]:
        return self.allowed("msg_id")

    @property
    def queue_offset_range(self) -> ValueRange:
        return self.range_of("queue_offset")

    @property
    def store_timestamp_range(self) -> ValueRange:
        return self.range_of("store_timestamp")

    def row_mask(self, batch: pa.RecordBatch) -> pa.BooleanArray:
        """Every taken filter applied exactly to a scan batch (position
        columns and the message filter): the reader can always apply this
        instead of proving its narrowing exact."""
        n = batch.num_rows
        keep = np.ones(n, dtype=bool)
        if self.is_empty:
            return pa.array(np.zeros(n, dtype=bool))
        for column in set(self.ranges) | set(self.value_sets):
            col = batch.column(column)
            if column in TIMESTAMP_COLUMNS:
                col = pc.cast(col, pa.timestamp("ms")).cast(pa.int64())
            r = self.ranges.get(column)
            if r is not None and r.low is not None:
                keep &= _bool(pc.greater_equal(col, r.low))
            if r is not None and r.high is not None:
                keep &= _bool(pc.less_equal(col, r.high))
            values = self.value_sets.get(column)
            if values is not None:
                value_type = pa.int64() if column in RANGE_COLUMNS else pa.string()
                keep &= _bool(pc.is_in(col, value_set=pa.array(sorted(values), type=value_type)))
        if self.message_filter is not None:
            keep &= _bool(self.message_filter.commit_log_mask(batch))
        if self.key is not None:
            keys = batch.column("keys")
            hits = pc.equal(pc.list_flatten(keys), self.key).fill_null(False)
            rows = pc.list_parent_indices(keys).to_numpy(zero_copy_only=False)
            has = np.zeros(n, dtype=bool)
            has[rows[hits.to_numpy(zero_copy_only=False)]] = True
            keep &= has
        if self.uniq_key is not None:
            uniq = pc.map_lookup(batch.column("properties"), pa.scalar("UNIQ_KEY"), "last")
            keep &= _bool(pc.equal(uniq, self.uniq_key))
        return pa.array(keep)


def _bool(arr) -> np.ndarray:
    return arr.fill_null(False).to_numpy(zero_copy_only=False)


def _column(f: Any) -> Optional[str]:
    attribute = getattr(f, "attribute", None)
    if isinstance(attribute, tuple) and len(attribute) == 1 and isinstance(attribute[0], str):
        return attribute[0]
    return None


# ------------------------------------------------------------ tags -> tree


def _tags_condition(f: Any) -> Optional[Expression]:
    """An exact three-valued translation of a Spark filter over `tags`
    (possibly under NOT), or None."""
    if isinstance(f, spark.Not):
        inner = _tags_condition(f.child)
        return None if inner is None else Not(inner)
    if _column(f) != TAGS_COLUMN:
        return None
    tags = Property(TAGS_PROPERTY)
    value = getattr(f, "value", None)
    if isinstance(f, spark.EqualTo) and isinstance(value, str):
        return In(tags, (value,))
    if isinstance(f, spark.EqualNullSafe):
        if value is None:
            return IsNull(tags)
        if isinstance(value, str):
            # Null-safe: a missing tag is FALSE, not NULL.
            return And(IsNull(tags, negated=True), In(tags, (value,)))
        return None
    if isinstance(f, spark.In):
        values = tuple(value) if isinstance(value, (tuple, list)) else ()
        if values and all(isinstance(v, str) for v in values):
            return In(tags, tuple(dict.fromkeys(values)))
        return None
    if isinstance(f, spark.IsNull):
        return IsNull(tags)
    if isinstance(f, spark.IsNotNull):
        return IsNull(tags, negated=True)
    match = _STRING_MATCH.get(type(f))
    if match is not None and isinstance(value, str):
        # Spark: NULL for a null tag.  `x OR tags-as-condition` turns a
        # missing tag's FALSE into NULL and leaves a present tag's result.
        if value == "":
            return Or(IsNull(tags, negated=True), AsCondition(tags))
        return Or(StringMatch(match, tags, value), AsCondition(tags))
    return None


# ------------------------------------------------------------ positions -> ranges


def _epoch_micros(value: Any) -> Optional[int]:
    if isinstance(value, _dt.datetime) and value.tzinfo is not None and value.utcoffset() is not None:
        delta = value - _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    return None  # a naive datetime's zone is unknown here: let Spark decide


def _range_and_set(column: str, f: Any) -> Optional[tuple[ValueRange, Optional[frozenset]]]:
    """(range, value set) equivalent to one comparison on a position column."""
    value = getattr(f, "value", None)
    if column in STRING_COLUMNS:
        if isinstance(f, _EQUALS) and isinstance(value, str):
            return ValueRange(), frozenset([value])
        if isinstance(f, spark.In) and isinstance(value, (tuple, list)) and value \
                and all(isinstance(v, str) for v in value):
            return ValueRange(), frozenset(value)
        return None
    if column in INTEGER_COLUMNS:

        def as_int(v):
            return v if isinstance(v, int) and not isinstance(v, bool) else None

        if isinstance(f, _EQUALS) and as_int(value) is not None:
            return ValueRange(value, value), frozenset([value])
        if isinstance(f, spark.In) and isinstance(value, (tuple, list)) and value \
                and all(as_int(v) is not None for v in value):
            return ValueRange(), frozenset(value)
        v = as_int(value)
        if v is None or not isinstance(f, _RANGE_OPS):
            return None
        return {
            spark.GreaterThan: ValueRange(v + 1, None),
            spark.GreaterThanOrEqual: ValueRange(v, None),
            spark.LessThan: ValueRange(None, v - 1),
            spark.LessThanOrEqual: ValueRange(None, v),
        }[type(f)], None
    if column in TIMESTAMP_COLUMNS:
        # The column holds milliseconds; Spark compares at microseconds.
        if isinstance(f, spark.In) and isinstance(value, (tuple, list)) and value:
            found = [_epoch_micros(v) for v in value]
            micros = [m for m in found if m is not None]
            if len(micros) < len(found):
                return None
            return ValueRange(), frozenset(m // 1000 for m in micros if m % 1000 == 0)
        t = _epoch_micros(value)
        if t is None:
            return None
        if isinstance(f, _EQUALS):
            exact = t % 1000 == 0
            return (ValueRange(t // 1000, t // 1000) if exact else ValueRange(1, 0)), None
        if not isinstance(f, _RANGE_OPS):
            return None
        ceil_ms = -((-t) // 1000)
        return {
            spark.GreaterThan: ValueRange(t // 1000 + 1, None),
            spark.GreaterThanOrEqual: ValueRange(ceil_ms, None),
            spark.LessThan: ValueRange(None, ceil_ms - 1),
            spark.LessThanOrEqual: ValueRange(None, t // 1000),
        }[type(f)], None
    return None


def translate(spark_filters: Iterable[Any]) -> PushdownResult:
    """Split Spark's pushed filters into what the scan applies exactly and
    what goes back to Spark (`unsupported`, in the order given)."""
    result = PushdownResult()
    conditions: list[Expression] = []
    for f in spark_filters:
        condition = _tags_condition(f)
        if condition is not None:
            conditions.append(condition)
            result.accepted.append(f)
            continue
        column = _column(f)
        if column in POSITION_COLUMNS:
            if isinstance(f, spark.IsNotNull):
                result.accepted.append(f)  # position columns are never null
                continue
            if isinstance(f, spark.IsNull):
                result.ranges[column] = result.range_of(column).intersect(ValueRange(1, 0))
                result.accepted.append(f)
                continue
            taken = _range_and_set(column, f)
            if taken is not None:
                value_range, values = taken
                result.ranges[column] = result.range_of(column).intersect(value_range)
                if values is not None:
                    previous = result.value_sets.get(column)
                    result.value_sets[column] = values if previous is None else previous & values
                result.accepted.append(f)
                continue
        result.unsupported.append(f)
    # Drop no-op ranges so `ranges` lists only real narrowing.
    result.ranges = {c: r for c, r in result.ranges.items() if r != ValueRange()}
    if conditions:
        expression = conditions[0]
        for condition in conditions[1:]:
            expression = And(expression, condition)
        result.message_filter = MessageFilter(expression)
    return result
