"""Selectors RocketMQ refuses are refused when the filter is built, with the
position of the fault and a caret under it."""

import pytest

from filters import FilterParseError, MessageFilter

# (selector, position of the fault, words the message must contain)
BAD = [
    ("NOT a > 1", 0, "cannot be compared"),
    ("a = 1 b", 6, "trailing input"),
    ("a = 1 AND b = 2 c", 16, "trailing input"),
    ('a = "x"', 4, "single quotes"),
    ("1", 0, "not boolean"),
    ("'x'", 0, "not boolean"),
    ("a = 1 AND 5", 10, "not boolean"),
    ("NOT 5", 4, "not boolean"),
    ("a > 'x'", 4, "cannot be compared"),
    ("'x' < a", 0, "cannot be compared"),
    ("a > TRUE", 4, "cannot be compared"),
    ("a >= NULL", 5, "cannot be compared"),
    ("(a = 1) > 2", 1, "cannot be compared"),
    ("a BETWEEN 'x' AND 'y'", 10, "cannot be compared"),
    ("a BETWEEN 1 AND FALSE", 16, "cannot be compared"),
    ("a between 3 and 1", 10, "reverse order"),
    ("a between 2.5 and 1.5", 10, "reverse order"),
    ("a = NULL", 4, "IS NULL"),
    ("NULL <> a", 0, "IS NULL"),
    ("5 IN ('a')", 0, "property"),
    ("(a = 1) IN ('a')", 1, "property"),
    ("a IN (1, 2)", 6, "string literal"),
    ("a IN ('x', b)", 11, "string literal"),
    ("a CONTAINS b", 11, "string literal"),
    ("a STARTSWITH 5", 13, "string literal"),
    ("a > 0.0", 4, "smallest positive double"),
    ("a > 0e5", 4, "smallest positive double"),
    ("a > 1e-400", 4, "smallest positive double"),
    ("a > 1e309", 4, "largest double"),
    ("a > 9223372036854775808", 4, "64-bit"),
    ("a > -9223372036854775808", 5, "64-bit"),  # SelectorParser reads the literal before the minus applies
    ("a > 99999999999999999999", 4, "64-bit"),
    ("a >", 3, "ends too early"),
    ("(a = 1", 6, "ends too early"),
    ("a = 'x", 4, "unterminated string"),
    ("a = 1 /* open", 6, "unterminated /* comment"),
    ("", 0, "empty"),
    ("   ", 0, "empty"),
    ("a == 1", 3, "unexpected"),
    ("a = 01", 5, "trailing input"),
    ("a LIKE 'x%'", 2, "use CONTAINS, STARTSWITH or ENDSWITH"),
    ("a = 1\nAND b ! 2", 12, "unexpected character"),
]


@pytest.mark.parametrize("selector, position, words", BAD, ids=[b[0] for b in BAD])
def test_refused_with_position(selector, position, words):
    with pytest.raises(FilterParseError) as info:
        MessageFilter.by_sql(selector)
    err = info.value
    assert isinstance(err, ValueError)
    assert err.position == position, str(err)
    assert words in str(err)
    # The message quotes the faulty line with a caret under the fault.
    lines = str(err).split("\n")
    line_start = selector.rfind("\n", 0, position) + 1
    line_end = selector.find("\n", position)
    quoted = selector[line_start : line_end if line_end >= 0 else len(selector)]
    assert lines[1] == "  " + quoted
    assert lines[2] == "  " + " " * (position - line_start) + "^"


def test_message_names_the_value_at_fault():
    with pytest.raises(FilterParseError, match="'abc' cannot be compared"):
        MessageFilter.by_sql("a > 'abc'")
    with pytest.raises(FilterParseError, match="1e309"):
        MessageFilter.by_sql("a > 1e309")


def test_not_a_string():
    with pytest.raises(TypeError):
        MessageFilter.by_sql(None)


ACCEPTED = [
    "TAGS in ('TagA','TagB')",
    "a between 0 and 3",
    "(TAGS is not null and TAGS in ('TagA', 'TagB')) and (a is not null and a between 0 and 3)",
    "a between 1 and 1",
    "a > 5e-324",
    "a > 1.7976931348623157e308",
    "a > -9223372036854775807",
    "a = 9223372036854775807L",
    "NOT a = 1",
    "NULL",
    "NULL IS NULL",
    "(a)",
    "a <> b AND NOT c",
    "x CONTAINS '' OR y NOT ENDSWITH 'z'",
    "a\tIN\n('x')",
]


@pytest.mark.parametrize("selector", ACCEPTED)
def test_accepted(selector):
    MessageFilter.by_sql(selector)
