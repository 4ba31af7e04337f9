"""BODYCRC (CRC32 & 0x7FFFFFFF) of many bodies at once.

zlib has no batched form and costs ~0.4 us per call on small bodies, which dominated both the append and the
scan paths; store/_body_crc.c computes all spans of a buffer in one call. Without the compiled module (no
compiler at install time) the same values come from zlib, one call per body.
"""
from __future__ import annotations

import logging
import zlib

import numpy as np
import pyarrow as pa

try:
    from . import _body_crc
except ImportError:  # pragma: no cover - depends on the machine that installed us
    _body_crc = None
    logging.getLogger(__name__).warning("store._body_crc is not built; CRC32 falls back to zlib per body")


def crc32_spans(data, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """CRC32 & 0x7FFFFFFF of data[starts[i]:ends[i]] for every i, as int64."""
    n = len(starts)
    starts = np.ascontiguousarray(starts, dtype=np.int64)
    ends = np.ascontiguousarray(ends, dtype=np.int64)
    if _body_crc is not None:
        out = np.empty(n, dtype=np.uint32)
        if n:
            _body_crc.crc32_spans(data, starts, ends, out)
        return out.astype(np.int64) & 0x7FFFFFFF
    mv = memoryview(data).cast("B")
    crc = zlib.crc32
    return np.fromiter((crc(mv[a:b]) for a, b in zip(starts.tolist(), ends.tolist())), dtype=np.int64,
                       count=n) & 0x7FFFFFFF


def body_crcs(bodies: pa.Array) -> np.ndarray:
    """CRC32 & 0x7FFFFFFF of each element of a binary array, as int64."""
    n = len(bodies)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if bodies.type != pa.binary():
        bodies = bodies.cast(pa.binary())
    offs = np.frombuffer(bodies.buffers()[1], dtype=np.int32, count=n + 1, offset=bodies.offset * 4)
    data = bodies.buffers()[2]
    if data is None:
        return np.zeros(n, dtype=np.int64)
    return crc32_spans(data, offs[:-1], offs[1:])
