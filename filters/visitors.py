"""Walking the expression tree: a visitor base with one method per node kind and one `visit` dispatch.

Every consumer of the tree (the row evaluator, the Arrow evaluator, consume-queue pruning, the static kind of a
value) is a small subclass; a visitor recurses by calling `visit` on the children it needs, in the order it
needs them (the evaluators short-circuit as RocketMQ does). A node kind without a `visit` registration fails
here, in one place, naming it.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from functools import singledispatch
from typing import Generic, TypeVar

from .expressions import (
    BOOL,
    NULL,
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
)

T = TypeVar("T")


class ExpressionVisitor(Generic[T], ABC):
    """One method per node kind. Values: Property, Literal, Negate; conditions: the rest."""

    @abstractmethod
    def visit_property(self, node: Property) -> T: ...

    @abstractmethod
    def visit_literal(self, node: Literal) -> T: ...

    @abstractmethod
    def visit_negate(self, node: Negate) -> T: ...

    @abstractmethod
    def visit_comparison(self, node: Comparison) -> T: ...

    @abstractmethod
    def visit_between(self, node: Between) -> T: ...

    @abstractmethod
    def visit_in(self, node: In) -> T: ...

    @abstractmethod
    def visit_string_match(self, node: StringMatch) -> T: ...

    @abstractmethod
    def visit_is_null(self, node: IsNull) -> T: ...

    @abstractmethod
    def visit_as_condition(self, node: AsCondition) -> T: ...

    @abstractmethod
    def visit_not(self, node: Not) -> T: ...

    @abstractmethod
    def visit_and(self, node: And) -> T: ...

    @abstractmethod
    def visit_or(self, node: Or) -> T: ...


@singledispatch
def visit(node: Expression, visitor: ExpressionVisitor[T]) -> T:
    raise TypeError(f"no visitor method for expression node {type(node).__name__}: {node!r}")


@visit.register
def _(node: Property, visitor: ExpressionVisitor[T]) -> T:
    return visitor.visit_property(node)


@visit.register
def _(node: Literal, visitor: ExpressionVisitor[T]) -> T:
    return visitor.visit_literal(node)


@visit.register
def _(node: Negate, visitor: ExpressionVisitor[T]) -> T:
    return visitor.visit_negate(node)


@visit.register
def _(node: Comparison, visitor: ExpressionVisitor[T]) -> T:
    return visitor.visit_comparison(node)


@visit.register
def _(node: Between, visitor: ExpressionVisitor[T]) -> T:
    return visitor.visit_between(node)


@visit.register
def _(node: In, visitor: ExpressionVisitor[T]) -> T:
    return visitor.visit_in(node)


@visit.register
def _(node: StringMatch, visitor: ExpressionVisitor[T]) -> T:
    return visitor.visit_string_match(node)


@visit.register
def _(node: IsNull, visitor: ExpressionVisitor[T]) -> T:
    return visitor.visit_is_null(node)


@visit.register
def _(node: AsCondition, visitor: ExpressionVisitor[T]) -> T:
    return visitor.visit_as_condition(node)


@visit.register
def _(node: Not, visitor: ExpressionVisitor[T]) -> T:
    return visitor.visit_not(node)


@visit.register
def _(node: And, visitor: ExpressionVisitor[T]) -> T:
    return visitor.visit_and(node)


@visit.register
def _(node: Or, visitor: ExpressionVisitor[T]) -> T:
    return visitor.visit_or(node)


class ConditionVisitor(ExpressionVisitor[T], ABC):
    """A visitor of conditions only: a value node where a condition belongs is a TypeError naming it."""

    def visit_property(self, node: Property) -> T:
        raise TypeError(f"{node!r} is not a condition")

    def visit_negate(self, node: Negate) -> T:
        raise TypeError(f"{node!r} is not a condition")


class _StaticKind(ExpressionVisitor[str]):
    def visit_property(self, node: Property) -> str:
        return STRING

    def visit_literal(self, node: Literal) -> str:
        return node.kind

    def visit_negate(self, node: Negate) -> str:
        return NULL  # numeric constants are folded: what is left negates a non-number

    def _condition(self, node: Expression) -> str:
        return BOOL

    visit_comparison = visit_between = visit_in = visit_string_match = visit_is_null = _condition
    visit_as_condition = visit_not = visit_and = visit_or = _condition


_STATIC_KIND = _StaticKind()


def static_kind(node: Expression) -> str:
    """The kind of value a node yields: a literal kind, STRING for a property, NULL for a Negate (never a
    number: numeric constants are folded), BOOL for a condition."""
    return visit(node, _STATIC_KIND)
