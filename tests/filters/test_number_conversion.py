"""Java's number rules, per value and vectorised (the vectorised path takes
shortcuts through Arrow's casts, which must not change any decision)."""

import math

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from filters.arrow_evaluator import _convert
from filters.comparison_rules import scalar_converter
from filters.java_numbers import java_double_compare, java_double_value_of, java_parse_integer


@pytest.mark.parametrize(
    "text, bits, value",
    [
        ("0", 32, 0),
        ("-0", 32, 0),
        ("+7", 32, 7),
        ("007", 32, 7),
        ("2147483647", 32, 2**31 - 1),
        ("-2147483648", 32, -(2**31)),
        ("9223372036854775807", 64, 2**63 - 1),
        ("-9223372036854775808", 64, -(2**63)),
        ("\u0661\u0662", 32, 12),  # Arabic-Indic digits
        ("\u096b", 32, 5),  # Devanagari five
        ("\uff11\uff10", 32, 10),  # fullwidth digits
    ],
)
def test_java_integers(text, bits, value):
    assert java_parse_integer(text, bits) == value


@pytest.mark.parametrize(
    "text, bits",
    [("", 32), ("-", 32), ("+", 32), ("2147483648", 32), ("-2147483649", 32), ("9223372036854775808", 64),
     (" 1", 32), ("1 ", 32), ("1.0", 32), ("1e3", 32), ("0x10", 32), ("1_000", 32), ("--1", 32), ("+-1", 32),
     ("\U0001d7cf", 32), ("\u00b2", 32), ("\u2460", 32), ("½", 32)],
)
def test_java_integer_refusals(text, bits):
    with pytest.raises(ValueError, match="Java"):
        java_parse_integer(text, bits)


@pytest.mark.parametrize(
    "text, value",
    [("1", 1.0), ("  1.5\t", 1.5), ("1.5d", 1.5), ("1.5F", 1.5), ("+.5", 0.5), ("5.", 5.0), ("-1e3", -1000.0),
     ("1E+2", 100.0), ("0x1p4", 16.0), ("0X1.8P1", 3.0), ("0x.8p1d", 1.0), ("Infinity", math.inf),
     ("-Infinity", -math.inf), ("1e400", math.inf), ("1e-400", 0.0), ("\x00 7 \x1f", 7.0)],
)
def test_java_doubles(text, value):
    assert java_double_value_of(text) == value


@pytest.mark.parametrize(
    "text",
    ["", ".", "e5", "1e", "1e+", "nan", "inf", "INFINITY", "NaNd", "Infinityf", "0x1", "0x1.8", "1,5", "1_0",
     "\u0661", "1.5dd", "\u00a01", "++1", "0x"],
)
def test_java_double_refusals(text):
    with pytest.raises(ValueError, match="not a Java double"):
        java_double_value_of(text)


def test_nan_parses():
    assert math.isnan(java_double_value_of("NaN")) and math.isnan(java_double_value_of("-NaN"))


def test_double_compare_is_javas():
    nan = math.nan
    assert java_double_compare(nan, nan) == 0
    assert java_double_compare(nan, math.inf) == 1
    assert java_double_compare(-0.0, 0.0) == -1
    assert java_double_compare(0.0, -0.0) == 1
    assert java_double_compare(1.0, 2.0) == -1


TEXT = st.text(alphabet="0123456789.+-eExXpPdDfFnaNIityINF \u0663\uff15", max_size=8)


@settings(max_examples=300, deadline=None)
@given(texts=st.lists(st.one_of(st.none(), TEXT), min_size=1, max_size=20),
       kind=st.sampled_from(["int", "long", "double"]))
def test_vectorised_conversion_matches_java(texts, kind):
    col = pa.array(texts, pa.string())
    null = np.array([t is None for t in texts])
    values, ok = _convert(col, null, kind)
    convert = scalar_converter(kind)
    for i, text in enumerate(texts):
        if text is None:
            assert not ok[i]
            continue
        try:
            expected = convert(text)
        except ValueError:
            assert not ok[i], f"{text!r} should be refused for {kind}"
            continue
        assert ok[i], f"{text!r} should convert for {kind}"
        if kind == "double" and math.isnan(expected):
            assert math.isnan(values[i])
        else:
            assert values[i] == expected, text


def test_vectorised_conversion_keeps_int_range():
    col = pa.array(["2147483647", "2147483648", "-2147483648", "-2147483649", "99999999999999999999"])
    values, ok = _convert(col, np.zeros(5, bool), "int")
    assert ok.tolist() == [True, False, True, False, False]
    values, ok = _convert(col, np.zeros(5, bool), "long")
    assert ok.tolist() == [True, True, True, True, False]
