"""Vectorised evaluation over many messages at once (a pyarrow RecordBatch
with a `properties` map<string,string> column), giving exactly the
per-record decisions of row_evaluator.

Each condition yields an int8 code per row: FALSE, TRUE, NULL or ERROR
(the per-record path's exception).  Logic combines codes with 4x4 lookup
tables that encode RocketMQ's left-to-right short-circuit: an ERROR on the
right is not reached when the left side decides.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rmq_common import native
from rmq_common.message_properties import MapColumn, PropertiesText, properties_to_map  # noqa: F401  (re-exported)
from rmq_common.numpy_arrow import double_scalar, from_numpy, string_scalar
from rmq_common.numpy_arrow import strings as string_array
from rmq_common.numpy_arrow import true_where_valid as _to_bool_numpy
from rmq_common.numpy_arrow import values as _values

from .comparison_rules import (
    D_DOUBLE,
    D_ERROR,
    D_NEVER_EQUAL,
    D_NONE,
    D_STRING,
    converter,
    plan_comparison,
)
from .expressions import (
    BOOL,
    DOUBLE,
    INT,
    LONG,
    NULL,
    ORDERING_OPS,
    STRING,
    And,
    AsCondition,
    Between,
    Comparison,
    Expression,
    In,
    IsNull,
    Literal,
    Negate,
    Not,
    Or,
    Property,
    StringMatch,
    referenced_properties,
)
from .java_numbers import INT_MAX, INT_MIN
from .visitors import ConditionVisitor, ExpressionVisitor, visit

F, T, N, E = 0, 1, 2, 3  # FALSE, TRUE, NULL, ERROR

# Evaluate an AND/OR's right side on only the rows its left side left open
# when they are at most this share of a batch of at least this many rows.
SUBSET_MAX_SHARE = 0.3
SUBSET_MIN_ROWS = 4096

_NOT = np.array([T, F, N, E], dtype=np.int8)
# rows: left code, columns: right code
_AND = np.array(
    [
        [F, F, F, F],
        [F, T, N, E],
        [F, N, N, E],
        [E, E, E, E],
    ],
    dtype=np.int8,
).ravel()
_OR = np.array(
    [
        [F, T, N, E],
        [T, T, T, T],
        [N, T, N, E],
        [E, E, E, E],
    ],
    dtype=np.int8,
).ravel()

# Text that Arrow's own casts parse exactly as Java does; anything else goes
# through the per-value Java rules, once per distinct text.  (Integers: see
# rmq_common.native.decimal_longs.)
_FAST_DOUBLE = r"^[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]{1,3})?$"


@dataclass
class _Value:
    """An operand over all rows: `data` is an Arrow string array (STRING from
    a property), a numpy array (BOOL from a condition) or a Python scalar
    (a literal); `null` and `err` are numpy bool arrays or scalars."""

    kind: str
    data: Any
    null: Any
    err: Any = False
    prop: Optional[str] = None


class _Rows:
    """Per-batch state: property columns and their conversions, computed once."""

    def __init__(self, source: "PropertySource", parent: Optional["_Rows"] = None, index=None) -> None:
        self.source = source
        self.n = source.n
        self._columns: dict[str, pa.Array] = {}
        self._nulls: dict[str, np.ndarray] = {}
        self._converted: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = {}
        self._parent, self._index = parent, index

    def subset(self, index: np.ndarray, wanted: list[str]) -> "_Rows":
        """The same state for the rows at `index`: what is already computed
        is taken from here when first needed, the rest is read from a
        narrowed source."""
        return _Rows(self.source.subset(index, [name for name in wanted if name not in self._columns]), self, index)

    def _inherited(self, cache: str, key, narrow: Callable):
        """What the enclosing rows computed under `key` in `cache`, narrowed
        to these rows (and kept); None when they did not."""
        found = getattr(self, cache).get(key)
        if found is None and self._parent is not None:
            found = self._parent._inherited(cache, key, narrow)
            if found is not None:
                found = getattr(self, cache)[key] = narrow(found, self._index)
        return found

    def column(self, name: str) -> pa.Array:
        col = self._inherited("_columns", name, lambda c, index: c.take(from_numpy(index)))
        if col is None:
            col = self.source.column(name)
            self._columns[name] = col
        return col

    def null(self, name: str) -> np.ndarray:
        mask = self._nulls.get(name)
        if mask is None:
            col = self.column(name)
            if col.null_count == 0:
                mask = np.zeros(self.n, dtype=bool)
            elif col.null_count == len(col):
                mask = np.ones(self.n, dtype=bool)
            else:
                mask = _to_bool_numpy(col.is_null())
            self._nulls[name] = mask
        return mask

    def converted(self, name: str, kind: str) -> tuple[np.ndarray, np.ndarray]:
        """(values, ok) of property `name` converted to `kind`; ok is False
        where the text is present but Java would refuse it (and where missing)."""
        key = (name, kind)
        hit = self._inherited("_converted", key, lambda h, index: (h[0][index], h[1][index]))
        if hit is None:
            hit = _convert(self.column(name), self.null(name), kind)
            self._converted[key] = hit
        return hit


def _equal_any(col: pa.Array, values) -> np.ndarray:
    """Which strings of `col` equal one of `values` (False where null)."""
    return native.strings_in(col, list(values))


def _codes(hit, null=False, err=False) -> np.ndarray:
    """int8 codes: TRUE where hit and FALSE elsewhere, then NULL where null, then ERROR where err."""
    codes = np.asarray(hit, dtype=bool).view(np.int8)  # T is 1, F is 0
    return _overlay(_overlay(codes, null, N), err, E)


def _convert(col: pa.Array, null: np.ndarray, kind: str) -> tuple[np.ndarray, np.ndarray]:
    n = len(col)
    if kind == BOOL:
        ok = ~null
        values = _to_bool_numpy(pc.equal(pc.ascii_lower(col), string_scalar("true"))) if n else np.zeros(0, bool)
        return values, ok
    numeric = kind in (INT, LONG)
    dtype = np.int64 if numeric else np.float64
    if n == 0 or null.all():
        return np.zeros(n, dtype=dtype), np.zeros(n, dtype=bool)
    if numeric:
        # An optional '-' and at most 18 ASCII digits (no int64 overflow):
        # text any reading and Java's agree on.
            values, fast = native.decimal_longs(col)
    else:
        try:
            # Arrow's finite doubles are a subset of Java's syntax; its NaN and
            # infinities ("nan", "inf" in any case) are not, so non-finite
            # results are redone by Java's rules below.
            values = _values(pc.cast(col, pa.float64()).fill_null(double_scalar(0.0)))
            fast = np.isfinite(values)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            values = np.zeros(n, dtype=dtype)
            fast = _to_bool_numpy(pc.match_substring_regex(col, _FAST_DOUBLE))
            if fast.any():
                idx = np.flatnonzero(fast)
                values[idx] = _values(pc.cast(col.take(from_numpy(idx)), pa.float64()))
    fast &= ~null
    ok = fast.copy()
    slow = ~fast & ~null
    if slow.any():
        # Unusual texts (signs, other scripts' digits, hex floats, NaN...):
        # Java's rules in Python, once per distinct text.
        idx = np.flatnonzero(slow)
        texts = col.take(from_numpy(idx))
        encoded = pc.dictionary_encode(texts)
        convert = converter(kind)
        uniq_values = np.zeros(len(encoded.dictionary), dtype=dtype)
        uniq_ok = np.zeros(len(encoded.dictionary), dtype=bool)
        for i, text in enumerate(encoded.dictionary.to_pylist()):
            try:
                uniq_values[i] = convert(text)
                uniq_ok[i] = True
            except ValueError:
                pass
        codes = _values(encoded.indices)
        if not values.flags.writeable:  # Arrow's own buffer
            values = values.copy()
        values[idx] = uniq_values[codes]
        ok[idx] = uniq_ok[codes]
    if kind == INT:
        ok &= (values >= INT_MIN) & (values <= INT_MAX)
    return values, ok


def _read_first(node: Expression) -> list[str]:
    """Properties every row needs: those of the condition evaluated first
    (the leftmost below AND / OR / NOT).  The others may only be needed on
    the rows it leaves open, so they are read later, on those rows."""
    while isinstance(node, (And, Or, Not)):
        node = node.left if isinstance(node, (And, Or)) else node.operand
    return referenced_properties(node)


def _overlay(codes, mask, code: int):
    """codes with `code` where mask holds; skips the pass when mask never does."""
    if isinstance(mask, np.ndarray):
        if not mask.any():
            return codes
        # Bitwise (codes ^ ((codes ^ code) & all-ones where mask)): a few times faster than np.where.
        ones = np.negative(mask.view(np.int8))
        return np.bitwise_xor(codes, np.bitwise_and(np.bitwise_xor(codes, np.int8(code)), ones))
    return np.int8(code) if mask else codes


def _combine(table: np.ndarray, left: np.ndarray, right) -> np.ndarray:
    """table[left * 4 + right], the codes of AND / OR."""
    index = np.left_shift(left, 2)
    index |= right
    return np.take(table, index)


def _sign(a, b) -> np.ndarray:
    """-1, 0 or 1 (int8) as a < b, a == b or a > b (the booleans viewed as int8, not copied)."""
    return np.subtract(np.greater(a, b).view(np.int8), np.less(a, b).view(np.int8))


def _java_compare_doubles(a, b) -> np.ndarray:
    """Double.compare elementwise: NaN above everything and equal to itself, -0.0 < 0.0."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    c = _sign(a, b)
    a_nan, b_nan = np.isnan(a), np.isnan(b)
    if a_nan.any() or b_nan.any():
        c = np.where(a_nan, np.where(b_nan, 0, 1), np.where(b_nan, -1, c)).astype(np.int8)
    zeros = (a == 0) & (b == 0)
    if np.any(zeros):
        c = np.where(zeros, np.signbit(b).astype(np.int8) - np.signbit(a).astype(np.int8), c).astype(np.int8)
    return c


_ORDER_TESTS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    ">": lambda c: c > 0,
    ">=": lambda c: c >= 0,
    "<": lambda c: c < 0,
    "<=": lambda c: c <= 0,
}


class ArrowEvaluator:
    """mask(batch) -> pyarrow BooleanArray: TRUE delivers; FALSE, NULL and errors do not."""

    def __init__(self, expression: Expression) -> None:
        self.expression = expression

    # ---- public
    def codes_for(self, source: "PropertySource") -> np.ndarray:
        rows = _Rows(source)
        return np.broadcast_to(self._condition(rows, self.expression), (rows.n,))

    def mask_for(self, source: "PropertySource") -> pa.BooleanArray:
        return from_numpy(self.codes_for(source) == T)

    def mask(self, batch: Union[pa.RecordBatch, pa.Table]) -> pa.BooleanArray:
        return self.mask_for(MapPropertySource(batch.column("properties")))

    def mask_from_properties_text(self, strings) -> pa.BooleanArray:
        """The mask straight from stored `k\\x01v\\x02` texts: only the
        properties the expression reads are cut out, no full map is built.
        All of them are found in one pass over the texts (a pass costs about
        the same for one name as for several); each is cut out only on the
        rows that read it."""
        return self.mask_for(TextPropertySource(strings, referenced_properties(self.expression)))

    # ---- values
    def _value(self, rows: _Rows, node: Expression) -> _Value:
        return visit(node, _ValueOf(self, rows))

    def _in_domain(self, rows: _Rows, v: _Value, conversion: Optional[str], domain: str):
        """(values, conversion_failed) of an operand in the comparison domain."""
        if conversion is not None:
            values, ok = rows.converted(v.prop, conversion) if v.prop is not None else (None, None)
            if values is None:  # a STRING literal converted: one value
                try:
                    return converter(conversion)(v.data), False
                except ValueError:
                    return 0, True
            assert ok is not None
            return values, ~ok
        if v.kind == STRING and v.prop is not None:
            return v.data, False
        if domain == D_DOUBLE and v.kind in (INT, LONG, DOUBLE):
            return float(v.data), False
        return v.data, False

    def _comparison(self, rows: _Rows, node: Comparison) -> np.ndarray:
        left, right = self._value(rows, node.left), self._value(rows, node.right)
        ordering = node.op in ORDERING_OPS
        plan = plan_comparison(left.kind, right.kind, ordering)
        if plan.domain in (D_NONE, D_ERROR):
            lv = rv = None
            failed = plan.domain == D_ERROR  # where both sides are present; the NULL rules below decide the rest
        else:
            lv, lfail = self._in_domain(rows, left, plan.left_conversion, plan.domain)
            rv, rfail = self._in_domain(rows, right, plan.right_conversion, plan.domain)
            failed = np.logical_or(lfail, rfail)
        domain = plan.domain
        if ordering:
            if domain in (D_NONE, D_NEVER_EQUAL):
                outcome = np.zeros(rows.n, dtype=bool)
            elif domain == D_DOUBLE:
                outcome = _ORDER_TESTS[node.op](_java_compare_doubles(lv, rv))
            else:
                a, b = np.asarray(lv, dtype=np.int64), np.asarray(rv, dtype=np.int64)
                outcome = _ORDER_TESTS[node.op](_sign(a, b))
            codes = outcome.view(np.int8) if isinstance(outcome, np.ndarray) else np.int8(T if outcome else F)
            # Lowest priority first: RocketMQ checks left NULL, then evaluates
            # the right side, then converts.
            codes = _overlay(codes, failed, E)
            codes = _overlay(codes, right.null, N)
            codes = _overlay(codes, right.err, E)
            codes = _overlay(codes, left.null, N)
            codes = _overlay(codes, left.err, E)
            return np.asarray(codes, dtype=np.int8)
        equal: Union[bool, np.ndarray]
        if domain in (D_NONE, D_NEVER_EQUAL, D_ERROR):
            equal = False
        elif domain == D_STRING:
            if isinstance(lv, str) and isinstance(rv, str):
                equal = lv == rv
            elif isinstance(lv, str) or isinstance(rv, str):
                equal = _equal_any(rv, [lv]) if isinstance(lv, str) else _equal_any(lv, [rv])
            else:
                equal = _to_bool_numpy(pc.equal(lv, rv))
        elif domain == D_DOUBLE:
            equal = _java_compare_doubles(lv, rv) == 0
        else:
            equal = np.asarray(lv) == np.asarray(rv)
        codes = np.asarray(equal, dtype=bool).view(np.int8)  # T is 1, F is 0
        codes = _overlay(codes, failed, E)
        both_null = np.logical_and(left.null, right.null)
        codes = _overlay(codes, right.null, F)
        codes = _overlay(codes, left.null, N)
        codes = _overlay(codes, both_null, T)
        codes = _overlay(codes, np.logical_or(left.err, right.err), E)
        if node.op == "<>":
            codes = _NOT[codes]
        return codes

    # ---- conditions
    def _condition(self, rows: _Rows, node: Expression) -> np.ndarray:
        """Codes (T, F, N, E) per row."""
        return visit(node, _CodesOf(self, rows))


class _ValueOf(ExpressionVisitor[_Value]):
    """A value node over rows; a condition used as a value is its codes as booleans."""

    def __init__(self, evaluator: "ArrowEvaluator", rows: _Rows) -> None:
        self.evaluator, self.rows = evaluator, rows

    def visit_property(self, node: Property) -> _Value:
        return _Value(STRING, self.rows.column(node.name), self.rows.null(node.name), False, node.name)

    def visit_literal(self, node: Literal) -> _Value:
        return _Value(node.kind, node.value, node.value is None)

    def visit_negate(self, node: Negate) -> _Value:
        inner = visit(node.operand, self)
        return _Value(NULL, None, True, inner.err)

    def _condition(self, node: Expression) -> _Value:
        codes = self.evaluator._condition(self.rows, node)
        return _Value(BOOL, codes == T, codes == N, codes == E)

    visit_comparison = visit_between = visit_in = visit_string_match = visit_is_null = _condition
    visit_as_condition = visit_not = visit_and = visit_or = _condition


class _CodesOf(ConditionVisitor[np.ndarray]):
    """A condition node over rows: an int8 code per row (T, F, N, E)."""

    def __init__(self, evaluator: "ArrowEvaluator", rows: _Rows) -> None:
        self.evaluator, self.rows = evaluator, rows

    def visit_literal(self, node: Literal) -> np.ndarray:
        if not node.is_boolean:
            raise TypeError(f"{node!r} is not a condition")
        code = {True: T, False: F, None: N}[node.value]  # type: ignore[index]
        return np.full(self.rows.n, code, dtype=np.int8)

    def visit_as_condition(self, node: AsCondition) -> np.ndarray:
        return _codes(np.zeros(self.rows.n, dtype=bool), self.rows.null(node.property.name))

    def visit_not(self, node: Not) -> np.ndarray:
        return _NOT[visit(node.operand, self)]

    def visit_and(self, node: And) -> np.ndarray:
        return self._junction(node, _AND, F)

    def visit_or(self, node: Or) -> np.ndarray:
        return self._junction(node, _OR, T)

    def _junction(self, node: Union[And, Or], table: np.ndarray, decided: int) -> np.ndarray:
        rows, n = self.rows, self.rows.n
        left = visit(node.left, self)
        # The right side matters only where the left did not decide (as RocketMQ short-circuits); when that
        # is a minority of rows, the right side is evaluated on just those rows.
        open_rows = (left == T if decided == F else left == F) | (left == N)
        count = int(np.count_nonzero(open_rows))
        if count == 0:
            return _combine(table, left, np.int8(F))
        if n >= SUBSET_MIN_ROWS and count <= SUBSET_MAX_SHARE * n:
            index = np.flatnonzero(open_rows)
            sub = rows.subset(index, _read_first(node.right))
            right = np.full(n, F, dtype=np.int8)  # ignored by the table where the left decided
            right[index] = np.broadcast_to(self.evaluator._condition(sub, node.right), (count,))
        else:
            rows.source.prefetch(referenced_properties(node.right))  # one pass for them all
            right = visit(node.right, self)
        return _combine(table, left, right)

    def visit_between(self, node: Between) -> np.ndarray:
        return visit(node.expanded(), self)

    def visit_comparison(self, node: Comparison) -> np.ndarray:
        return np.broadcast_to(self.evaluator._comparison(self.rows, node), (self.rows.n,))

    def visit_in(self, node: In) -> np.ndarray:
        name = node.property.name
        col = self.rows.column(name)
        if len(node.values) <= 8:
            hit = _equal_any(col, node.values)  # a few comparisons are cheaper than hashing every string
        else:
            hit = _to_bool_numpy(pc.is_in(col, value_set=string_array(node.values)))
        if node.negated:
            hit = ~hit
        return _codes(hit, self.rows.null(name))

    def visit_string_match(self, node: StringMatch) -> np.ndarray:
        n = self.rows.n
        if not node.search:
            return np.full(n, F, dtype=np.int8)
        v = self.evaluator._value(self.rows, node.operand)
        if v.kind == STRING and v.prop is not None:
            func = {"CONTAINS": pc.match_substring, "STARTSWITH": pc.starts_with, "ENDSWITH": pc.ends_with}[node.op]
            hit = _to_bool_numpy(func(v.data, node.search))
            hit = (hit != node.negated) & ~v.null
        elif v.kind == STRING:
            text = v.data
            found = {
                "CONTAINS": node.search in text,
                "STARTSWITH": text.startswith(node.search),
                "ENDSWITH": text.endswith(node.search),
            }[node.op]
            hit = np.full(n, found != node.negated)
        else:
            hit = np.zeros(n, dtype=bool)  # not a string: FALSE
        return _codes(np.broadcast_to(hit, (n,)), err=v.err)

    def visit_is_null(self, node: IsNull) -> np.ndarray:
        v = self.evaluator._value(self.rows, node.operand)
        is_null = np.logical_xor(v.null, node.negated)
        return _codes(np.broadcast_to(is_null, (self.rows.n,)), err=v.err)


class PropertySource:
    """Where the vectorised evaluator reads properties from: `n` rows, and
    `column(name)` giving a string array (null where missing)."""

    n: int

    def column(self, name: str) -> pa.Array:  # pragma: no cover - interface
        raise NotImplementedError

    def subset(self, index: np.ndarray, names: list[str]) -> "PropertySource":  # pragma: no cover - interface
        """The rows at `index`; `names` are the properties that will be read."""
        raise NotImplementedError

    def prefetch(self, names: list[str]) -> None:
        """A hint that these properties will be read (sources that find
        several properties in one pass use it)."""


class MapPropertySource(PropertySource):
    def __init__(self, map_array) -> None:
        self._array = map_array
        self._map = MapColumn(map_array)
        self.n = self._map.n

    def subset(self, index: np.ndarray, names: list[str]) -> PropertySource:
        return MapPropertySource(self._array.take(from_numpy(index)))

    def column(self, name: str) -> pa.Array:
        return self._map.column(name)


class DictPropertySource(PropertySource):
    """Ready-made property columns (e.g. from tests): name -> string array."""

    def __init__(self, columns: dict[str, pa.Array], n: int) -> None:
        self._columns = columns
        self.n = n

    def subset(self, index: np.ndarray, names: list[str]) -> PropertySource:
        taken = from_numpy(index)
        return DictPropertySource({k: v.take(taken) for k, v in self._columns.items()}, len(index))

    def column(self, name: str) -> pa.Array:
        col = self._columns.get(name)
        return pa.nulls(self.n, type=pa.string()) if col is None else col


class TextPropertySource(PropertySource):
    """Properties read straight from the stored texts (see PropertiesText)."""

    def __init__(self, strings, names=None) -> None:
        self._text = strings if isinstance(strings, PropertiesText) else PropertiesText(strings, names)
        self.n = self._text.n

    def subset(self, index: np.ndarray, names: list[str]) -> PropertySource:
        return TextPropertySource(self._text.subset(index, names))

    def prefetch(self, names: list[str]) -> None:
        self._text.prefetch(names)

    def column(self, name: str) -> pa.Array:
        return self._text.column(name)
