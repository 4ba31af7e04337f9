"""RocketMQ property strings (`key\\x01value\\x02...`) to and from Arrow columns, vectorised.

Same rules as message_codec.string_to_properties: a pair needs a non-empty key and value (split at the first
\\x01), and a later duplicate key wins.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import native
from .message_codec import PROPERTY_KEYS, PROPERTY_TAGS
from .message_properties import properties_to_map, property_column
from .numpy_arrow import from_numpy, string_scalar

MAP_TYPE = pa.map_(pa.string(), pa.string())


def strided_view(buf: np.ndarray, dtype) -> np.ndarray:
    """A view with one (overlapping) element starting at every byte of buf, so that view[positions] gathers
    fixed-size items at arbitrary byte positions with one fancy index."""
    dtype = np.dtype(dtype)
    count = len(buf) - dtype.itemsize + 1
    if count <= 0:
        return np.zeros(0, dtype=dtype)
    return np.ndarray(shape=(count,), dtype=dtype, buffer=buf, offset=0, strides=(1,))


def gather_spans(data, starts: np.ndarray, ends: np.ndarray, typ=pa.binary()) -> pa.Array:
    """Element i is a copy of data[starts[i]:ends[i]] (data: a buffer or uint8 array)."""
    return native.gather_spans(data, starts, ends, typ)


def parse_properties(props: pa.Array) -> pa.MapArray:
    """A string array of RocketMQ property texts -> map<string,string>, one entry per key (the later of
    duplicates wins, as RocketMQ's decoder does; Spark refuses maps with duplicate keys)."""
    return native.last_of_each_key(properties_to_map(props))


def scan_columns(data, starts: np.ndarray, ends: np.ndarray, want: int = native.WANT_PROPERTIES) -> tuple:
    """The scan's columns that come from the properties texts data[starts[r]:ends[r]]: (parse_properties of
    them, the TAGS value per row, the KEYS value split at spaces without empty parts), in one compiled pass where
    it is built; the compiled pass builds only those in `want` (native.WANT_MAP / WANT_TAGS / WANT_KEYS) and gives
    None for the others."""
    fast = native.properties_columns(data, starts, ends, want)
    if fast is not None:
        return fast
    props = parse_properties(gather_spans(data, starts, ends, pa.string()))
    return props, map_lookup(props, PROPERTY_TAGS), split_keys(map_lookup(props, PROPERTY_KEYS))


def split_keys(keys_text: pa.Array) -> pa.Array:
    """KEYS text -> list of keys (space separated, empties dropped); an empty list when absent."""
    n = len(keys_text)
    lists = pc.split_pattern(keys_text.fill_null(""), " ")
    flat = lists.flatten()
    parent = pc.list_parent_indices(lists).to_numpy()
    keep = pc.not_equal(flat, "").to_numpy(zero_copy_only=False)
    counts = np.bincount(parent[keep], minlength=n)
    offs = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(counts, out=offs[1:])
    return pa.ListArray.from_arrays(pa.array(offs), flat.filter(pa.array(keep)))


def map_lookup(props: pa.MapArray, key: str) -> pa.Array:
    """The value of `key` in each row's map (null when absent), vectorised; the last occurrence wins."""
    return property_column(props, key)


def properties_to_strings(props: pa.MapArray) -> pa.StringArray:
    """map<string,string> -> RocketMQ property text per row (for writing)."""
    n = len(props)
    if n == 0:
        return pa.array([], pa.string())
    props = compact_map(props)
    keys = props.keys
    values = props.items
    empty = string_scalar("")
    pairs = pc.binary_join_element_wise(keys, string_scalar("\x01"), values, string_scalar("\x02"), empty)
    joined = pc.binary_join(pa.ListArray.from_arrays(_map_offsets(props), pairs), empty)
    return joined.fill_null(empty)


def compact_map(props: pa.MapArray) -> pa.MapArray:
    """The map array with its entries starting at its first row and ending at its last (a copy only when they do
    not): MapArray.keys/.items are the whole children, also for a slice, and callers index them by the map's
    offsets."""
    raw = native.value_offsets(props)
    if raw[0] == 0 and len(props.keys) == raw[-1]:
        return props
    return pa.concat_arrays([props])


def _map_offsets(props: pa.MapArray) -> pa.Array:
    off = native.value_offsets(props)
    return from_numpy(off - off[0])


def map_with_entries(props: Optional[pa.MapArray], n: int, extra: dict) -> pa.MapArray:
    """Every row's entries followed by `extra`'s (the same names and values for all rows), built by one take."""
    names = pa.array(list(extra), pa.string())
    values = pa.array([str(v) for v in extra.values()], pa.string())
    k = len(extra)
    if props is None or len(props.keys) == 0:
        offsets = pa.array(np.arange(n + 1, dtype=np.int32) * k)
        pick = pa.array(np.tile(np.arange(k, dtype=np.int32), n))
        return pa.MapArray.from_arrays(offsets, names.take(pick), values.take(pick))
    props = compact_map(props)
    off = native.value_offsets(props).astype(np.int64)
    m = int(off[-1])
    counts = np.diff(off)
    new_off = off + np.arange(n + 1, dtype=np.int64) * k
    src = np.empty(m + n * k, dtype=np.int64)
    # an old entry moves by k for every row before its own
    src[np.arange(m, dtype=np.int64) + np.repeat(np.arange(n, dtype=np.int64) * k, counts)] = np.arange(m)
    for j in range(k):
        src[new_off[1:] - k + j] = m + j
    keys = pa.concat_arrays([props.keys.cast(pa.string()), names]).take(pa.array(src))
    items = pa.concat_arrays([props.items.cast(pa.string()), values]).take(pa.array(src))
    return pa.MapArray.from_arrays(pa.array(new_off.astype(np.int32)), keys, items)


def map_without_keys(props: pa.MapArray, drop: Sequence[str]) -> pa.MapArray:
    """Every row's entries but those named in `drop`."""
    props = compact_map(props)
    off = native.value_offsets(props).astype(np.int64)
    keep = pc.invert(pc.is_in(props.keys, value_set=pa.array(list(drop), pa.string())))
    keep_np = keep.to_numpy(zero_copy_only=False)
    kept_before = np.concatenate([[0], np.cumsum(keep_np)])
    new_off = kept_before[off - off[0]]
    return pa.MapArray.from_arrays(pa.array(new_off.astype(np.int32)), props.keys.filter(keep),
                                   props.items.filter(keep))


def text_without_keys(texts: pa.Array, drop: Sequence[str]) -> pa.StringArray:
    """RocketMQ properties texts without the properties named in `drop` (nulls become empty texts)."""
    texts = texts.cast(pa.string()) if texts.type != pa.string() else texts
    if len(texts) == 0:
        return pa.array([], pa.string())
    offsets = native.value_offsets(texts).astype(np.int64)
    starts, ends = offsets[:-1], offsets[1:]
    if texts.null_count:
        starts = np.where(texts.is_valid().to_numpy(zero_copy_only=False), starts, ends)
    out = native.properties_without(texts.buffers()[2] or b"", starts, ends, list(drop))
    if out is not None:
        return out
    return properties_to_strings(map_without_keys(parse_properties(texts.fill_null("")), drop))


def text_with_entries(texts: Optional[pa.Array], n: int, extra: dict) -> pa.StringArray:
    """RocketMQ properties texts (None: none) with `extra`'s pairs (the same for all rows) after each row's own;
    a later pair wins over an earlier one of the same key when read."""
    suffix = "".join(f"{k}\x01{v}\x02" for k, v in extra.items())
    if texts is None:
        return pa.array([suffix] * n, pa.string()) if n else pa.array([], pa.string())
    return pc.binary_join_element_wise(closed_texts(texts), suffix, "")


def closed_texts(texts: pa.Array) -> pa.StringArray:
    """RocketMQ properties texts as a string column with no nulls (an empty text instead) whose last pair ends
    with its \x02 (Java's messageProperties2String leaves it out), so that pairs appended stay pairs."""
    texts = texts.cast(pa.string()) if texts.type != pa.string() else texts
    texts = texts.fill_null("") if texts.null_count else texts
    offsets = native.value_offsets(texts)
    data = np.frombuffer(texts.buffers()[2] or b"", dtype=np.uint8)
    filled = offsets[1:] > offsets[:-1]
    open_end = np.zeros(len(texts), dtype=bool)
    open_end[filled] = data[offsets[1:][filled] - 1] != 2
    if open_end.any():
        texts = pc.if_else(pa.array(open_end), pc.binary_join_element_wise(texts, "\x02", ""), texts)
    return texts
