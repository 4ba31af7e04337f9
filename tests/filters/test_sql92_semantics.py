"""RocketMQ's SQL92 evaluation semantics, one table row per behaviour.
Each case is decided by the per-record and the vectorised evaluator (they
must agree) and compared with what a RocketMQ broker delivers."""

import pytest

DOC_EXAMPLE = "(TAGS is not null and TAGS in ('TagA', 'TagB')) and (a is not null and a between 0 and 3)"

CASES = [
    # --- the documentation's selectors, verbatim
    (DOC_EXAMPLE, {"TAGS": "TagA", "a": "2"}, True),
    (DOC_EXAMPLE, {"TAGS": "TagB", "a": "0"}, True),
    (DOC_EXAMPLE, {"TAGS": "TagB", "a": "3"}, True),
    (DOC_EXAMPLE, {"TAGS": "TagC", "a": "2"}, False),
    (DOC_EXAMPLE, {"TAGS": "TagA", "a": "4"}, False),
    (DOC_EXAMPLE, {"TAGS": "TagA"}, False),
    (DOC_EXAMPLE, {"a": "1"}, False),
    (DOC_EXAMPLE, {"TAGS": "TagA", "a": "abc"}, False),
    ("TAGS in ('TagA','TagB')", {"TAGS": "TagB"}, True),
    ("TAGS in ('TagA','TagB')", {"TAGS": "TagC"}, False),
    ("a between 0 and 3", {"a": "3"}, True),
    ("a between 0 and 3", {"a": "-1"}, False),
    # --- TAGS is just the whole tag text
    ("TAGS = 'TagA'", {"TAGS": "TagA||TagB"}, False),
    ("TAGS = 'TagA'", {"TAGS": "TagA"}, True),
    ("TAGS = 'taga'", {"TAGS": "TagA"}, False),
    # --- keywords case-insensitive, identifiers case-sensitive
    ("a Is NoT nUlL AnD a BeTwEeN 1 aNd 2", {"a": "1"}, True),
    ("tags = 'TagA'", {"TAGS": "TagA"}, False),
    ("TAGS = 'TagA'", {"tags": "TagA"}, False),
    ("$x_1 = 'v'", {"$x_1": "v"}, True),
    # --- string literals
    ("a = 'it''s'", {"a": "it's"}, True),
    ("a = ''", {"a": ""}, True),
    ("a = 'A'", {"a": "a"}, False),
    # --- comments
    ("a = 1 /* the id */ -- trailing\n", {"a": "1"}, True),
    ("/* lead */ a /* mid */ = /* x */ 1", {"a": "1"}, True),
    # --- integer conversion: Java Integer/Long.valueOf
    ("a = 5", {"a": "5"}, True),
    ("a = 5", {"a": "+5"}, True),
    ("a = 5", {"a": "005"}, True),
    ("a = 5", {"a": " 5"}, False),
    ("a = 5", {"a": "5 "}, False),
    ("a = 5", {"a": "5.0"}, False),
    ("a = 5", {"a": "5_0"}, False),
    ("a = 5", {"a": "0x5"}, False),
    ("a = 3", {"a": "\u0663"}, True),  # ARABIC-INDIC DIGIT THREE
    ("a = 5", {"a": "\uff15"}, True),  # FULLWIDTH DIGIT FIVE
    ("a = 1", {"a": "\U0001d7cf"}, False),  # MATHEMATICAL BOLD DIGIT ONE: a surrogate pair in Java
    ("a <> 5", {"a": "2147483648"}, False),  # outside int: error, not delivered
    ("a <> 5", {"a": "x"}, False),
    ("a < 5000000000", {"a": "2147483648"}, True),  # the literal needs a long
    ("a > -9223372036854775807", {"a": "-9223372036854775806"}, True),
    ("a = 5L", {"a": "5"}, True),
    ("a > 0", {"a": "-0"}, False),
    # --- double conversion: Java Double.valueOf
    ("a = 5.5", {"a": "5.5"}, True),
    ("a = 5.5", {"a": " 5.5 "}, True),
    ("a = 5.5", {"a": "5.5d"}, True),
    ("a = 5.5", {"a": "5.5F"}, True),
    ("a = 5.5", {"a": "0x1.6p2"}, True),
    ("a = 5.5", {"a": "55e-1"}, True),
    ("a = 5.", {"a": "5"}, True),
    ("a = .5", {"a": ".5"}, True),
    ("a > 1e300", {"a": "Infinity"}, True),
    ("a < -1e300", {"a": "-Infinity"}, True),
    ("a > 1e300", {"a": "NaN"}, True),  # NaN is above everything
    ("a = 1.5", {"a": "nan"}, False),
    ("a = 1.5", {"a": "inf"}, False),
    ("a = 1.5", {"a": "1,5"}, False),
    ("a = 1.5", {"a": "\u0661.5"}, False),  # no other scripts' digits in doubles
    ("a <> 1.5", {"a": "abc"}, False),  # error, not delivered
    ("a >= 5", {"a": "5.5"}, False),  # int literal: "5.5" is not an int
    ("a >= 5.0e0", {"a": "5"}, True),
    # --- BETWEEN: each bound by its own literal's type, short-circuit left to right
    ("a between 1 and 2.5", {"a": "2.5"}, False),  # "2.5" is not an int for the lower bound
    ("a between 1.0 and 3", {"a": "2"}, True),
    ("a not between 1 and 3", {"a": "0"}, True),
    ("a not between 1 and 3", {"a": "2"}, False),
    ("a not between 1 and 3", {}, False),
    ("a between -5 and -1", {"a": "-3"}, True),
    # --- two properties
    ("a = b", {"a": "x", "b": "x"}, True),
    ("a = b", {"a": "1", "b": "01"}, False),  # strings compared as strings
    ("a < b", {"a": "9", "b": "10"}, True),  # ordering converts both to doubles
    ("a < b", {"a": "x", "b": "10"}, False),
    ("a >= b", {"a": "-0.0", "b": "0"}, False),  # Double.compareTo: -0.0 < 0.0
    ("a = b", {}, True),  # both missing
    ("a = b", {"a": "1"}, False),
    ("a <> b", {"a": "1"}, True),
    ("a <> b", {"b": "1"}, False),  # left missing: NULL
    # --- booleans
    ("a = TRUE", {"a": "true"}, True),
    ("a = TRUE", {"a": "TRUE"}, True),
    ("a = TRUE", {"a": "yes"}, False),
    ("a = FALSE", {"a": "yes"}, True),
    ("a = FALSE", {"a": "false"}, True),
    ("a <> TRUE", {"a": "1"}, True),
    ("a = TRUE", {}, False),
    ("TRUE", {}, True),
    ("FALSE", {}, False),
    ("NULL", {}, False),
    ("(a > 1) = TRUE", {"a": "2"}, True),
    ("(a > 1) = 1", {"a": "2"}, False),  # Boolean vs number: never equal
    ("(a > 1) <> 1", {"a": "2"}, True),
    # --- a bare property as a condition: FALSE when present, NULL when missing
    ("a", {"a": "true"}, False),
    ("NOT a", {"a": "true"}, True),
    ("NOT a", {}, False),
    ("a OR b = '1'", {"b": "1"}, True),
    ("NOT a = TRUE", {"a": "x"}, True),  # (NOT a) = TRUE, where NOT a is TRUE
    ("NOT a = FALSE", {"a": "x"}, False),
    ("NOT a = TRUE", {}, False),  # NOT of NULL is NULL
    # --- NULL: three-valued logic
    ("a = 'x'", {}, False),
    ("NOT (a = 'x')", {}, False),
    ("a <> 'x'", {}, False),
    ("'x' = a", {}, False),
    ("'x' <> a", {}, True),  # constant on the left vs missing: FALSE, so <> is TRUE
    ("NOT ('x' = a)", {}, True),
    ("a > 1 OR b = 'y'", {"b": "y"}, True),
    ("a > 1 OR b = 'y'", {"b": "n"}, False),
    ("NOT (a > 1 OR b = 'y')", {"b": "n"}, False),  # NULL OR FALSE is NULL
    ("NOT (a > 1 AND b = 'y')", {"b": "n"}, True),  # NULL AND FALSE is FALSE
    ("NOT (a > 1 AND b = 'y')", {"b": "y"}, False),  # NULL AND TRUE is NULL
    ("a IS NULL", {}, True),
    ("a IS NULL", {"a": ""}, False),  # empty is present
    ("a IS NOT NULL", {"a": ""}, True),
    ("(a > 1) IS NULL", {}, True),
    ("(a > 1) IS NULL", {"a": "2"}, False),
    ("'x' IS NULL", {}, False),
    # --- errors are not delivered; short-circuit skips the right side
    ("a > 1", {"a": "x"}, False),
    ("NOT (a > 1)", {"a": "x"}, False),
    ("(a > 1) IS NULL", {"a": "x"}, False),
    ("b = 'y' OR a > 1", {"a": "x", "b": "y"}, True),  # OR decided on the left
    ("a > 1 OR b = 'y'", {"a": "x", "b": "y"}, False),  # error on the left
    ("b = 'n' AND a > 1", {"a": "x", "b": "y"}, False),
    ("NOT (b = 'n' AND a > 1)", {"a": "x", "b": "y"}, True),  # AND decided on the left
    ("NOT (b = 'y' AND a > 1)", {"a": "x", "b": "y"}, False),
    ("a > 1 AND b = 'y'", {"b": "y"}, False),
    ("NOT (z > 1 AND a > 1)", {"a": "x"}, False),  # NULL then error: error
    # --- IN
    ("a IN ('x', 'y')", {"a": "y"}, True),
    ("a IN ('x', 'y')", {"a": "z"}, False),
    ("a NOT IN ('x', 'y')", {"a": "z"}, True),
    ("a NOT IN ('x', 'y')", {}, False),
    ("NOT (a IN ('x'))", {}, False),
    ("a IN ('1')", {"a": "01"}, False),
    # --- CONTAINS / STARTSWITH / ENDSWITH
    ("a CONTAINS 'ell'", {"a": "hello"}, True),
    ("a CONTAINS 'ELL'", {"a": "hello"}, False),
    ("a STARTSWITH 'he'", {"a": "hello"}, True),
    ("a ENDSWITH 'lo'", {"a": "hello"}, True),
    ("a ENDSWITH 'he'", {"a": "hello"}, False),
    ("a NOT CONTAINS 'x'", {"a": "hello"}, True),
    ("a NOT CONTAINS 'x'", {}, False),  # missing: FALSE even negated
    ("a CONTAINS 'x'", {}, False),
    ("NOT (a CONTAINS 'x')", {}, True),  # FALSE, never NULL
    ("a CONTAINS ''", {"a": "hello"}, False),  # empty search string: FALSE
    ("a NOT CONTAINS ''", {"a": "hello"}, False),
    ("a STARTSWITH ''", {"a": ""}, False),
    ("a NOT ENDSWITH ''", {}, False),
    ("'hello' CONTAINS 'ell'", {}, True),
    ("5 CONTAINS '5'", {}, False),  # not a string
    ("a startswith '%'", {"a": "%x"}, True),  # no LIKE patterns
    ("a contains '.*'", {"a": "abc"}, False),
    # --- unary minus and plus
    ("a = -5", {"a": "-5"}, True),
    ("a = +5", {"a": "5"}, True),
    ("-a = -5", {"a": "5"}, False),  # minus on a property: NULL
    ("-a IS NULL", {"a": "5"}, True),
    ("a = - -5", {"a": "5"}, True),
    ("a > -1.5", {"a": "-1"}, True),
    # --- mixed numeric literals
    ("1 = 1.0", {}, True),
    ("5000000000 > 1", {}, True),
    ("2.5 > 2", {}, True),
    # --- precedence: NOT binds tighter than =, comparisons tighter than =
    ("a = 1 = TRUE", {"a": "1"}, True),
    ("a = 1 OR b = 2 AND c = 3", {"a": "1"}, True),
    ("(a = 1 OR b = 2) AND c = 3", {"a": "1"}, False),
    ("a > 1 = TRUE", {"a": "2"}, True),
]


@pytest.mark.parametrize("selector, props, expected", CASES, ids=[f"{i}:{c[0]}" for i, c in enumerate(CASES)])
def test_rocketmq_semantics(decide, selector, props, expected):
    assert decide(selector, props) is expected
