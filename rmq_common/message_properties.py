"""RocketMQ's stored properties text (`key\\x01value\\x02...`) as a dict (one
message) or as an Arrow map column (many), and one property of a map column
as a string column; PropertiesText cuts the few properties a filter reads
straight out of many texts.

Rules, as RocketMQ's MessageDecoder.string2messageProperties: pairs end at
\\x02 (the last may lack it); the key ends at the pair's first \\x01 and the
value is the rest; a pair with no \\x01, an empty key or an empty value is
dropped; a later duplicate key wins.
"""

from __future__ import annotations

from typing import Iterable, Optional, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .numpy_arrow import from_numpy, index_array, string_scalar, true_where_valid
from .numpy_arrow import strings as string_array
from .numpy_arrow import values as numpy_values

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"

MAP_TYPE = pa.map_(pa.string(), pa.string())

# Work on the text in slices of about this many bytes: temporaries stay in
# cache and under malloc's mmap threshold, so they are reused rather than
# faulted in afresh for every batch.
_CHUNK_BYTES = 1 << 20


def parse_properties(text: Optional[str]) -> dict[str, str]:
    """One message's properties text as a dict."""
    out: dict[str, str] = {}
    if not text:
        return out
    for pair in text.split(PROPERTY_SEPARATOR):
        key, sep, value = pair.partition(NAME_VALUE_SEPARATOR)
        if key and value:
            out[key] = value
    return out


def _as_string_array(strings) -> pa.Array:
    if isinstance(strings, pa.ChunkedArray):
        strings = strings.combine_chunks()
    if not isinstance(strings, pa.Array):
        strings = pa.array(strings, type=pa.string())  # a caller's Python values: not the read path
    if pa.types.is_binary(strings.type):
        strings = strings.cast(pa.string())
    elif pa.types.is_large_binary(strings.type):
        strings = strings.cast(pa.large_string())
    if pa.types.is_string_view(strings.type):
        strings = strings.cast(pa.string())
    if not (pa.types.is_string(strings.type) or pa.types.is_large_string(strings.type)):
        raise TypeError(f"properties must be strings, got an array of {strings.type}")
    return strings


def _pair_spans(offsets, starts, ends, valid, data):
    """Byte spans (pair start, its first \\x01, pair end) and row of every
    kept pair in the rows whose text offsets are `offsets` (global positions,
    rows relative to the range)."""
    n = len(offsets) - 1
    lo, hi = int(offsets[0]), int(offsets[-1])
    region = data[lo:hi]
    # Pair ends: every \x02 inside a row, and each row's end (a last pair without \x02).
    seps = np.flatnonzero(region == 2) + lo
    # Row of each \x02 from per-row counts (cheaper than a search per \x02).
    per_row = np.diff(np.searchsorted(seps, offsets, side="left"))
    sep_rows = np.repeat(np.arange(n), per_row)
    if valid is not None:
        keep = valid[sep_rows]
        seps, sep_rows = seps[keep], sep_rows[keep]
    same_row = np.zeros(len(seps), dtype=bool)
    np.equal(sep_rows[1:], sep_rows[:-1], out=same_row[1:])
    after_prev = np.empty_like(seps)
    if len(seps):
        after_prev[0] = 0
        np.add(seps[:-1], 1, out=after_prev[1:])
    pair_starts = np.where(same_row, after_prev, starts[sep_rows])
    pair_ends = seps
    pair_rows = sep_rows

    # The tail after each row's last \x02 (usually empty).
    if valid is not None:
        per_row = np.where(valid, per_row, 0)
    if len(seps):
        last_sep_index = np.cumsum(per_row) - 1
        tail_starts = np.where(per_row > 0, seps[np.maximum(last_sep_index, 0)] + 1, starts)
    else:
        tail_starts = starts
    tail_rows = np.flatnonzero(ends - tail_starts >= 3)
    if len(tail_rows):
        pair_starts = np.concatenate((pair_starts, tail_starts[tail_rows]))
        pair_ends = np.concatenate((pair_ends, ends[tail_rows]))
        pair_rows = np.concatenate((pair_rows, tail_rows))
        order = np.argsort(pair_rows, kind="stable")  # tails go after their row's pairs
        pair_starts, pair_ends, pair_rows = pair_starts[order], pair_ends[order], pair_rows[order]

    # Key/value split at the pair's first \x01.
    kv_all = np.flatnonzero(region == 1) + lo
    if len(kv_all):
        idx = np.searchsorted(kv_all, pair_starts, side="left")
        kv = kv_all[np.minimum(idx, len(kv_all) - 1)]
        good = (idx < len(kv_all)) & (kv > pair_starts) & (kv < pair_ends - 1)
    else:
        kv = pair_starts
        good = np.zeros(len(pair_starts), dtype=bool)
    return pair_starts[good], kv[good], pair_ends[good], pair_rows[good]


def _gather_spans(buffer, starts, ends, large: bool) -> pa.Array:
    """Element i is the text at bytes [starts[i], ends[i]) of `buffer`
    (ascending, disjoint spans): a zero-copy array of spans and the gaps
    between them, then one take of the spans."""
    m = len(starts)
    if m == 0:
        return string_array([])
    bounds = np.empty(2 * m, dtype=np.int64 if large else np.int32)
    bounds[0::2] = starts
    bounds[1::2] = ends
    spans = pa.Array.from_buffers(
        pa.large_string() if large else pa.string(), 2 * m - 1, [None, pa.py_buffer(bounds), buffer]
    )
    taken = spans.take(from_numpy(np.arange(0, 2 * m, 2, dtype=np.int64)))
    return taken.cast(pa.string()) if large else taken


def properties_to_map(strings: Union[pa.Array, pa.ChunkedArray, Iterable[Optional[str]]]) -> pa.MapArray:
    """Parse many properties texts at once into a map<string, string> array
    (a null text gives an empty map).

    Works on the UTF-8 bytes with numpy, in slices of whole rows: \\x01 and
    \\x02 never occur inside a multi-byte character, so the byte offsets of
    the separators cut the text exactly where Java's indexOf would.
    Duplicate keys are kept in order, so a reader taking the last one
    (dict() of the pairs, property_column) sees the later duplicate win.
    """
    arr = _as_string_array(strings)
    n = len(arr)
    large = pa.types.is_large_string(arr.type)
    bufs = arr.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int64 if large else np.int32)[arr.offset : arr.offset + n + 1]
    offsets = offsets.astype(np.int64)
    valid = None
    if arr.null_count:
        # A null slot's bytes are not properties; give it zero length.
        valid = true_where_valid(arr.is_valid())
        starts = np.where(valid, offsets[:-1], offsets[1:])
    else:
        starts = offsets[:-1]
    ends = offsets[1:]
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)

    native = _native_module()
    fast = native.property_pairs(bufs[2], starts, ends) if bufs[2] is not None else None
    if fast is not None:  # the compiled pair scanner (one entry per key)
        rows, s, k, e = fast
        keys = native.gather_spans(bufs[2], s, k, pa.string())
        values = native.gather_spans(bufs[2], k + 1, e, pa.string())
        return _assemble_map(rows, n, keys, values)

    lo, hi = int(offsets[0]), int(offsets[-1])
    cuts = np.searchsorted(offsets, np.arange(lo, hi, _CHUNK_BYTES), side="left")
    cuts = np.unique(np.concatenate(([0], cuts, [n])))
    parts = []
    for r0, r1 in zip(cuts[:-1].tolist(), cuts[1:].tolist()):
        if r1 <= r0 or offsets[r1] <= offsets[r0]:
            continue
        s, k, e, rows = _pair_spans(
            offsets[r0 : r1 + 1], starts[r0:r1], ends[r0:r1], None if valid is None else valid[r0:r1], data
        )
        parts.append((s, k, e, rows + r0))
    if parts:
        s, k, e, rows = (np.concatenate(p) for p in zip(*parts))
    else:
        s = k = e = rows = np.zeros(0, dtype=np.int64)
    keys = _gather_spans(bufs[2], s, k, large)
    values = _gather_spans(bufs[2], k + 1, e, large)
    return _assemble_map(rows, n, keys, values)


def _native_module():
    from . import native  # imported on first use: native loads the compiled kernels
    return native


def _assemble_map(rows, n, keys, values) -> pa.MapArray:
    counts = np.bincount(rows, minlength=n) if len(rows) else np.zeros(n, dtype=np.int64)
    map_offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(counts, out=map_offsets[1:])
    return pa.MapArray.from_arrays(from_numpy(map_offsets), keys, values, type=MAP_TYPE)


class MapColumn:
    """Looks properties up in a map<string,string> column (the last of
    duplicate keys wins), sharing the flattened keys between lookups."""

    def __init__(self, map_array: Union[pa.MapArray, pa.ChunkedArray]) -> None:
        if isinstance(map_array, pa.ChunkedArray):
            map_array = map_array.combine_chunks() if map_array.num_chunks != 1 else map_array.chunk(0)
        if not pa.types.is_map(map_array.type):
            raise TypeError(f"the properties column must be a map<string,string>, got {map_array.type}")
        self.n = len(map_array)
        offsets = numpy_values(map_array.offsets).astype(np.int64)
        lo, hi = int(offsets[0]), int(offsets[-1])
        self._rel_offsets = offsets - lo
        self._keys = map_array.keys.slice(lo, hi - lo)
        self._items = map_array.items.slice(lo, hi - lo)
        self._null_rows = (
            np.flatnonzero(true_where_valid(map_array.is_null())) if map_array.null_count else None
        )

    def column(self, name: str) -> pa.Array:
        """The property `name` per row; null where missing."""
        hits = pc.equal(self._keys, string_scalar(name))
        pos = np.flatnonzero(true_where_valid(hits))  # a null hit is no hit
        index = np.full(self.n, -1, dtype=np.int64)
        if len(pos):
            rows = np.searchsorted(self._rel_offsets, pos, side="right") - 1
            last = np.empty(len(rows), dtype=bool)
            last[-1] = True
            np.not_equal(rows[1:], rows[:-1], out=last[:-1])
            index[rows[last]] = pos[last]
        if self._null_rows is not None:
            index[self._null_rows] = -1
        if len(pos) == 0:
            return pa.nulls(self.n, type=self._items.type)
        missing = index < 0
        if not missing.any():
            return self._items.take(from_numpy(index))
        return self._items.take(index_array(index, missing))


def property_column(map_array: Union[pa.MapArray, pa.ChunkedArray], name: str) -> pa.Array:
    """One property of a map<string,string> column as a string column."""
    return MapColumn(map_array).column(name)
class PropertiesText:
    """Property lookups straight from stored properties texts, without
    building the whole map: one pass over the bytes (rmq_common.native's
    property_columns) cuts out every property asked for together.  Same
    rules as parse_properties (first \\x01 splits, empty pairs dropped,
    later duplicates win).  `subset` narrows to some rows: what was found
    is taken from the found columns, anything else is read from just those
    rows' texts."""

    def __init__(self, strings, names=None) -> None:
        arr = _as_string_array(strings)
        n = len(arr)
        bufs = arr.buffers()
        large = pa.types.is_large_string(arr.type)
        offsets = np.frombuffer(bufs[1], dtype=np.int64 if large else np.int32)[arr.offset : arr.offset + n + 1]
        offsets = offsets.astype(np.int64)
        row_ends = offsets[1:]
        # A null slot's bytes are not properties: make it empty.
        row_starts = np.where(true_where_valid(arr.is_valid()), offsets[:-1], row_ends) if (
            arr.null_count) else offsets[:-1]
        self._init(bufs[2] if bufs[2] is not None else b"", row_starts, row_ends, names)

    def _init(self, buffer, row_starts, row_ends, names, parent=None, index=None) -> None:
        self.n = len(row_starts) if parent is None else len(index)
        self._buffer = buffer
        self._row_spans = (row_starts, row_ends) if parent is None else None
        self._columns: dict[str, pa.Array] = {}
        self._names = list(dict.fromkeys(names or ()))
        self._parent, self._index = parent, index

    def subset(self, index: np.ndarray, names=None) -> "PropertiesText":
        """The rows at `index`; `names` are the properties that will be read."""
        sub = PropertiesText.__new__(PropertiesText)
        sub._init(self._buffer, None, None, names, self, index)
        return sub

    def _rows(self) -> tuple[np.ndarray, np.ndarray]:
        """(start, end) of each row's text in the buffer."""
        if self._row_spans is None:
            starts, ends = self._parent._rows()
            self._row_spans = (starts[self._index], ends[self._index])
        return self._row_spans

    def _found(self, name: str) -> Optional[pa.Array]:
        col = self._columns.get(name)
        if col is None and self._parent is not None:
            col = self._parent._found(name)
            if col is not None:
                col = self._columns[name] = col.take(from_numpy(np.asarray(self._index, dtype=np.int64)))
        return col

    def prefetch(self, names) -> None:
        """Find these properties now, in one pass with the ones not yet read."""
        missing = [k for k in dict.fromkeys(list(names) + self._names) if self._found(k) is None]
        if missing:
            columns = _native_module().property_columns(self._buffer, *self._rows(), missing)
            self._columns.update(zip(missing, columns))
        self._names = []

    def column(self, name: str) -> pa.Array:
        """The property `name` per row; null where missing."""
        col = self._found(name)
        if col is None:
            self.prefetch([name])
            col = self._columns[name]
        return col
