"""Java's rules for turning a property's text into a number, as RocketMQ's
evaluator does through Integer.valueOf / Long.valueOf / Double.valueOf.

Every function raises ValueError (naming the text) where Java throws
NumberFormatException.
"""

from __future__ import annotations

import math
import re
import unicodedata

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1

_RANGES = {32: (INT_MIN, INT_MAX), 64: (LONG_MIN, LONG_MAX)}


def java_digit(ch: str) -> int:
    """Character.digit(ch, 10) for one UTF-16 code unit: the value of a decimal
    digit of any script, -1 otherwise.  Characters beyond the BMP are two
    surrogate code units in Java, neither of which is a digit."""
    if ord(ch) > 0xFFFF:
        return -1
    if "0" <= ch <= "9":
        return ord(ch) - 48
    return unicodedata.decimal(ch, -1)


def java_parse_integer(text: str, bits: int = 32) -> int:
    """Integer.parseInt (bits=32) / Long.parseLong (bits=64), radix 10."""
    low, high = _RANGES[bits]
    digits = text
    negative = False
    if digits[:1] in ("+", "-"):
        negative = digits[0] == "-"
        digits = digits[1:]
    if not digits:
        raise ValueError(f"not a Java {'int' if bits == 32 else 'long'}: {text!r}")
    value = 0
    for ch in digits:
        d = java_digit(ch)
        if d < 0:
            raise ValueError(f"not a Java {'int' if bits == 32 else 'long'}: {text!r}")
        value = value * 10 + d
    if negative:
        value = -value
    if not low <= value <= high:
        raise ValueError(f"out of Java {'int' if bits == 32 else 'long'} range: {text!r}")
    return value


# Java's FloatingDecimal grammar, ASCII digits only (Java's \p{Digit} there is ASCII).
_DECIMAL = re.compile(
    r"([+-]?)(?:(NaN)|(Infinity)|((?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)[fFdD]?)"
)
_HEX = re.compile(
    r"([+-]?)0[xX]((?:[0-9a-fA-F]+\.?)|(?:[0-9a-fA-F]*\.[0-9a-fA-F]+))[pP]([+-]?[0-9]+)[fFdD]?"
)


def _java_trim(text: str) -> str:
    # String.trim(): strips every char <= U+0020 at both ends, and nothing else.
    start, end = 0, len(text)
    while start < end and text[start] <= " ":
        start += 1
    while end > start and text[end - 1] <= " ":
        end -= 1
    return text[start:end]


def java_double_value_of(text: str) -> float:
    """Double.valueOf(text)."""
    s = _java_trim(text)
    m = _DECIMAL.fullmatch(s)
    if m:
        sign, nan, inf, number = m.groups()
        if nan:
            return float("nan")
        if inf:
            return float("-inf") if sign == "-" else float("inf")
        # Python's float() is correctly rounded like Java's; overflow gives inf in both.
        return float(sign + number)
    m = _HEX.fullmatch(s)
    if m:
        sign, mantissa, exponent = m.groups()
        try:
            return float.fromhex(f"{sign}0x{mantissa}p{exponent}")
        except OverflowError:
            return float("-inf") if sign == "-" else float("inf")
    raise ValueError(f"not a Java double: {text!r}")


def java_boolean_value_of(text: str) -> bool:
    """Boolean.valueOf(text): true only for "true" in any case."""
    return text.lower() == "true" if len(text) == 4 else False


def java_double_compare(a: float, b: float) -> int:
    """Double.compare: NaN is above everything and equal to itself; -0.0 < 0.0."""
    if a != a:
        return 0 if b != b else 1
    if b != b:
        return -1
    if a < b:
        return -1
    if a > b:
        return 1
    if a == 0.0:
        # Equal zeros: order by sign bit.
        return int(math.copysign(1.0, b) < 0) - int(math.copysign(1.0, a) < 0)
    return 0
