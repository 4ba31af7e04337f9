"""tagsCode: Java's String.hashCode() of the TAGS text."""

import numpy as np
import pytest

from filters import tags_hash_code
from store.tag_hash import tags_hash_codes


@pytest.mark.parametrize(
    "tag, code",
    [
        ("Aa", 2112),
        ("BB", 2112),
        ("TagA", 2598919),
        ("hello", 99162322),
        ("polygenelubricants", -(2**31)),  # wraps to Integer.MIN_VALUE
        ("\U0001f600", 0xD83D * 31 + 0xDE00),  # beyond the BMP: its two surrogates
        ("é", 233),
        ("", 0),
        (None, 0),
    ],
)
def test_java_string_hash_code(tag, code):
    assert tags_hash_code(tag) == code


def test_many_at_once():
    tags = ["TagA", None, "BB"]
    codes = tags_hash_codes(tags)
    assert codes.dtype == np.int64
    assert codes.tolist() == [2598919, 0, 2112]
