"""Selectors accepted and refused exactly as RocketMQ's SelectorParser does, and decided as its expressions
decide, through every evaluation path: the per-record one, the vectorised one over a properties map column,
and the one over the stored properties texts. Each test names the rule of RocketMQ's grammar it pins
(`filter` module: SelectorParser.jj, ComparisonExpression, UnaryExpression)."""
from __future__ import annotations

import pyarrow as pa
import pytest

from filters import FilterParseError, MessageFilter
from rmq_common.message_properties import properties_to_map

MESSAGES = [{"a": "1"}, {"a": "3"}, {"a": "-3"}, {"a": "true"}, {"a": "x"}, {}, {"b": "1"}]
TEXTS = ["".join(f"{k}\x01{v}\x02" for k, v in m.items()) for m in MESSAGES]


def delivered(selector: str) -> list[bool]:
    """What the filter delivers of MESSAGES, the same through the three paths (asserted)."""
    f = MessageFilter.by_sql(selector)
    per_record = [f.is_matched_by_commit_log(m) for m in MESSAGES]
    batch = pa.record_batch([properties_to_map(pa.array(TEXTS))], names=["properties"])
    assert f.commit_log_mask(batch).to_pylist() == per_record, selector
    assert f.properties_text_mask(pa.array(TEXTS)).to_pylist() == per_record, selector
    return per_record


def refused(selector: str) -> str:
    with pytest.raises(FilterParseError) as e:
        MessageFilter.by_sql(selector)
    return str(e.value)


@pytest.mark.parametrize("selector", ["AND = 1", "a = AND", "is = 1", "a = 1 OR OR", "a AND AND b IS NULL",
                                      "between = 1", "In = 1", "contains = 1", "NOT = 1", "a = null OR true = 1",
                                      "endswith IS NULL"])
def test_keywords_are_never_property_names(selector):
    """SelectorParser.jj: the keyword tokens (NOT AND OR BETWEEN IN TRUE FALSE NULL IS CONTAINS STARTSWITH
    ENDSWITH, case-insensitive) are matched before ID, so they never name a property."""
    refused(selector)


def test_words_that_start_with_a_keyword_are_property_names():
    """SelectorParser.jj: ID is longest-match, so `andy`, `nota`, `isx` are identifiers."""
    assert delivered("andy IS NULL AND nota IS NULL AND isx IS NULL AND containsx IS NULL") == [True] * 7
    assert "'AND' is a keyword" in refused("AND = 1")


def test_a_boolean_constant_on_the_left_of_another_constant_is_refused():
    """ComparisonExpression.checkEqualOperandCompatability: a TRUE/FALSE constant on the left cannot be compared
    with a constant of another type; the other order, and TRUE = FALSE, are accepted."""
    for selector in ("TRUE = 1", "FALSE <> 'x'", "TRUE = 1.5"):
        assert "cannot be compared" in refused(selector)
    assert delivered("1 = TRUE") == [False] * 7
    assert delivered("TRUE <> FALSE") == [True] * 7


def test_long_min_value_written_with_a_minus_overflows():
    """SelectorParser.jj: the literal is read (Long.valueOf) before UnaryExpression.createNegate applies."""
    assert "64-bit range" in refused("a = -9223372036854775808")
    assert delivered("a > -9223372036854775807") == [True, True, True, False, False, False, False]


def test_double_minus_is_minus_minus():
    """SelectorParser.jj: LINE_COMMENT is `--` up to and including a line end; without one, `--` is two
    unary minus signs."""
    assert delivered("a = --1") == delivered("a = 1") == [True] + [False] * 6
    assert delivered("a = ---3") == [False, False, True, False, False, False, False]
    assert delivered("a = 1 -- the id\n") == delivered("a = 1")
    assert delivered("a = 1 -- the id\r\nOR a = 3") == [True, True] + [False] * 5
    assert "line end" in refused("a = 1 -- the id")  # RocketMQ ignores the rest; we refuse trailing input


def test_reversed_between_bounds_are_refused_only_for_two_plain_constants():
    """ComparisonExpression.createBetween: reversed bounds are refused when both are numeric constants in a plain
    BETWEEN; a negative bound is a UnaryExpression, and NOT BETWEEN is not checked; both evaluate as written."""
    assert "reverse order" in refused("a BETWEEN 10 AND 1")
    assert "reverse order" in refused("a BETWEEN 2.5 AND 1.5")
    assert delivered("a BETWEEN -1 AND -5") == [False] * 7
    assert delivered("a BETWEEN 2147483647 AND -15") == [False] * 7
    # numeric a: always true; a non-number or a missing a: not delivered
    assert delivered("a NOT BETWEEN 10 AND 1") == [True, True, True, False, False, False, False]


def test_a_boolean_constant_left_of_a_property_never_matches_a_present_property():
    """ComparisonExpression's equality casts a Boolean left value to String against a property's text and
    throws: the message is not delivered. Kept on purpose, so a Spark job delivers what a broker delivers."""
    assert delivered("TRUE = a") == [False] * 7
    assert delivered("FALSE = a") == [False] * 7
    assert delivered("TRUE <> a") == [False] * 5 + [True, True]  # NOT of the equality, FALSE when a is missing
    # a missing property: the equality is FALSE, so its negation delivers
    assert delivered("NOT (TRUE = a)") == [False, False, False, False, False, True, True]
    assert delivered("a = TRUE") == [False, False, False, True, False, False, False]  # the other order converts


def test_trailing_input_is_the_one_deviation_and_says_what_was_left():
    """RocketMQ ignores input left over after a complete selector; this filter refuses it."""
    assert "unexpected 'b' after a complete expression" in refused("a = 1 b")
    assert "unexpected '0' after a complete expression" in refused("a > 007")
    assert "LIKE is not part of RocketMQ's SQL92" in refused("a LIKE 'x%'")
