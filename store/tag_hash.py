"""The consume queue's tagsCode: Java's String.hashCode() of the TAGS text."""

from __future__ import annotations

import functools

import numpy as np


@functools.lru_cache(maxsize=4096)  # an application's few tags, hashed per single put
def tags_hash_code(tag: str | None) -> int:
    """String.hashCode(): h = 31*h + unit over the UTF-16 code units (a
    character beyond the BMP counts as its two surrogates), wrapped to signed
    32 bits; 0 for no tag or an empty tag.  Returned as a Python int (the
    consume queue stores it sign-extended in an int64)."""
    if not tag:
        return 0
    data = tag.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - 0x1_0000_0000 if h & 0x8000_0000 else h


def tags_hash_codes(tags: "list[str | None]") -> np.ndarray:
    """tags_hash_code over many tags, as an int64 array."""
    return np.fromiter((tags_hash_code(t) for t in tags), dtype=np.int64, count=len(tags))
