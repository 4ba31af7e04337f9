"""The filter expression tree: small immutable nodes, built once by a parser
(SQL92 or tag selector or Spark pushdown) and read by the visitors.

Value nodes (`Property`, `Literal`, `Negate`) yield values; every other node is
a condition yielding TRUE / FALSE / NULL (or failing while evaluating, which
counts as "not delivered").  ``str(node)`` is a normalised SQL92 text that
parses back to an equal tree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator, Union

# Literal kinds follow the Java types RocketMQ's parser gives constants: they
# decide how a property's text is converted when compared with the constant.
INT = "int"  # java.lang.Integer
LONG = "long"  # java.lang.Long
DOUBLE = "double"  # java.lang.Double
STRING = "string"
BOOL = "bool"
NULL = "null"
NUMERIC_KINDS = (INT, LONG, DOUBLE)

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


def quote_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _format_double(value: float) -> str:
    # repr() always has a '.' or an exponent, so it re-parses as a double.
    return repr(value)


class Expression:
    """Base of every node."""

    __slots__ = ()

    def children(self) -> tuple["Expression", ...]:
        return ()

    def walk(self) -> Iterator["Expression"]:
        yield self
        for child in self.children():
            yield from child.walk()

    def __and__(self, other: "Expression") -> "Expression":
        return And(self, other)

    def __or__(self, other: "Expression") -> "Expression":
        return Or(self, other)

    def __invert__(self) -> "Expression":
        return Not(self)


# ---------------------------------------------------------------- values


@dataclass(frozen=True)
class Property(Expression):
    """A message property by (case-sensitive) name; missing means NULL."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Literal(Expression):
    value: Union[int, float, str, bool, None]
    kind: str

    def __post_init__(self) -> None:
        checks = {
            INT: lambda v: type(v) is int and INT_MIN <= v <= INT_MAX,
            LONG: lambda v: type(v) is int and LONG_MIN <= v <= LONG_MAX,
            DOUBLE: lambda v: type(v) is float,
            STRING: lambda v: type(v) is str,
            BOOL: lambda v: type(v) is bool,
            NULL: lambda v: v is None,
        }
        if self.kind not in checks:
            raise ValueError(f"unknown literal kind {self.kind!r}")
        if not checks[self.kind](self.value):
            raise ValueError(f"{self.value!r} is not a valid {self.kind} literal")

    @staticmethod
    def of(value: Union[int, float, str, bool, None]) -> "Literal":
        """The literal RocketMQ's parser would make for `value`."""
        if value is None:
            return Literal(None, NULL)
        if isinstance(value, bool):
            return Literal(value, BOOL)
        if isinstance(value, int):
            return Literal(value, INT if INT_MIN <= value <= INT_MAX else LONG)
        if isinstance(value, float):
            return Literal(value, DOUBLE)
        if isinstance(value, str):
            return Literal(value, STRING)
        raise TypeError(f"no selector literal for {value!r} ({type(value).__name__})")

    @property
    def is_boolean(self) -> bool:
        # RocketMQ's TRUE/FALSE/NULL constants are boolean expressions.
        return self.kind in (BOOL, NULL)

    def __str__(self) -> str:
        if self.kind == STRING:
            return quote_string(self.value)  # type: ignore[arg-type]
        if self.kind == BOOL:
            return "TRUE" if self.value else "FALSE"
        if self.kind == NULL:
            return "NULL"
        if self.kind == DOUBLE:
            assert isinstance(self.value, float) and math.isfinite(self.value)
            return _format_double(self.value)
        return str(self.value)


@dataclass(frozen=True)
class Negate(Expression):
    """Unary minus on something that is not a numeric constant (those are
    folded by the parser); RocketMQ yields NULL for a non-number."""

    operand: Expression

    def children(self) -> tuple[Expression, ...]:
        return (self.operand,)

    def __str__(self) -> str:
        text = _operand_text(self.operand)
        # "--" would start a comment.
        return "-(" + text + ")" if text.startswith("-") else "-" + text


def _operand_text(node: Expression) -> str:
    """Operand of a comparison: anything but a plain value gets parentheses,
    so the text re-parses with the same grouping (`(NOT a) = 1`)."""
    if isinstance(node, (Property, Negate)):
        return str(node)
    if isinstance(node, Literal):
        return str(node)
    return "(" + str(node) + ")"


# ---------------------------------------------------------------- conditions


COMPARISON_OPS = ("=", "<>", ">", ">=", "<", "<=")
ORDERING_OPS = (">", ">=", "<", "<=")


@dataclass(frozen=True)
class Comparison(Expression):
    op: str
    left: Expression
    right: Expression

    def __post_init__(self) -> None:
        if self.op not in COMPARISON_OPS:
            raise ValueError(f"unknown comparison operator {self.op!r}")

    def children(self) -> tuple[Expression, ...]:
        return (self.left, self.right)

    def __str__(self) -> str:
        return f"{_operand_text(self.left)} {self.op} {_operand_text(self.right)}"


@dataclass(frozen=True)
class Between(Expression):
    value: Expression
    low: Expression
    high: Expression
    negated: bool = False

    def children(self) -> tuple[Expression, ...]:
        return (self.value, self.low, self.high)

    def expanded(self) -> Expression:
        """RocketMQ evaluates BETWEEN as two comparisons, left to right."""
        if self.negated:
            return Or(Comparison("<", self.value, self.low), Comparison(">", self.value, self.high))
        return And(Comparison(">=", self.value, self.low), Comparison("<=", self.value, self.high))

    def __str__(self) -> str:
        word = "NOT BETWEEN" if self.negated else "BETWEEN"
        return (
            f"{_operand_text(self.value)} {word} "
            f"{_operand_text(self.low)} AND {_operand_text(self.high)}"
        )


@dataclass(frozen=True)
class In(Expression):
    property: Property
    values: tuple[str, ...]
    negated: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.property, Property):
            raise ValueError(f"IN needs a property on its left, got {self.property}")
        if not self.values or not all(isinstance(v, str) for v in self.values):
            raise ValueError(f"IN needs one or more string values, got {self.values!r}")

    def children(self) -> tuple[Expression, ...]:
        return (self.property,)

    def __str__(self) -> str:
        word = "NOT IN" if self.negated else "IN"
        items = ", ".join(quote_string(v) for v in self.values)
        return f"{self.property} {word} ({items})"


STRING_MATCH_OPS = ("CONTAINS", "STARTSWITH", "ENDSWITH")


@dataclass(frozen=True)
class StringMatch(Expression):
    op: str
    operand: Expression
    search: str
    negated: bool = False

    def __post_init__(self) -> None:
        if self.op not in STRING_MATCH_OPS:
            raise ValueError(f"unknown string operator {self.op!r}")

    def children(self) -> tuple[Expression, ...]:
        return (self.operand,)

    def __str__(self) -> str:
        word = ("NOT " if self.negated else "") + self.op
        return f"{_operand_text(self.operand)} {word} {quote_string(self.search)}"


@dataclass(frozen=True)
class IsNull(Expression):
    operand: Expression
    negated: bool = False

    def children(self) -> tuple[Expression, ...]:
        return (self.operand,)

    def __str__(self) -> str:
        return f"{_operand_text(self.operand)} IS {'NOT ' if self.negated else ''}NULL"


@dataclass(frozen=True)
class AsCondition(Expression):
    """A bare property where a condition is expected (`WHERE a AND ...`):
    RocketMQ gives FALSE when present (a string is not a Boolean), NULL when missing."""

    property: Property

    def children(self) -> tuple[Expression, ...]:
        return (self.property,)

    def __str__(self) -> str:
        return str(self.property)


@dataclass(frozen=True)
class Not(Expression):
    operand: Expression

    def children(self) -> tuple[Expression, ...]:
        return (self.operand,)

    def __str__(self) -> str:
        inner = self.operand
        if isinstance(inner, (AsCondition, Literal)):
            return f"NOT {inner}"
        return f"NOT ({inner})"


@dataclass(frozen=True)
class And(Expression):
    left: Expression
    right: Expression

    def children(self) -> tuple[Expression, ...]:
        return (self.left, self.right)

    def __str__(self) -> str:
        # AND is left-associative: a right-hand AND needs parentheses to keep its shape.
        left = f"({self.left})" if isinstance(self.left, Or) else str(self.left)
        right = f"({self.right})" if isinstance(self.right, (And, Or)) else str(self.right)
        return f"{left} AND {right}"


@dataclass(frozen=True)
class Or(Expression):
    left: Expression
    right: Expression

    def children(self) -> tuple[Expression, ...]:
        return (self.left, self.right)

    def __str__(self) -> str:
        right = f"({self.right})" if isinstance(self.right, Or) else str(self.right)
        return f"{self.left} OR {right}"


ALWAYS_TRUE = Literal(True, BOOL)

CONDITION_TYPES = (Comparison, Between, In, StringMatch, IsNull, AsCondition, Not, And, Or)


def is_condition(node: Expression) -> bool:
    """Whether RocketMQ treats `node` as a BooleanExpression."""
    return isinstance(node, CONDITION_TYPES) or (isinstance(node, Literal) and node.is_boolean)


def referenced_properties(node: Expression) -> list[str]:
    """Property names the expression reads, in first-seen order."""
    seen: dict[str, None] = {}
    for sub in node.walk():
        if isinstance(sub, Property):
            seen.setdefault(sub.name, None)
    return list(seen)
