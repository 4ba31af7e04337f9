"""The tree is walked in one place: each consumer is a visitor, and a node kind no visitor knows fails once,
naming it, for every consumer alike."""
from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pytest

from filters.arrow_evaluator import ArrowEvaluator
from filters.consume_queue_pruning import possible_tags
from filters.expressions import BOOL, NULL, STRING, Expression, Property
from filters.row_evaluator import compile_condition
from filters.sql92_parser import parse_sql92
from filters.visitors import ExpressionVisitor, static_kind, visit


@dataclass(frozen=True)
class Unknown(Expression):
    """A node kind nobody registered."""

    name: str = "x"


@pytest.mark.parametrize("walk", [
    lambda n: compile_condition(n),
    lambda n: possible_tags(n),
    lambda n: static_kind(n),
    lambda n: ArrowEvaluator(n).mask(pa.table({"properties": pa.array([[("a", "1")]],
                                                                       pa.map_(pa.string(), pa.string()))})),
])
def test_an_unknown_node_fails_in_the_one_dispatch(walk):
    with pytest.raises(TypeError, match="no visitor method for expression node Unknown"):
        walk(Unknown())


def test_every_node_kind_has_a_method_and_a_visitor_must_cover_them_all():
    class Partial(ExpressionVisitor[int]):
        def visit_property(self, node):
            return 1

    with pytest.raises(TypeError, match="abstract"):
        Partial()


def test_static_kinds():
    tree = parse_sql92("a = 'x' AND b > 1")
    assert static_kind(tree) == BOOL
    assert static_kind(Property("a")) == STRING
    assert static_kind(parse_sql92("-a IS NULL").operand) == NULL


def test_a_counting_visitor_is_a_small_subclass():
    class CountProperties(ExpressionVisitor[int]):
        def visit_property(self, node):
            return 1

        def visit_literal(self, node):
            return 0

        def visit_negate(self, node):
            return visit(node.operand, self)

        def visit_comparison(self, node):
            return visit(node.left, self) + visit(node.right, self)

        def visit_between(self, node):
            return visit(node.expanded(), self)

        def visit_in(self, node):
            return 1

        def visit_string_match(self, node):
            return visit(node.operand, self)

        def visit_is_null(self, node):
            return visit(node.operand, self)

        def visit_as_condition(self, node):
            return 1

        def visit_not(self, node):
            return visit(node.operand, self)

        def visit_and(self, node):
            return visit(node.left, self) + visit(node.right, self)

        visit_or = visit_and

    assert visit(parse_sql92("a = 1 AND (b IN ('x') OR NOT c IS NULL) AND d BETWEEN 1 AND e"),
                 CountProperties()) == 6  # a, b, c, e and d twice (BETWEEN is two comparisons)
