"""numpy arrays as Arrow arrays over the same memory, built from their buffers.

pa.array(ndarray) and pa.scalar(...) import pandas on their first call when it is installed (pyarrow checks for
pandas objects), which costs 0.5-1.3 s in each fresh process: a Spark Python worker paid it on its first read.
The read path builds its columns here instead, and never imports pandas."""
from __future__ import annotations

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


def repeated_string(text: str, n: int) -> pa.Array:
    """n copies of one string."""
    data = text.encode("utf-8")
    offsets = np.arange(n + 1, dtype=np.int32) * len(data)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data * n)])


def empty_batch(schema: pa.Schema) -> pa.RecordBatch:
    """A batch of no rows (RecordBatch.from_pylist([]) imports pandas)."""
    return pa.RecordBatch.from_arrays([pa.nulls(0, f.type) for f in schema], schema=schema)


def strings(texts: list[str]) -> pa.Array:
    """A few Python strings (distinct values, not rows) as a string array."""
    data = [t.encode("utf-8") for t in texts]
    offsets = np.zeros(len(data) + 1, dtype=np.int32)
    np.cumsum([len(d) for d in data], out=offsets[1:])
    return pa.Array.from_buffers(pa.string(), len(data), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(data))])


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
