"""Per-record evaluation over a message's properties (a str -> str mapping),
with RocketMQ's three-valued semantics.

The tree is compiled once into nested closures.  A condition closure returns
True / False / None (NULL); an evaluation error is an exception that the
top level turns into "not delivered".  Operands are evaluated left to right
and AND / OR stop as soon as the left side decides, as in RocketMQ.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

from .comparison_rules import (
    D_BOOL,
    D_DOUBLE,
    D_ERROR,
    D_LONG,
    D_NEVER_EQUAL,
    D_NONE,
    D_STRING,
    plan_comparison,
    scalar_converter,
)
from .expressions import (
    ORDERING_OPS,
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
)
from .java_numbers import java_double_compare
from .visitors import ConditionVisitor, ExpressionVisitor, static_kind, visit

Props = Mapping[str, str]
Condition = Callable[[Props], Optional[bool]]

_STRING_TESTS: dict[str, Callable[[str, str], bool]] = {
    "CONTAINS": lambda v, s: s in v, "STARTSWITH": lambda v, s: v.startswith(s), "ENDSWITH": lambda v, s: v.endswith(s),
}

_ORDER_TESTS = {
    ">": lambda c: c > 0,
    ">=": lambda c: c >= 0,
    "<": lambda c: c < 0,
    "<=": lambda c: c <= 0,
}


def _int_compare(a: int, b: int) -> int:
    return (a > b) - (a < b)


class _ValueCompiler(ExpressionVisitor[Callable[[Props], Any]]):
    """A value node as a function of the properties; a condition used as a value is compiled as one."""

    def visit_property(self, node: Property) -> Callable[[Props], Any]:
        name = node.name
        return lambda p: p.get(name)

    def visit_literal(self, node: Literal) -> Callable[[Props], Any]:
        value = node.value
        return lambda p: value

    def visit_negate(self, node: Negate) -> Callable[[Props], Any]:
        # A non-number negated is NULL; the operand still runs (it may fail).
        inner = _compile_value(node.operand)
        if isinstance(node.operand, (Property, Literal)):
            return lambda p: None

        def negate(p):
            inner(p)
            return None

        return negate

    def _condition(self, node: Expression) -> Callable[[Props], Any]:
        return compile_condition(node)

    visit_comparison = visit_between = visit_in = visit_string_match = visit_is_null = _condition
    visit_as_condition = visit_not = visit_and = visit_or = _condition


_VALUES = _ValueCompiler()


def _compile_value(node: Expression) -> Callable[[Props], Any]:
    return visit(node, _VALUES)


def _compile_comparison(node: Comparison) -> Condition:
    op = node.op
    ordering = op in ORDERING_OPS
    plan = plan_comparison(static_kind(node.left), static_kind(node.right), ordering)
    left = _compile_value(node.left)
    right = _compile_value(node.right)
    lconv = scalar_converter(plan.left_conversion)
    rconv = scalar_converter(plan.right_conversion)
    domain = plan.domain

    def converted(lv, rv):
        if lconv is not None:
            lv = lconv(lv)
        if rconv is not None:
            rv = rconv(rv)
        return lv, rv

    if ordering:
        test = _ORDER_TESTS[op]
        compare = java_double_compare if domain == D_DOUBLE else _int_compare

        def ordered(p):
            lv = left(p)
            if lv is None:
                return None  # RocketMQ does not evaluate the right side then
            rv = right(p)
            if rv is None:
                return None
            lv, rv = converted(lv, rv)
            if domain == D_DOUBLE:
                lv, rv = float(lv), float(rv)
            return test(compare(lv, rv))

        return ordered

    def equal(p):
        lv = left(p)
        rv = right(p)
        if lv is None:
            return True if rv is None else None
        if rv is None:
            return False
        if domain == D_NEVER_EQUAL:
            return False
        if domain == D_ERROR:
            raise ValueError("RocketMQ cannot compare a boolean with a property's text")
        lv, rv = converted(lv, rv)
        if domain == D_DOUBLE:
            return java_double_compare(float(lv), float(rv)) == 0
        return lv == rv

    assert domain in (D_STRING, D_LONG, D_DOUBLE, D_BOOL, D_NEVER_EQUAL, D_NONE, D_ERROR)
    if op == "=":
        return equal

    def not_equal(p):
        result = equal(p)
        return None if result is None else not result

    return not_equal


class _ConditionCompiler(ConditionVisitor[Condition]):
    """A condition node as a function of the properties returning True / False / None."""

    def visit_literal(self, node: Literal) -> Condition:
        if not node.is_boolean:
            raise TypeError(f"{node} is not a condition")
        value: Optional[bool] = None if node.value is None else bool(node.value)
        return lambda p: value

    def visit_as_condition(self, node: AsCondition) -> Condition:
        name = node.property.name
        return lambda p: None if p.get(name) is None else False

    def visit_not(self, node: Not) -> Condition:
        inner = compile_condition(node.operand)

        def not_(p):
            v = inner(p)
            return None if v is None else not v

        return not_

    def visit_and(self, node: And) -> Condition:
        left, right = compile_condition(node.left), compile_condition(node.right)

        def and_(p):
            lv = left(p)
            if lv is False:
                return False
            rv = right(p)
            if rv is False:
                return False
            return None if lv is None or rv is None else True

        return and_

    def visit_or(self, node: Or) -> Condition:
        left, right = compile_condition(node.left), compile_condition(node.right)

        def or_(p):
            lv = left(p)
            if lv is True:
                return True
            rv = right(p)
            if rv is True:
                return True
            return None if lv is None or rv is None else False

        return or_

    def visit_between(self, node: Between) -> Condition:
        return compile_condition(node.expanded())

    def visit_comparison(self, node: Comparison) -> Condition:
        return _compile_comparison(node)

    def visit_in(self, node: In) -> Condition:
        name, values, negated = node.property.name, frozenset(node.values), node.negated

        def in_(p):
            v = p.get(name)
            if v is None:
                return None
            return (v in values) != negated

        return in_

    def visit_string_match(self, node: StringMatch) -> Condition:
        search, negated = node.search, node.negated
        if not search:
            return lambda p: False  # RocketMQ: an empty search string never matches
        operand = _compile_value(node.operand)
        test = _STRING_TESTS[node.op]

        def string_match(p):
            v = operand(p)
            if not isinstance(v, str):
                return False  # missing or not a string: FALSE for both forms
            return test(v, search) != negated

        return string_match

    def visit_is_null(self, node: IsNull) -> Condition:
        operand = _compile_value(node.operand)
        negated = node.negated
        return lambda p: (operand(p) is None) != negated


_CONDITIONS = _ConditionCompiler()


def compile_condition(node: Expression) -> Condition:
    """Compile a condition node into a function of the properties mapping."""
    return visit(node, _CONDITIONS)


class RowEvaluator:
    """`matches(properties)` -> bool: TRUE delivers; FALSE, NULL and errors do not."""

    __slots__ = ("_condition",)

    def __init__(self, expression: Expression) -> None:
        self._condition = compile_condition(expression)

    def evaluate(self, properties: Optional[Props]) -> Optional[bool]:
        """Three-valued result; raises ValueError on an evaluation error."""
        return self._condition(properties if properties is not None else {})

    def matches(self, properties: Optional[Props]) -> bool:
        try:
            return self._condition(properties if properties is not None else {}) is True
        except (ValueError, TypeError, AttributeError):
            return False
