"""How RocketMQ compares two values of given kinds (ComparisonExpression.compare),
decided once per comparison node from the operands' static kinds and shared
by the per-record and the vectorised evaluators.

When the kinds differ, a string (property text) is converted to the other
side's kind with Java's rules; Integer/Long widen to Long, anything with a
Double widens to Double; a Boolean against a number is simply not equal.  For
`> >= < <=` two strings are both converted to doubles.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from .expressions import BOOL, DOUBLE, INT, LONG, NULL, STRING
from .java_numbers import java_boolean_value_of, java_double_value_of, java_parse_integer

# Comparison domains
D_STRING = "string"  # String.equals
D_LONG = "long"  # exact integer comparison
D_DOUBLE = "double"  # Double.compareTo
D_BOOL = "bool"  # Boolean.equals
D_NEVER_EQUAL = "never-equal"  # Boolean vs number: FALSE
D_NONE = "none"  # one side is always NULL: only the NULL rules apply
# A boolean on the left of `=`/`<>` and a property's text on the right: RocketMQ casts the Boolean to String and
# throws, so the comparison fails (no match) wherever both sides are present. Kept on purpose: a Spark job and
# a broker then deliver the same messages.
D_ERROR = "error"


@dataclass(frozen=True)
class ComparisonPlan:
    domain: str
    left_conversion: Optional[str]  # kind the left STRING is converted to, if any
    right_conversion: Optional[str]


def _widen(a: str, b: str) -> str:
    if a == b:
        return {INT: D_LONG, LONG: D_LONG, DOUBLE: D_DOUBLE, BOOL: D_BOOL, STRING: D_STRING}[a]
    kinds = {a, b}
    if kinds <= {INT, LONG}:
        return D_LONG
    if kinds <= {INT, LONG, DOUBLE}:
        return D_DOUBLE
    return D_NEVER_EQUAL  # BOOL with a number


def plan_comparison(left_kind: str, right_kind: str, ordering: bool) -> ComparisonPlan:
    if left_kind == NULL or right_kind == NULL:
        return ComparisonPlan(D_NONE, None, None)
    if left_kind == STRING and right_kind == STRING:
        if ordering:
            return ComparisonPlan(D_DOUBLE, DOUBLE, DOUBLE)
        return ComparisonPlan(D_STRING, None, None)
    if left_kind == STRING:
        return ComparisonPlan(_widen(right_kind, right_kind), right_kind, None)
    if right_kind == STRING:
        if left_kind == BOOL and not ordering:
            return ComparisonPlan(D_ERROR, None, None)
        return ComparisonPlan(_widen(left_kind, left_kind), None, left_kind)
    return ComparisonPlan(_widen(left_kind, right_kind), None, None)


def scalar_converter(kind: Optional[str]) -> Optional[Callable[[str], Any]]:
    """Per-value conversion of a property's text to `kind` (ValueError on failure); None for no conversion."""
    return None if kind is None else converter(kind)


def converter(kind: str) -> Callable[[str], Any]:
    """Per-value conversion of a property's text to `kind` (ValueError on failure)."""
    if kind == INT:
        return lambda text: java_parse_integer(text, 32)
    if kind == LONG:
        return lambda text: java_parse_integer(text, 64)
    if kind == DOUBLE:
        return java_double_value_of
    if kind == BOOL:
        return java_boolean_value_of
    raise AssertionError(kind)
