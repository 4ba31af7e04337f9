"""numpy-facing wrappers of rmq_common/_native.c: the loops over record bytes that have no vector form.

Each works on a whole batch in one call. Without the compiled module (no compiler where the project was
installed) the same results come from zlib and numpy, more slowly. Each public kernel is bound to one form or the
other once, at import (the bindings at the end; FALLBACKS names the Python forms).
"""
from __future__ import annotations

import mmap
import struct
import threading
import weakref
import zlib
from typing import Optional, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .compiled import _native
from .numpy_arrow import from_numpy


def _available_compiled() -> bool:
    return True


def _available_python() -> bool:
    return False


_OWN_MAPPING = 1 << 20  # outputs this big get a region of their own
_REGION_STEP = 1 << 20
_POOL_BYTES = 256 << 20  # free regions kept for reuse (only pages once written are resident)
_pool: list = []  # free anonymous mappings, reused while their pages are resident (no fresh page faults)
_pool_lock = threading.RLock()  # re-entrant: a garbage collection inside may give a region back


def _out(count: int, dtype) -> np.ndarray:
    """An output buffer of a scan kernel. Big ones live in anonymous mappings of their own, given back to a
    small pool when the last array or Arrow buffer over them is dropped: malloc's heap would instead grow to
    the worst mix of batch sizes and lifetimes seen (the scan's RSS then rose with the batches read), and
    fresh mappings per batch cost a page fault per written page."""
    dtype = np.dtype(dtype)
    nbytes = count * dtype.itemsize
    if nbytes < _OWN_MAPPING or not hasattr(mmap, "MAP_PRIVATE"):
        return np.empty(count, dtype)
    region = None
    with _pool_lock:
        for m in _pool:  # the smallest free region that fits and wastes at most half of itself
            if nbytes <= len(m) <= 2 * nbytes and (region is None or len(m) < len(region)):
                region = m
        if region is not None:
            _pool.remove(region)
    if region is None:
        region = mmap.mmap(-1, -(-nbytes // _REGION_STEP) * _REGION_STEP, flags=mmap.MAP_PRIVATE)
    out = np.frombuffer(region, dtype=dtype, count=count)
    # The region is free again when numpy's memoryview over it ends: every view of `out` and every Arrow buffer
    # made from them holds it (through `out` or directly).
    weakref.finalize(out.base, _give_back, region)
    return out


def _give_back(region: mmap.mmap) -> None:
    with _pool_lock:
        _pool.append(region)
        total = 0
        for m in _pool:
            total += len(m)
        while total > _POOL_BYTES and _pool:
            # the region given back longest ago goes (unmapped once unreferenced): the sizes a reader asks for
            # now stay, whatever another kind of read left before
            total -= len(_pool.pop(0))


def value_offsets(arr: pa.Array) -> np.ndarray:
    """A string, binary, list or map array's int32 offsets into its values (one more than its length): a view of
    its buffer, its slice offset applied."""
    return np.frombuffer(arr.buffers()[1], dtype=np.int32, count=len(arr) + 1, offset=arr.offset * 4)


def _i64(a) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.int64)


def _crc32_spans_compiled(data, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """CRC32 & 0x7FFFFFFF of data[starts[i]:ends[i]] for every i, as int64 (RocketMQ's BODYCRC)."""
    n = len(starts)
    starts, ends = _i64(starts), _i64(ends)
    out = np.empty(n, dtype=np.uint32)
    if n:
        _native.crc32_spans(data, starts, ends, out)
    return out.astype(np.int64) & 0x7FFFFFFF


def _crc32_spans_python(data, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    n = len(starts)
    starts, ends = _i64(starts), _i64(ends)
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
    offs = value_offsets(bodies)
    data = bodies.buffers()[2]
    if data is None:
        return np.zeros(n, dtype=np.int64)
    return crc32_spans(data, offs[:-1], offs[1:])


def _property_pairs_compiled(data, starts: np.ndarray, ends: np.ndarray) -> Optional[tuple]:
    """(rows, key starts, \\x01 positions, value ends) of the kept pairs of the properties texts
    data[starts[r]:ends[r]] (one entry per key and row: a repeated key keeps the later value), or None without
    the compiled module (callers then use their numpy path)."""
    starts, ends = _i64(starts), _i64(ends)
    raw = np.frombuffer(data, dtype=np.uint8)
    lo = int(starts.min()) if len(starts) else 0
    hi = int(ends.max()) if len(ends) else 0
    cap = int(np.count_nonzero(raw[lo:hi] == 2)) + len(starts)
    rows = np.empty(cap, dtype=np.int64)
    keys = np.empty(cap, dtype=np.int64)
    seps = np.empty(cap, dtype=np.int64)
    pair_ends = np.empty(cap, dtype=np.int64)
    count = _native.property_pairs(data, starts, ends, rows, keys, seps, pair_ends) if cap else 0
    return rows[:count], keys[:count], seps[:count], pair_ends[:count]


def _property_columns_compiled(data, starts: np.ndarray, ends: np.ndarray, names: list[str]) -> list[pa.Array]:
    """For each name, the string column of that property's value in each properties text
    data[starts[r]:ends[r]] (null where the text lacks it). Same rules as property_pairs (a pair needs a
    non-empty key and value; a later duplicate wins). Names must be distinct."""
    starts, ends = _i64(starts), _i64(ends)
    n = len(starts)
    encoded = [name.encode("utf-8") for name in names]
    key_ends = np.cumsum([len(k) for k in encoded], dtype=np.int64) if names else np.zeros(0, np.int64)
    validity = np.zeros((len(names), (n + 7) // 8), dtype=np.uint8)
    offsets = np.empty((len(names), n + 1), dtype=np.int32)
    values = _native.property_columns(data, starts, ends, b"".join(encoded), key_ends, validity, offsets)
    return [pa.Array.from_buffers(pa.string(), n, [pa.py_buffer(v), pa.py_buffer(o), pa.py_buffer(d)])
            for v, o, d in zip(validity, offsets, values)]


def _property_columns_python(data, starts: np.ndarray, ends: np.ndarray, names: list[str]) -> list[pa.Array]:
    starts, ends = _i64(starts), _i64(ends)
    n = len(starts)
    value_starts, value_ends = _property_values_numpy(data, starts, ends, [k.encode("utf-8") for k in names])
    columns = []
    for vs, ve in zip(value_starts, value_ends):
        present = vs >= 0
        # a missing value gathers the empty span (0, 0) and is made null by the validity bitmap
        col = gather_spans(data, np.where(present, vs, 0), np.where(present, ve, 0), pa.string())
        validity = pa.py_buffer(np.packbits(present, bitorder="little"))
        columns.append(pa.Array.from_buffers(pa.string(), n, [validity, *col.buffers()[1:]]))
    return columns


def _properties_without_compiled(data, starts: np.ndarray, ends: np.ndarray, names: list[str]) -> Optional[pa.Array]:
    """The properties texts data[starts[r]:ends[r]] without the pairs whose key is one of `names`, every other
    byte as it was (a last pair gets its \x02), as a string column; None without the compiled module."""
    starts, ends = _i64(starts), _i64(ends)
    n = len(starts)
    encoded = [name.encode("utf-8") for name in names]
    key_ends = np.cumsum([len(k) for k in encoded], dtype=np.int64) if names else np.zeros(0, np.int64)
    offsets = np.empty(n + 1, dtype=np.int32)
    out = _native.properties_without(data, starts, ends, b"".join(encoded), key_ends, offsets)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(out)])


def _property_values_numpy(data, starts: np.ndarray, ends: np.ndarray, keys: list[bytes]):
    """property_columns' fallback, as byte spans: (value starts, value ends), each (len(keys), rows), -1 where
    missing."""
    n = len(starts)
    value_starts = np.full((len(keys), n), -1, dtype=np.int64)
    value_ends = np.full((len(keys), n), -1, dtype=np.int64)
    raw = np.frombuffer(data, dtype=np.uint8)
    if (starts < 0).any() or (ends < starts).any() or (ends > len(raw)).any():
        i = int(np.flatnonzero((starts < 0) | (ends < starts) | (ends > len(raw)))[0])
        raise ValueError(f"span {i} [{starts[i]}, {ends[i]}) is outside the buffer of {len(raw)} bytes")
    if n == 0 or not keys:
        return value_starts, value_ends
    # In slices of rows of about a megabyte of text: the temporaries take several bytes per byte of text.
    cuts = np.searchsorted(np.cumsum(ends - starts + 1), np.arange(1 << 20, int((ends - starts + 1).sum()), 1 << 20))
    for lo, hi in zip([0, *cuts.tolist()], [*cuts.tolist(), n]):
        if hi > lo:
            _spans_numpy(raw, starts[lo:hi], ends[lo:hi], keys, value_starts[:, lo:hi], value_ends[:, lo:hi])
    return value_starts, value_ends


def _spans_numpy(raw: np.ndarray, starts: np.ndarray, ends: np.ndarray, keys: list[bytes], value_starts,
                 value_ends) -> None:
    n = len(starts)
    # The rows back to back, each followed by a \x02 (so every pair, the last included, ends at one), and
    # the map from a position there back to the original bytes.
    lengths = ends - starts + 1
    shift = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=shift[1:])
    row_of = np.repeat(np.arange(n), lengths)
    origin = np.arange(int(shift[-1])) - shift[row_of] + starts[row_of]  # position in data (the added \x02: end)
    text = np.full(int(shift[-1]), 2, dtype=np.uint8)
    inside = origin < ends[row_of]
    text[inside] = raw[origin[inside]]
    pair_ends = np.flatnonzero(text == 2)
    pair_starts = np.concatenate(([0], pair_ends[:-1] + 1))
    ones = np.flatnonzero(text == 1)
    first = np.searchsorted(ones, pair_starts)
    seps = ones[np.minimum(first, len(ones) - 1)] if len(ones) else pair_starts
    kept = (first < len(ones)) & (seps > pair_starts) & (seps + 1 < pair_ends)
    pair_starts, seps, pair_ends = pair_starts[kept], seps[kept], pair_ends[kept]
    rows = row_of[pair_starts]
    for j, key in enumerate(keys):
        hit = np.flatnonzero(seps - pair_starts == len(key))
        if len(key):
            at = pair_starts[hit][:, None] + np.arange(len(key))
            hit = hit[(text[at] == np.frombuffer(key, dtype=np.uint8)).all(axis=1)]
        last = np.ones(len(hit), dtype=bool)  # the row's last such pair wins
        last[:-1] = rows[hit[1:]] != rows[hit[:-1]]
        hit = hit[last]
        value_starts[j, rows[hit]] = origin[seps[hit] + 1]
        value_ends[j, rows[hit]] = origin[pair_ends[hit]]


def _strings_in_compiled(strings: pa.Array, values: list[str]) -> np.ndarray:
    """Boolean numpy array: which elements of a string array equal one of `values` (False where null)."""
    n = len(strings)
    found = np.zeros(n, dtype=bool)
    if n == 0 or not values:
        return found
    if strings.type != pa.string():
        return _strings_in_python(strings, values)
    offsets = value_offsets(strings)
    data = strings.buffers()[2] or b""
    encoded = [value.encode("utf-8") for value in dict.fromkeys(values)]
    literal_ends = np.cumsum([len(v) for v in encoded], dtype=np.int64)
    _native.strings_in(offsets, data, b"".join(encoded), literal_ends, found.view(np.uint8))
    if strings.null_count:
        found &= strings.is_valid().to_numpy(zero_copy_only=False)
    return found


def _strings_in_python(strings: pa.Array, values: list[str]) -> np.ndarray:
    found = np.zeros(len(strings), dtype=bool)
    for value in dict.fromkeys(values):
        found |= pc.equal(strings, value).fill_null(False).to_numpy(zero_copy_only=False)
    return found


def _decimal_longs_compiled(strings: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(values int64, ok bool) of a string array: ok where the text is an optional '-' and 1 to 18 ASCII digits
    (read alike by Java's Long.parseLong and any plain parse, and never overflowing), with its value; elsewhere
    (null included) ok is False and the value 0."""
    n = len(strings)
    if strings.type != pa.string() or n == 0:
        return _decimal_longs_python(strings)
    offsets = value_offsets(strings)
    values, ok = np.empty(n, dtype=np.int64), np.empty(n, dtype=bool)  # every item is written
    _native.decimal_longs(offsets, strings.buffers()[2] or b"", values, ok.view(np.uint8))
    if strings.null_count:
        null = ~strings.is_valid().to_numpy(zero_copy_only=False)
        ok[null], values[null] = False, 0
    return values, ok


def _decimal_longs_python(strings: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    values = np.zeros(len(strings), dtype=np.int64)
    ok = pc.match_substring_regex(strings, r"^-?[0-9]{1,18}$").fill_null(False).to_numpy(zero_copy_only=False)
    if ok.any():
        values[ok] = pc.cast(strings.filter(pa.array(ok)), pa.int64()).to_numpy()
    return values, ok


def _message_batch_spans_compiled(body) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Where each message of a MessageBatch body (RocketMQ's MessageDecoder.encodeMessages) lies: (body starts,
    body lengths, properties starts, properties lengths). ValueError names the first message that does not fit."""
    out = [np.empty(len(body) // 22 + 1, dtype=np.int64) for _ in range(4)]
    n = int(_native.message_batch_spans(body, *out))
    return out[0][:n], out[1][:n], out[2][:n], out[3][:n]


def _message_batch_spans_python(body) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    out = [np.empty(len(body) // 22 + 1, dtype=np.int64) for _ in range(4)]
    pos = i = 0
    while pos < len(body):
        if len(body) - pos < 22:
            raise ValueError(f"batch message {i}: {len(body) - pos} bytes left, fewer than a message's 22")
        total, _magic, _crc, _flag, body_len = struct.unpack_from(">iiiii", body, pos)
        if total < 22 or total > len(body) - pos:
            raise ValueError(f"batch message {i}: TOTALSIZE {total} runs past the body")
        if body_len < 0 or 22 + body_len > total:
            raise ValueError(f"batch message {i}: BODY length {body_len} runs past its TOTALSIZE {total}")
        (props_len,) = struct.unpack_from(">h", body, pos + 20 + body_len)
        if props_len < 0 or 22 + body_len + props_len > total:
            raise ValueError(f"batch message {i}: PROPERTIES length {props_len} runs past its TOTALSIZE {total}")
        out[0][i], out[1][i], out[2][i], out[3][i] = pos + 20, body_len, pos + 22 + body_len, props_len
        pos += total
        i += 1
    return out[0][:i], out[1][:i], out[2][:i], out[3][:i]


def _record_spans_compiled(body) -> tuple[np.ndarray, np.ndarray]:
    """(starts, sizes) of the records back to back in body (a pull's response body). ValueError names the first
    record whose TOTALSIZE is below a record's 91 bytes or runs past the body."""
    cap = len(body) // 91 + 1
    starts, sizes = np.empty(cap, dtype=np.int64), np.empty(cap, dtype=np.int64)
    n = int(_native.record_spans(body, starts, sizes))
    return starts[:n], sizes[:n]


def _record_spans_python(body) -> tuple[np.ndarray, np.ndarray]:
    cap = len(body) // 91 + 1
    starts, sizes = np.empty(cap, dtype=np.int64), np.empty(cap, dtype=np.int64)
    pos = i = 0
    while pos < len(body):
        total = struct.unpack_from(">i", body, pos)[0] if len(body) - pos >= 4 else -1
        if total < 91 or total > len(body) - pos:
            raise ValueError(f"record {i} at byte {pos}: TOTALSIZE {total} is not a record's size within the "
                             f"{len(body) - pos} bytes left")
        starts[i], sizes[i] = pos, total
        pos += total
        i += 1
    return starts[:i], sizes[:i]


def _pull_records_compiled(units: np.ndarray, keep: Optional[np.ndarray], data, base: int, max_msgs: int,
                           max_bytes: int, first_fits: bool, clear_mask: int
                           ) -> Optional[tuple[Optional[bytes], int, int, int]]:
    """A pull's answer from consume-queue units in one compiled pass (_native.pull_records: which kept units fit
    max_msgs and max_bytes, the first always when first_fits, their records gathered from data, the commitlog
    file starting at base, up to the first record past it; each checked and its SYSFLAG's high byte ANDed with
    clear_mask): (body, taken, units examined, bad unit or -1); None without the compiled module (the caller
    takes its numpy path)."""
    return _native.pull_records(units, None if keep is None else keep.view(np.uint8), data, base, max_msgs,
                                max_bytes, first_fits, clear_mask)


def _gather_records_compiled(data, starts: np.ndarray, sizes: np.ndarray, out: np.ndarray) -> int:
    """Copy the records data[starts[i]:starts[i]+sizes[i]] back to back into out (uint8, at least their total
    length); -1, or the index of the first record whose TOTALSIZE or MAGICCODE does not match (nothing of it or
    after it is copied). Raises ValueError for a record outside data."""
    starts, sizes = _i64(starts), _i64(sizes)
    return int(_native.gather_records(data, starts, sizes, out)) if len(starts) else -1


def _gather_records_python(data, starts: np.ndarray, sizes: np.ndarray, out: np.ndarray) -> int:
    starts, sizes = _i64(starts), _i64(sizes)
    buf = np.frombuffer(data, dtype=np.uint8)
    if len(starts) and (starts.min() < 0 or sizes.min() < 8 or int((starts + sizes).max()) > len(buf)):
        raise ValueError("gather_records: a record is outside the buffer")
    heads = buf[(starts[:, None] + np.arange(8)).ravel()].reshape(-1, 8)
    totals = heads[:, :4].copy().view(">i4").ravel()
    magics = heads[:, 4:].copy().view(">u4").ravel()
    bad = np.flatnonzero((totals != sizes) | ((magics != 0xDAA320A7) & (magics != 0xDAA320AB)))
    n = int(bad[0]) if len(bad) else len(starts)
    first = np.zeros(n, dtype=np.int64)
    np.cumsum(sizes[:n - 1] if n else sizes[:0], out=first[1:])
    total = int(sizes[:n].sum())
    out[:total] = buf[np.repeat(starts[:n] - first, sizes[:n]) + np.arange(total)]
    return int(bad[0]) if len(bad) else -1


def _gather_spans(data, starts: np.ndarray, ends: np.ndarray, typ, copy) -> pa.Array:
    """An Arrow array whose element i is a copy of data[starts[i]:ends[i]], the bytes copied by
    copy(data, starts, ends, offsets, total)."""
    n = len(starts)
    starts, ends = _i64(starts), _i64(ends)
    if (ends < starts).any():
        i = int(np.flatnonzero(ends < starts)[0])
        raise ValueError(f"span {i} [{starts[i]}, {ends[i]}) is outside the buffer (it ends before it starts)")
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(ends - starts, out=offsets[1:])
    total = int(offsets[-1])
    if total >= 2**31:
        raise ValueError("gathered spans exceed 2 GiB; use smaller batches")
    out = copy(data, starts, ends, offsets, total)
    return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(out)])


def _copy_spans_compiled(data, starts: np.ndarray, ends: np.ndarray, offsets: np.ndarray, total: int) -> np.ndarray:
    out = np.empty(total, dtype=np.uint8)
    if len(starts):
        _native.gather_spans(data, starts, ends, out)
    return out


def _copy_spans_python(data, starts: np.ndarray, ends: np.ndarray, offsets: np.ndarray, total: int) -> np.ndarray:
    buf = np.frombuffer(data, dtype=np.uint8)
    return buf[np.repeat(starts - offsets[:-1], ends - starts) + np.arange(total)]


def _gather_spans_compiled(data, starts: np.ndarray, ends: np.ndarray, typ=pa.binary()) -> pa.Array:
    """An Arrow array whose element i is a copy of data[starts[i]:ends[i]]."""
    return _gather_spans(data, starts, ends, typ, _copy_spans_compiled)


def _gather_spans_python(data, starts: np.ndarray, ends: np.ndarray, typ=pa.binary()) -> pa.Array:
    return _gather_spans(data, starts, ends, typ, _copy_spans_python)


# Which columns decode_v4_records and properties_columns build (_native.c's WANT_* bits).
WANT_BODY = 1
WANT_MAP = 2
WANT_TAGS = 4
WANT_KEYS = 8
WANT_IDS = 16
WANT_PROPERTIES: int = WANT_MAP | WANT_TAGS | WANT_KEYS
WANT_ALL: int = WANT_BODY | WANT_PROPERTIES | WANT_IDS


def _decode_v4_records_compiled(data, starts: np.ndarray, offsets: np.ndarray, sizes: np.ndarray,
                                queue_offsets: np.ndarray, queue_id: Union[int, np.ndarray], topic: bytes,
                                want: int = WANT_ALL) -> Optional[tuple]:
    """One pass over the records at data[starts[i]:] (commit-log offsets[i]) of one queue (queue_id: an int), or
    of several read in log order (an array: each record's queue id), whose hosts are all
    IPv4: (ints, longs, msg_id hex bytes, bodies, (map, TAGS, KEYS) of the properties) as _native.c's
    decode_v4_records lays them out. Only the columns in `want` are built (None in their place otherwise: the
    message ids with WANT_IDS, the bodies, with their CRC checked, with WANT_BODY, each properties column with its
    bit); None without the compiled module or when some record needs the general decoder (an IPv6 host, or
    anything invalid, which that decoder names)."""
    n = len(offsets)
    sizes = _i64(sizes)
    body = bool(want & WANT_BODY)
    ints = _out(4 * n, np.int32).reshape(4, n)
    longs = _out(8 * n, np.int64).reshape(8, n)
    ids = _out(32 * n if want & WANT_IDS else 0, np.uint8)
    body_offsets = _out(n + 1 if body else 0, np.int32)
    # Room for every body or properties text: a record holds at least 91 bytes of header and lengths, and the topic.
    room = int(np.maximum(sizes - (91 + len(topic)), 0).sum()) if want & (WANT_BODY | WANT_PROPERTIES) else 0
    body_data = _out(room if body else 0, np.uint8)
    outs = _properties_buffers(n, room, want & WANT_PROPERTIES)
    queue_ids = np.ascontiguousarray(queue_id if isinstance(queue_id, np.ndarray) else [queue_id], dtype=np.int32)
    stop, pairs, items = _native.decode_v4_records(data, _i64(starts), _i64(offsets), sizes, _i64(queue_offsets),
                                                   queue_ids, topic, int(want), ints, longs, ids,
                                                   body_offsets, body_data, *outs)
    if stop >= 0:
        return None
    bodies = _arrow(pa.binary(), n, body_offsets, body_data) if body else None
    return (ints, longs, ids if want & WANT_IDS else None, bodies,
            _properties_arrays(outs, n, pairs, items, want & WANT_PROPERTIES))


def _arrow(typ, n: int, offsets: np.ndarray, data: np.ndarray) -> pa.Array:
    """A binary/string array over int32 offsets and the used part of data (no copy)."""
    return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(offsets), pa.py_buffer(data[:int(offsets[n])])])


def _properties_columns_compiled(data, starts: np.ndarray, ends: np.ndarray, want: int = WANT_PROPERTIES
                                 ) -> Optional[tuple]:
    """(map<string,string>, TAGS, KEYS as list<string>) of the properties texts data[starts[r]:ends[r]] in one
    compiled pass (see _native.c), each only when its bit is in `want` (else None), or None without the compiled
    module (callers then parse and look up with Arrow/numpy)."""
    n = len(starts)
    starts, ends = _i64(starts), _i64(ends)
    want &= WANT_PROPERTIES
    outs = _properties_buffers(n, int((ends - starts).sum()), want)
    pairs, items = _native.properties_columns(data, starts, ends, int(want), *outs)
    return _properties_arrays(outs, n, pairs, items, want)


def _properties_buffers(n: int, size: int, want: int) -> list:
    """The 11 output buffers of the properties kernels for n rows of `size` text bytes together (empty for the
    columns not in `want`: the kernels do not touch them)."""
    cap = n + size // 2 + 2
    i32 = np.int32
    m, t, k = (bool(want & bit) for bit in (WANT_MAP, WANT_TAGS, WANT_KEYS))
    return [_out((n + 1) * m, i32), _out(cap * m, i32), _out(size * m, np.uint8), _out(cap * m, i32),
            _out(size * m, np.uint8), _out((n + 1) * t, i32), _out(size * t, np.uint8), _out(n * t, np.bool_),
            _out((n + 1) * k, i32), _out(cap * k, i32), _out(size * k, np.uint8)]


def _properties_arrays(outs: list, n: int, pairs: int, items: int, want: int) -> tuple:
    (map_offsets, key_offsets, key_data, value_offsets, value_data, tags_offsets, tags_data, tags_valid,
     keys_offsets, item_offsets, item_data) = outs
    props = tags = keys = None
    if want & WANT_MAP:
        props = pa.MapArray.from_arrays(from_numpy(map_offsets), _arrow(pa.string(), pairs, key_offsets, key_data),
                                        _arrow(pa.string(), pairs, value_offsets, value_data),
                                        type=pa.map_(pa.string(), pa.string()))
    if want & WANT_TAGS:
        present = int(np.count_nonzero(tags_valid))
        validity = None if present == n else pa.py_buffer(np.packbits(tags_valid, bitorder="little"))
        tags = pa.Array.from_buffers(pa.string(), n, [validity, pa.py_buffer(tags_offsets),
                                                      pa.py_buffer(tags_data[:int(tags_offsets[n])])],
                                     null_count=n - present)
    if want & WANT_KEYS:
        keys = pa.ListArray.from_arrays(from_numpy(keys_offsets), _arrow(pa.string(), items, item_offsets, item_data))
    return props, tags, keys


def _last_of_each_key_compiled(maps: pa.MapArray) -> pa.MapArray:
    """Maps of properties texts (message_properties.properties_to_map) with one entry per key in each row, the
    later of duplicates in its place. properties_to_map's compiled pair scanner (property_pairs) keeps one entry
    per key already."""
    return maps


def _last_of_each_key_python(maps: pa.MapArray) -> pa.MapArray:
    n = len(maps)
    if n == 0 or len(maps.keys) == 0:
        return maps
    offsets = value_offsets(maps).astype(np.int64)
    parent = np.repeat(np.arange(n, dtype=np.int64), np.diff(offsets))
    dup_rows = _rows_with_duplicate_keys(maps.keys, parent, n)
    if len(dup_rows) == 0:
        return maps
    keys, values, new_offsets = _keep_last_duplicates(maps.keys, maps.items, parent, offsets, dup_rows)
    return pa.MapArray.from_arrays(pa.array(new_offsets), keys, values)


def _rows_with_duplicate_keys(keys: pa.Array, parent: np.ndarray, n: int) -> np.ndarray:
    enc = pc.dictionary_encode(keys)
    idx = enc.indices.to_numpy().astype(np.int64)
    u = len(enc.dictionary)
    if u <= 1 and len(idx) <= n:
        # One distinct key: duplicates iff some row has two pairs.
        counts = np.bincount(parent, minlength=n)
        return np.flatnonzero(counts > 1)
    code = parent.astype(np.int64) * u + idx
    if n * u <= 50_000_000:
        counts = np.bincount(code, minlength=n * u)
        return np.unique(np.flatnonzero(counts > 1) // u)
    uniq, counts = np.unique(code, return_counts=True)
    return np.unique(uniq[counts > 1] // u)


def _keep_last_duplicates(keys, values, parent, offsets, dup_rows):
    """Rare path: rows holding a key twice keep its last value, in the position of its last occurrence."""
    drop = np.zeros(len(parent), dtype=bool)
    key_list = keys.to_pylist()
    for row in dup_rows.tolist():
        seen = set()
        for i in range(int(offsets[row + 1]) - 1, int(offsets[row]) - 1, -1):
            if key_list[i] in seen:
                drop[i] = True
            seen.add(key_list[i])
    keep = pa.array(~drop)
    keys = keys.filter(keep)
    values = values.filter(keep)
    counts = np.bincount(parent[~drop], minlength=len(offsets) - 1)
    new_offsets = np.zeros(len(offsets), dtype=np.int32)
    np.cumsum(counts, out=new_offsets[1:])
    return keys, values, new_offsets


def _none(*args, **kwargs) -> None:
    """The fallback of a kernel whose callers have their own numpy/Arrow path: None sends them there."""
    return None


# Each kernel's pure-Python form, by its public name. The module binds every name once, below, to its compiled
# form when rmq_common._native is built and to this form otherwise.
FALLBACKS = {
    "available": _available_python,
    "crc32_spans": _crc32_spans_python,
    "property_pairs": _none,
    "property_columns": _property_columns_python,
    "last_of_each_key": _last_of_each_key_python,
    "properties_without": _none,
    "strings_in": _strings_in_python,
    "decimal_longs": _decimal_longs_python,
    "message_batch_spans": _message_batch_spans_python,
    "record_spans": _record_spans_python,
    "pull_records": _none,
    "gather_records": _gather_records_python,
    "gather_spans": _gather_spans_python,
    "decode_v4_records": _none,
    "properties_columns": _none,
}

_compiled = _native is not None
available = _available_compiled if _compiled else _available_python
crc32_spans = _crc32_spans_compiled if _compiled else _crc32_spans_python
property_pairs = _property_pairs_compiled if _compiled else _none
property_columns = _property_columns_compiled if _compiled else _property_columns_python
last_of_each_key = _last_of_each_key_compiled if _compiled else _last_of_each_key_python
properties_without = _properties_without_compiled if _compiled else _none
strings_in = _strings_in_compiled if _compiled else _strings_in_python
decimal_longs = _decimal_longs_compiled if _compiled else _decimal_longs_python
message_batch_spans = _message_batch_spans_compiled if _compiled else _message_batch_spans_python
record_spans = _record_spans_compiled if _compiled else _record_spans_python
pull_records = _pull_records_compiled if _compiled else _none
gather_records = _gather_records_compiled if _compiled else _gather_records_python
gather_spans = _gather_spans_compiled if _compiled else _gather_spans_python
decode_v4_records = _decode_v4_records_compiled if _compiled else _none
properties_columns = _properties_columns_compiled if _compiled else _none
