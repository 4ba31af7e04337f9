"""RocketMQ's SQL92 selector grammar (lark, LALR) -> expression tree.

The grammar follows RocketMQ's SelectorParser: precedence, tightest first,
unary `+ - NOT`; `> >= < <= [NOT] BETWEEN [NOT] IN [NOT] CONTAINS/STARTSWITH/
ENDSWITH`; `= <> IS [NOT] NULL`; AND; OR.  The checks RocketMQ makes while
building its expression objects are made here too, so a selector it would
refuse is refused when the filter is built, with the position of the fault.
"""

from __future__ import annotations

from functools import lru_cache

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from .errors import FilterParseError
from .expressions import (
    DOUBLE,
    INT,
    INT_MAX,
    INT_MIN,
    LONG,
    LONG_MAX,
    NUMERIC_KINDS,
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
    is_condition,
)

# Keywords are case-insensitive and never identifiers (RocketMQ's tokenizer
# matches them first): lark re-types an identifier whose whole text is a
# keyword (`and`, not `andy`), everywhere, since the lexer is not contextual.
# An identifier's text keeps its case: property names are case-sensitive.
# A `--` comment runs to a line end, which it needs (SelectorParser's
# LINE_COMMENT): without one, `--1` is two minus signs and a number.
GRAMMAR = r"""
?start: or_expr

?or_expr: and_expr
        | or_expr _OR and_expr                      -> or_

?and_expr: eq_expr
         | and_expr _AND eq_expr                    -> and_

?eq_expr: cmp_expr
        | eq_expr "=" cmp_expr                      -> eq
        | eq_expr "<>" cmp_expr                     -> ne
        | eq_expr _IS _NULL                         -> is_null
        | eq_expr _IS _NOT _NULL                    -> is_not_null

?cmp_expr: unary
         | cmp_expr ">" unary                       -> gt
         | cmp_expr ">=" unary                      -> ge
         | cmp_expr "<" unary                       -> lt
         | cmp_expr "<=" unary                      -> le
         | cmp_expr _BETWEEN unary _AND unary       -> between
         | cmp_expr _NOT _BETWEEN unary _AND unary  -> not_between
         | cmp_expr _IN "(" string_list ")"         -> in_
         | cmp_expr _NOT _IN "(" string_list ")"    -> not_in
         | cmp_expr string_op string                -> string_match
         | cmp_expr _NOT string_op string           -> not_string_match

?string_op: CONTAINS | STARTSWITH | ENDSWITH

string_list: string ("," string)*

?unary: primary
      | "+" unary                                   -> plus
      | "-" unary                                   -> minus
      | _NOT unary                                  -> not_

?primary: literal
        | IDENTIFIER                                -> prop
        | "(" or_expr ")"

?literal: string
        | DECIMAL                                   -> integer
        | FLOAT                                     -> floating
        | _TRUE                                     -> true
        | _FALSE                                    -> false
        | _NULL                                     -> null

string: STRING

_OR: "or"i
_AND: "and"i
_NOT: "not"i
_IS: "is"i
_NULL: "null"i
_TRUE: "true"i
_FALSE: "false"i
_BETWEEN: "between"i
_IN: "in"i
CONTAINS: "contains"i
STARTSWITH: "startswith"i
ENDSWITH: "endswith"i

IDENTIFIER: /[a-z_$][a-z0-9_$]*/i
STRING: /'(?:[^']|'')*'/
FLOAT.2: /(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+/
DECIMAL: /(?:0|[1-9][0-9]*)[lL]?/

%ignore /[ \t\r\n\f]+/
%ignore /\/\*(?:.|\n)*?\*\//
%ignore /--[^\r\n]*(\r\n|\r|\n)/
"""

# The keyword terminals (SelectorParser's tokens that are never identifiers).
_KEYWORDS = {"_OR", "_AND", "_NOT", "_IS", "_NULL", "_TRUE", "_FALSE", "_BETWEEN", "_IN", "CONTAINS", "STARTSWITH",
             "ENDSWITH"}

_DOUBLE_MAX = 1.7976931348623157e308
_DOUBLE_MIN = 5e-324


class _Fault(Exception):
    """A semantic fault at a position; turned into FilterParseError."""

    def __init__(self, position: int, reason: str) -> None:
        super().__init__(reason)
        self.position = position
        self.reason = reason


@lru_cache(maxsize=1)
def _parser() -> Lark:
    return Lark(GRAMMAR, parser="lalr", lexer="basic", propagate_positions=True, maybe_placeholders=False)


def _pos(node) -> int:
    return getattr(node, "_pos", 0)


def _at(node: Expression, pos: int) -> Expression:
    # Nodes are frozen; the source position rides along outside the dataclass
    # fields so equality and hashing ignore it.
    object.__setattr__(node, "_pos", pos)
    return node


def _require_condition(node: Expression, what: str) -> Expression:
    """RocketMQ's asBooleanExpression: a bare property becomes a condition,
    anything else that is not boolean is refused."""
    if is_condition(node):
        return node
    if isinstance(node, Property):
        return _at(AsCondition(node), _pos(node))
    raise _Fault(_pos(node), f"{what} must be a condition, but {node} is not boolean")


def _check_orderable(node: Expression, op: str) -> None:
    # RocketMQ's checkLessThanOperand: no string/boolean/NULL constant and no
    # boolean expression as an operand of an ordering comparison.
    if isinstance(node, Literal) and node.kind not in NUMERIC_KINDS:
        raise _Fault(_pos(node), f"{node} cannot be compared with '{op}'; use a number or a property")
    if is_condition(node):
        raise _Fault(_pos(node), f"the condition {node} cannot be compared with '{op}'")


def _check_equatable(node: Expression, op: str) -> None:
    if isinstance(node, Literal) and node.value is None:
        raise _Fault(_pos(node), f"NULL cannot be compared with '{op}'; use IS NULL / IS NOT NULL")


@v_args(meta=True, inline=True)
class _TreeBuilder(Transformer):
    # ---- literals
    def string(self, meta, token):
        return _at(Literal(token[1:-1].replace("''", "'"), "string"), meta.start_pos)

    def integer(self, meta, token):
        text = token.rstrip("lL")
        value = int(text)
        if value > LONG_MAX:
            # RocketMQ parses the literal before a unary minus applies: 9223372036854775808 overflows even in
            # -9223372036854775808 (SelectorParser's literal, then UnaryExpression.createNegate).
            raise _Fault(meta.start_pos, f"integer {token} is outside the 64-bit range (at most {LONG_MAX}; a minus "
                                         f"sign applies after the number is read)")
        kind = INT if INT_MIN <= value <= INT_MAX else LONG
        return _at(Literal(value, kind), meta.start_pos)

    def floating(self, meta, token):
        value = float(token)
        if value > _DOUBLE_MAX:
            raise _Fault(meta.start_pos, f"{token} is greater than the largest double {_DOUBLE_MAX!r}")
        if value < _DOUBLE_MIN:
            # RocketMQ refuses any decimal literal below Double.MIN_VALUE, zero included.
            raise _Fault(meta.start_pos, f"{token} is less than the smallest positive double {_DOUBLE_MIN!r}")
        return _at(Literal(value, DOUBLE), meta.start_pos)

    def true(self, meta):
        return _at(Literal(True, "bool"), meta.start_pos)

    def false(self, meta):
        return _at(Literal(False, "bool"), meta.start_pos)

    def null(self, meta):
        return _at(Literal(None, "null"), meta.start_pos)

    def prop(self, meta, token):
        return _at(Property(str(token)), meta.start_pos)

    # ---- unary
    def plus(self, meta, operand):
        return operand

    def minus(self, meta, operand):
        if isinstance(operand, Literal) and isinstance(operand.value, (int, float)) and operand.kind in NUMERIC_KINDS:
            value = -operand.value
            if operand.kind == LONG and value > LONG_MAX:
                value = -value  # Java: -Long.MIN_VALUE overflows back to itself
            # Folded, but still a unary minus expression to RocketMQ's build-time checks, not a constant.
            return _negated(_at(Literal(value, operand.kind), meta.start_pos))
        return _at(Negate(operand), meta.start_pos)

    def not_(self, meta, operand):
        return _at(Not(_require_condition(operand, "the operand of NOT")), meta.start_pos)

    # ---- comparisons
    def _ordering(self, meta, op, left, right):
        _check_orderable(left, op)
        _check_orderable(right, op)
        return _at(Comparison(op, left, right), meta.start_pos)

    def gt(self, meta, left, right):
        return self._ordering(meta, ">", left, right)

    def ge(self, meta, left, right):
        return self._ordering(meta, ">=", left, right)

    def lt(self, meta, left, right):
        return self._ordering(meta, "<", left, right)

    def le(self, meta, left, right):
        return self._ordering(meta, "<=", left, right)

    def _equality(self, meta, op, left, right):
        _check_equatable(left, op)
        _check_equatable(right, op)
        # ComparisonExpression.checkEqualOperandCompatability: a TRUE/FALSE constant on the left cannot be
        # compared with a constant of another type on the right (`1 = TRUE` is accepted).
        if _is_constant(left) and _is_constant(right) and left.kind == "bool" and right.kind != "bool":
            raise _Fault(_pos(left), f"{left} cannot be compared with {right}")
        return _at(Comparison(op, left, right), meta.start_pos)

    def eq(self, meta, left, right):
        return self._equality(meta, "=", left, right)

    def ne(self, meta, left, right):
        return self._equality(meta, "<>", left, right)

    def is_null(self, meta, operand):
        return _at(IsNull(operand), meta.start_pos)

    def is_not_null(self, meta, operand):
        return _at(IsNull(operand, negated=True), meta.start_pos)

    def _between(self, meta, value, low, high, negated):
        for node in (value, low, high):
            _check_orderable(node, "BETWEEN")
        # RocketMQ refuses reversed bounds only in a plain BETWEEN of two numeric constants; a negative bound is
        # a unary minus expression, not a constant, and NOT BETWEEN is not checked: those evaluate as written.
        if (
            not negated
            and _is_constant(low)
            and _is_constant(high)
            and isinstance(low.value, (int, float))  # both numeric: checked above
            and isinstance(high.value, (int, float))
            and low.value > high.value
        ):
            raise _Fault(_pos(low), f"BETWEEN bounds are in reverse order: {low} is greater than {high}")
        return _at(Between(value, low, high, negated), meta.start_pos)

    def between(self, meta, value, low, high):
        return self._between(meta, value, low, high, False)

    def not_between(self, meta, value, low, high):
        return self._between(meta, value, low, high, True)

    def string_list(self, meta, *items):
        return [item.value for item in items]

    def _in(self, meta, left, values, negated):
        if not isinstance(left, Property):
            raise _Fault(_pos(left), f"IN needs a property on its left, got {left}")
        return _at(In(left, tuple(values), negated), meta.start_pos)

    def in_(self, meta, left, values):
        return self._in(meta, left, values, False)

    def not_in(self, meta, left, values):
        return self._in(meta, left, values, True)

    def _string_match(self, meta, left, op, search, negated):
        return _at(StringMatch(str(op).upper(), left, search.value, negated), meta.start_pos)

    def string_match(self, meta, left, op, search):
        return self._string_match(meta, left, op, search, False)

    def not_string_match(self, meta, left, op, search):
        return self._string_match(meta, left, op, search, True)

    # ---- logic
    def and_(self, meta, left, right):
        return _at(
            And(_require_condition(left, "the left side of AND"), _require_condition(right, "the right side of AND")),
            meta.start_pos,
        )

    def or_(self, meta, left, right):
        return _at(
            Or(_require_condition(left, "the left side of OR"), _require_condition(right, "the right side of OR")),
            meta.start_pos,
        )


def _negated(node: Expression) -> Expression:
    object.__setattr__(node, "_from_minus", True)
    return node


def _is_constant(node) -> bool:
    """A constant to RocketMQ's build-time checks: a literal as written, not one folded from a unary minus."""
    return isinstance(node, Literal) and not getattr(node, "_from_minus", False)


def _describe_token(token: Token) -> str:
    if token.type == "$END":
        return "the end of the selector"
    return repr(str(token))


def parse_sql92(selector: str) -> Expression:
    """Parse and validate a SQL92 selector; FilterParseError if RocketMQ
    would refuse it (or, unlike RocketMQ, if input is left over)."""
    if not isinstance(selector, str):
        raise TypeError(f"a SQL92 selector must be a str, got {type(selector).__name__}")
    if not selector.strip():
        raise FilterParseError(selector, 0, "the SQL92 selector is empty")
    try:
        tree = _parser().parse(selector)
    except UnexpectedCharacters as exc:
        pos = exc.pos_in_stream or 0
        ch = selector[pos] if pos < len(selector) else ""
        if ch == '"':
            reason = "double quotes do not delimit strings; use single quotes ('text', with '' for a quote)"
        elif selector.startswith("/*", pos):
            reason = "unterminated /* comment"
        elif ch == "'":
            reason = "unterminated string literal"
        else:
            reason = f"unexpected character {ch!r}"
        raise FilterParseError(selector, pos, reason) from None
    except UnexpectedEOF:
        raise FilterParseError(selector, len(selector), "the selector ends too early") from None
    except UnexpectedToken as exc:
        token = exc.token
        pos = len(selector) if token.type == "$END" else token.start_pos
        if token.type == "$END":
            reason = "the selector ends too early"
        elif token.type in _KEYWORDS and "IDENTIFIER" in (exc.accepts or ()):
            reason = f"{str(token)!r} is a keyword; keywords are never property names"
        elif str(token) == "-" and selector.startswith("--", pos):
            reason = ("a -- comment runs to a line end, which must follow it (without one, -- is two minus signs, "
                      "and trailing input is refused)")
        elif str(token).upper() == "LIKE":
            reason = "LIKE is not part of RocketMQ's SQL92; use CONTAINS, STARTSWITH or ENDSWITH"
        elif exc.accepts and set(exc.accepts) <= {"STRING"}:
            reason = f"expected a string literal in single quotes, got {_describe_token(token)}"
        elif exc.state is not None and "$END" in exc.accepts:
            reason = f"unexpected {_describe_token(token)} after a complete expression (trailing input is refused)"
        else:
            reason = f"unexpected {_describe_token(token)}"
        raise FilterParseError(selector, pos, reason) from None
    except UnexpectedInput as exc:  # pragma: no cover - other lark input errors
        raise FilterParseError(selector, getattr(exc, "pos_in_stream", 0) or 0, str(exc)) from None
    try:
        expr = _TreeBuilder().transform(tree)
        return _require_condition(expr, "a selector")
    except VisitError as exc:
        fault = exc.orig_exc
        if isinstance(fault, _Fault):
            raise FilterParseError(selector, fault.position, fault.reason) from None
        raise
    except _Fault as fault:
        raise FilterParseError(selector, fault.position, fault.reason) from None
