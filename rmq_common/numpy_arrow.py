"""numpy arrays as Arrow arrays and back, over the same memory, through their buffers.

pa.array(...), pa.scalar(...) and Array.to_numpy() import pandas on their first call when it is installed
(pyarrow checks for pandas objects), which costs 0.5-1.3 s in each fresh process: a Spark Python worker paid it
on its first read or write. The read path, the filters and the sink's task (its column conversion and checks,
the store's staging, the sends to brokers) convert here instead, and never import pandas; so does a compute
function's argument (a Python str or number there goes through pa.scalar)."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa


def from_numpy(a: np.ndarray) -> pa.Array:
    """A 1-d numeric or bool ndarray as an Arrow array without nulls (no copy for numbers)."""
    if not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))
    a = np.ascontiguousarray(a)
    if a.dtype == np.bool_:
        return pa.Array.from_buffers(pa.bool_(), len(a), [None, pa.py_buffer(np.packbits(a, bitorder="little"))])
    return pa.Array.from_buffers(pa.from_numpy_dtype(a.dtype), len(a), [None, pa.py_buffer(a)])


def index_array(index: np.ndarray, missing: np.ndarray) -> pa.Array:
    """An int64 index (for take) null where `missing` is True."""
    valid = np.packbits(~missing, bitorder="little")
    index = np.ascontiguousarray(index, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(index), [pa.py_buffer(valid), pa.py_buffer(index)],
                                 null_count=int(missing.sum()))


_NUMPY_TYPES = {pa.int8(): np.int8, pa.int16(): np.int16, pa.int32(): np.int32, pa.int64(): np.int64,
                pa.uint8(): np.uint8, pa.uint16(): np.uint16, pa.uint32(): np.uint32, pa.uint64(): np.uint64,
                pa.float32(): np.float32, pa.float64(): np.float64}


def values(arr) -> np.ndarray:
    """A numeric Arrow array's values as a read-only numpy view of its buffer (a null's slot holds whatever the
    buffer has there: callers mask nulls themselves)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    dtype = _NUMPY_TYPES.get(arr.type)
    if dtype is None:
        raise TypeError(f"values: not a numeric array: {arr.type}")
    buf = arr.buffers()[1]
    if buf is None:
        return np.zeros(len(arr), dtype=dtype)
    return np.frombuffer(buf, dtype=dtype)[arr.offset:arr.offset + len(arr)]


def repeated_string(text: str, n: int) -> pa.Array:
    """n copies of one string."""
    data = text.encode("utf-8")
    offsets = np.arange(n + 1, dtype=np.int32) * len(data)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data * n)])


def empty_batch(schema: pa.Schema) -> pa.RecordBatch:
    """A batch of no rows (RecordBatch.from_pylist([]) imports pandas)."""
    return pa.RecordBatch.from_arrays([pa.nulls(0, f.type) for f in schema], schema=schema)


def strings(texts: Sequence[str]) -> pa.Array:
    """A few Python strings (distinct values, not rows) as a string array."""
    data = [t.encode("utf-8") for t in texts]
    offsets = np.zeros(len(data) + 1, dtype=np.int32)
    np.cumsum([len(d) for d in data], out=offsets[1:])
    return pa.Array.from_buffers(pa.string(), len(data), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(data))])


def string_scalar(text: str) -> pa.Scalar:
    """A string scalar for a compute function's argument (a Python str there goes through pa.scalar)."""
    return strings([text])[0]


def double_scalar(value: float) -> pa.Scalar:
    """A float64 scalar, as string_scalar."""
    return from_numpy(np.array([value], dtype=np.float64))[0]


def true_where_valid(mask) -> np.ndarray:
    """A boolean Arrow array (or chunked array) as numpy, null as False (a filter's null keeps nothing), by
    unpacking its bits: much faster than to_numpy."""
    if isinstance(mask, pa.ChunkedArray):
        mask = mask.combine_chunks()
    n, skip = len(mask), mask.offset % 8
    if n == 0:
        return np.zeros(0, dtype=bool)

    def bits(buf) -> np.ndarray:
        raw = np.frombuffer(buf, dtype=np.uint8)[mask.offset // 8:]
        return np.unpackbits(raw, count=skip + n, bitorder="little")[skip:].view(bool)
    values = bits(mask.buffers()[1])
    if mask.null_count:
        values = values & bits(mask.buffers()[0])
    return values


def null_mask(arr) -> np.ndarray:
    """Where an Arrow array (or chunked array) of any type is null, as a writable numpy bool array."""
    return true_where_valid(arr.is_null())
