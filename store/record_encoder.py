"""Encoding a put_batch into CommitLog records: one pass of rmq_common/_encode.c over the batch's columns, or,
without the compiled module, the vectorised numpy/Arrow encode of message_codec (the same bytes). Which one is
chosen once, at import (KERNELS).

The properties text is kept as its pieces until the records are written (the user's text, then TAGS, KEYS,
UNIQ_KEY, ...): sizes come from the pieces' lengths, and the kernel writes `NAME\\x01value\\x02` straight into
the record instead of building an Arrow column of texts first.
"""
from __future__ import annotations

import itertools
import struct
from dataclasses import dataclass
from typing import NamedTuple, Optional, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rmq_common import message_codec as codec
from rmq_common.compiled import _encode
from rmq_common.native import value_offsets
from rmq_common.numpy_arrow import string_scalar

from .consume_queue import UNIT_DTYPE
from .tag_hash import tags_hash_code


def available() -> bool:
    return _encode is not None


@dataclass
class PropertyPart:
    """One piece of every message's properties text. name None: the user's properties text, taken as is;
    otherwise `name\\x01value\\x02` where the value is neither null nor empty. values: a string array with one
    value per message, one str for all of them, or ids the encoder generates (codec.GeneratedIds)."""
    name: Optional[str]
    values: Union[pa.Array, str, codec.GeneratedIds]

    def lengths(self, n: int) -> Union[np.ndarray, int]:
        """Bytes this piece adds to each message's properties text (an int when it is the same for all)."""
        extra = 0 if self.name is None else len(self.name.encode()) + 2
        if isinstance(self.values, codec.GeneratedIds):
            return codec.GeneratedIds.LENGTH + extra
        if isinstance(self.values, str):
            raw = len(self.values.encode())
            return raw + extra if raw else 0
        lens = np.diff(value_offsets(self.values))
        return lens if self.name is None else np.where(lens > 0, lens + extra, 0)

    def column(self, n: int) -> pa.Array:
        """The piece as a string column (the fallback's way)."""
        values = self.values
        if isinstance(values, codec.GeneratedIds):
            values = values.column()
        if isinstance(values, str):
            values = pa.array([values], pa.string()).take(pa.array(np.zeros(n, dtype=np.int32)))
        if self.name is None:
            return values
        values = pc.if_else(pc.equal(values, ""), pa.scalar(None, pa.string()), values)
        return pc.binary_join_element_wise(pa.scalar(self.name + "\x01"), values, pa.scalar("\x02"), "").fill_null("")


def part(name: Optional[str], values) -> Optional[PropertyPart]:
    """A PropertyPart of a string array (nulls become empty, i.e. absent), or None for no values at all."""
    if values is None:
        return None
    if isinstance(values, pa.Array):
        if values.type != pa.string():
            values = values.cast(pa.string())
        if values.null_count:
            values = values.fill_null("")
    return PropertyPart(name, values)


def properties_lengths(parts: list, n: int) -> np.ndarray:
    total = np.zeros(n, dtype=np.int64)
    for p in parts:
        total += p.lengths(n)
    return total


def properties_text(parts: list, n: int) -> pa.Array:
    """Every message's whole properties text, as one string column."""
    if not parts:
        return pa.array([""] * n, pa.string())
    cols = [p.column(n) for p in parts]
    return cols[0] if len(cols) == 1 else pc.binary_join_element_wise(*cols, "")


def _data(arr: pa.Array):
    buf = arr.buffers()[2]
    return b"" if buf is None else buf


def _topics(topics: list) -> tuple[bytes, np.ndarray]:
    """The topics' UTF-8 bytes back to back, and their offsets (int64, one more than topics)."""
    raw = [t.encode() for t in topics]
    return b"".join(raw), np.array([0, *itertools.accumulate(len(t) for t in raw)], dtype=np.int64)


# How _encode.c takes a piece: a column of values, one value for all, or generated ids.
_COLUMN, _BROADCAST, _IDS = 0, 1, 2
_NO_OFFSETS = np.zeros(2, dtype=np.int32)


def _kernel_parts(parts: list) -> list:
    out = []
    for p in parts:
        head = b"" if p.name is None else (p.name + "\x01").encode()
        if isinstance(p.values, codec.GeneratedIds):
            out.append((head, _NO_OFFSETS, p.values.head, _IDS, p.values.start))
        elif isinstance(p.values, str):
            raw = p.values.encode()
            out.append((head, np.array([0, len(raw)], dtype=np.int32), raw, _BROADCAST, 0))
        else:
            out.append((head, value_offsets(p.values), _data(p.values), _COLUMN, 0))
    return out


def _columns(batch: codec.EncodedBatch) -> tuple:
    """The batch's columns as _encode.c takes them (body_offsets, body_data, topics, topic_offsets, topic_index,
    parts), built once per batch and properties pieces (record_sizes, then the encoder)."""
    cached = batch.kernel_columns
    if cached is not None and cached[0] is batch.property_parts:
        return cached[1]
    topics, topic_offsets = _topics(batch.topics)
    columns = (value_offsets(batch.bodies), _data(batch.bodies), topics, topic_offsets, _i32(batch.topic_index),
               _kernel_parts(batch.property_parts))
    batch.kernel_columns = (batch.property_parts, columns)
    return columns


def _host_lengths(batch: codec.EncodedBatch) -> int:
    return len(batch.born_host[0]) + len(batch.store_host[0])


class RecordSizes(NamedTuple):
    sizes: np.ndarray  # each record's TOTALSIZE
    total: int
    too_long: int      # the first message whose properties text is longer than RocketMQ allows, or -1
    too_big: int       # the first message whose body is longer than max_body, or -1
    separator: Optional[tuple]  # (message, piece) of the first \\x01 or \\x02 in a named piece's value, or None


class OffsetAssignment(NamedTuple):
    """Where a batch goes (assign_offsets)."""
    queue_ids: Optional[np.ndarray]  # each message's queue id when assign_offsets chose them (round robin)
    queue_offsets: np.ndarray
    positions: np.ndarray            # commitlog offset of each record
    units: np.ndarray                # consume-queue units of the dispatched messages, grouped by queue
    counts: np.ndarray               # messages per group
    end: Optional[int]               # the log end after the batch, when computed from write_pos


class CompiledKernels:
    """put_batch's loops in rmq_common/_encode.c."""

    def record_sizes(self, batch: codec.EncodedBatch, max_body: int) -> RecordSizes:
        sizes = np.empty(len(batch), dtype=np.int64)
        too_long, too_big, row, piece, total = _encode.record_sizes(sizes, _host_lengths(batch), max_body,
                                                                    *_columns(batch))
        return RecordSizes(sizes, total, too_long, too_big, (row, piece) if row >= 0 else None)

    def java_hash_codes(self, values: pa.Array) -> np.ndarray:
        out = np.empty(len(values), dtype=np.int64)
        _encode.java_hash_codes(value_offsets(values), _data(values), out)
        return out

    def first_separator(self, offsets: np.ndarray, data) -> int:
        return _encode.first_separator(offsets, data)

    def assign_offsets(self, sizes, keys, start, ends, write_pos, positions, tags, queue_ids, queue_offsets,
                       out_positions, units, counts, dispatched) -> OffsetAssignment:
        end = _encode.assign_offsets(_i64(sizes), b"" if keys is None else _i32(keys), start, _i64(ends),
                                     -1 if positions is not None else write_pos,
                                     *_text_column(tags),
                                     queue_ids if keys is None else np.empty(0, np.int32), queue_offsets,
                                     out_positions, units.view(np.uint8), counts)
        return OffsetAssignment(queue_ids, queue_offsets, out_positions, units, counts, None if end < 0 else end)

    def encoder(self, batch, queue_offsets, physical_offsets, store_timestamp) -> "RecordEncoder":
        return RecordEncoder(batch, queue_offsets, physical_offsets, store_timestamp)


class NumpyKernels:
    """The same results with numpy and Arrow, where the install found no C compiler (several times slower)."""

    def record_sizes(self, batch: codec.EncodedBatch, max_body: int) -> RecordSizes:
        n = len(batch)
        props_len = properties_lengths(batch.property_parts, n)
        head = codec.header_dtype(len(batch.born_host[0]) == 16, len(batch.store_host[0]) == 16).itemsize
        topic_len = np.array([len(p) for p in codec.topic_parts(batch.topics)], dtype=np.int64)
        body_len = np.diff(value_offsets(batch.bodies))
        sizes = head + body_len + topic_len[batch.topic_index] + 2 + props_len
        over = np.flatnonzero(props_len > codec.MAX_PROPERTIES_LENGTH)
        big = np.flatnonzero(body_len > max_body)
        separator = None
        for k, p in enumerate(batch.property_parts):
            if p.name is None or isinstance(p.values, codec.GeneratedIds):
                continue
            row = first_separator(pa.array([p.values]) if isinstance(p.values, str) else p.values)
            if row >= 0:
                separator = (row, k)
                break
        return RecordSizes(sizes, int(sizes.sum()), int(over[0]) if len(over) else -1,
                           int(big[0]) if len(big) else -1, separator)

    def java_hash_codes(self, values: pa.Array) -> np.ndarray:
        """Once per distinct value, in Python."""
        enc = pc.dictionary_encode(values)
        codes = np.array([tags_hash_code(t) for t in enc.dictionary.to_pylist()], dtype=np.int64)
        return codes[enc.indices.to_numpy(zero_copy_only=False)]

    def first_separator(self, offsets: np.ndarray, data) -> int:
        raw = np.frombuffer(data, dtype=np.uint8)[offsets[0]:offsets[-1]]
        hits = np.flatnonzero((raw == 1) | (raw == 2))
        return int(np.searchsorted(offsets, offsets[0] + hits[0], side="right")) - 1 if len(hits) else -1

    def assign_offsets(self, sizes, keys, start, ends, write_pos, positions, tags, queue_ids, queue_offsets,
                       out_positions, units, counts, dispatched) -> OffsetAssignment:
        n, groups = len(sizes), len(ends)
        if keys is None:
            assert queue_ids is not None
            queue_ids[:] = (start + np.arange(n)) % groups
            keys = queue_ids
        end = None
        if positions is None:
            assert write_pos is not None  # positions are computed from it
            np.cumsum(sizes, out=out_positions)
            end = write_pos + (int(out_positions[-1]) if n else 0)
            out_positions += write_pos - np.asarray(sizes, dtype=np.int64)
        live = np.flatnonzero(keys >= 0)
        if len(live) != dispatched:
            raise ValueError(f"assign_offsets: {len(live)} dispatched messages for {dispatched} units")
        counts[:] = np.bincount(keys[live], minlength=groups)
        group_start = np.zeros(groups, dtype=np.int64)
        np.cumsum(counts[:-1], out=group_start[1:])
        order = live[np.argsort(keys[live], kind="stable")]  # units: by group, batch order within
        ranks = np.empty(n, dtype=np.int64)
        ranks[order] = np.arange(dispatched) - group_start[keys[order]]
        queue_offsets[:] = 0
        queue_offsets[live] = ends[keys[live]] + ranks[live]
        units["offset"] = out_positions[order]
        units["size"] = np.asarray(sizes)[order]
        units["tags_code"] = java_hash_codes(tags, n)[order]
        return OffsetAssignment(queue_ids, queue_offsets, out_positions, units, counts, end)

    def encoder(self, batch, queue_offsets, physical_offsets, store_timestamp) -> "NumpyRecordEncoder":
        return NumpyRecordEncoder(batch, queue_offsets, physical_offsets, store_timestamp)


# Chosen once: the compiled loops when rmq_common/_encode.c is built, else numpy's.
KERNELS: Union[CompiledKernels, NumpyKernels] = CompiledKernels() if _encode is not None else NumpyKernels()


def record_sizes(batch: codec.EncodedBatch, max_body: int = 2**31 - 1) -> RecordSizes:
    """The batch's record sizes, and what is wrong with its messages (record_encoder.RecordSizes)."""
    return KERNELS.record_sizes(batch, max_body)


def java_hash_codes(values: Optional[pa.Array], n: int) -> np.ndarray:
    """Java's String.hashCode() of each value (0 for null or empty) as int64. values None: n zeros."""
    if values is None:
        return np.zeros(n, dtype=np.int64)
    if values.null_count:
        # a scalar of the values' own type: fill_null makes any other value a pa.scalar, which imports pandas
        values = values.fill_null(string_scalar("").cast(values.type))
    return KERNELS.java_hash_codes(values)


def first_separator(values: pa.Array) -> int:
    """The first row of a string/binary array holding \\x01 or \\x02 (RocketMQ's properties separators), or -1."""
    data = values.buffers()[2]
    if data is None:
        return -1
    return KERNELS.first_separator(value_offsets(values), data)


def assign_offsets(sizes: np.ndarray, keys: Optional[np.ndarray], start: int, ends: np.ndarray,
                   write_pos: Optional[int], positions: Optional[np.ndarray], tags: Optional[pa.Array],
                   dispatched: int) -> OffsetAssignment:
    """Where a batch goes: (queue ids or None, queue offsets, commitlog positions, consume-queue units, messages
    per group, end). Groups are the consume queues written to. keys: each message's group (-1: not dispatched,
    queue offset 0 and no unit), or None for round robin over the len(ends) groups from `start` (the groups are
    then returned as queue ids). Message i gets queue offset ends[g] + its place in group g, and its unit
    (positions[i], sizes[i], hashCode of tags[i]; 0 without tags) lies with its group's, groups in order, each in
    batch order.
    positions are computed from write_pos (a batch inside one file; end is then its end) or given (end None)."""
    n, groups = len(sizes), len(ends)
    return KERNELS.assign_offsets(sizes, keys, start, ends, write_pos, positions, tags,
                                  np.empty(n, dtype=np.int32) if keys is None else None,
                                  np.empty(n, dtype=np.int64),
                                  np.empty(n, dtype=np.int64) if positions is None else _i64(positions),
                                  np.empty(dispatched, dtype=UNIT_DTYPE), np.empty(groups, dtype=np.int64),
                                  dispatched)


_NO_TEXT = (np.zeros(0, dtype=np.int32), b"")


def _text_column(values: Optional[pa.Array]) -> tuple:
    """(int32 offsets, data) of a string array, nulls as empty; empty offsets for None."""
    if values is None:
        return _NO_TEXT
    if values.null_count:
        values = values.fill_null("")
    return value_offsets(values), _data(values)


def _i32(a) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.int32)


def _i64(a) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.int64)


class RecordEncoder:
    """The records of a batch, for the CommitLog to write, by the compiled kernel: write_files() encodes and writes
    them in one compiled pass; records(a, b, out) gives the bytes of records [a, b) back to back, written into
    out (a buffer of at least that size)."""

    def __init__(self, batch: codec.EncodedBatch, queue_offsets: np.ndarray, physical_offsets: np.ndarray,
                 store_timestamp: int):
        self.batch = batch
        born, store = batch.born_host, batch.store_host
        hosts = born[0] + struct.pack(">iq", born[1], store_timestamp) + store[0] + struct.pack(">i", store[1])
        self._args = (
            *_columns(batch), _i64(batch.sizes), _i32(batch.queue_ids), _i32(batch.flags), _i64(queue_offsets),
            _i64(physical_offsets), _i32(batch.sys_flags), _i64(batch.born_timestamps),
            _i32(batch.reconsume_times), _i64(batch.prepared_offsets), hosts, len(born[0]))

    def __call__(self, a: int, b: int, out: Optional[np.ndarray] = None):
        sizes = self.batch.sizes
        assert sizes is not None  # set by record_sizes before a batch is encoded
        nbytes = int(sizes[a:b].sum())
        if out is None or len(out) < nbytes:
            out = np.empty(nbytes, dtype=np.uint8)
        written = _encode.encode_batch(out, a, b - a, *self._args)
        assert written == nbytes
        return out[:nbytes]

    def write_files(self, files: list, segments: list, file_size: int, chunk: int, threaded: bool) -> None:
        """Encode and write every record where CommitLog.plan put it, each file's end-of-file record after its
        records (files: the segments' MappedFiles, pinned)."""
        runs = []
        for f, seg in zip(files, segments):
            rel = seg.position - seg.file_from_offset
            blank = file_size - (rel + seg.nbytes) if seg.blank_after else 0
            # the descriptor MappedFile.write writes with: the same file, the same page cache
            runs.append((f._open_fd(), rel, seg.first, seg.last, blank))
        self.write(runs, chunk, threaded)

    def write(self, segments: list, chunk: int, threaded: bool) -> None:
        """segments are (fd, position in the file, first record, end record, length of an end-of-file record to
        write after them or 0), in the order to write them. Records are encoded chunk bytes at a time, each
        written while in cache; threaded: by a second thread while the next chunk is encoded."""
        _encode.write_batch(segments, chunk, threaded, *self._args)


class NumpyRecordEncoder:
    """RecordEncoder's numpy/Arrow fallback: the whole batch encoded once by message_codec, sliced per file."""

    def __init__(self, batch: codec.EncodedBatch, queue_offsets: np.ndarray, physical_offsets: np.ndarray,
                 store_timestamp: int):
        self.batch = batch
        self.queue_offsets = _i64(queue_offsets)
        self.physical_offsets = _i64(physical_offsets)
        self.store_timestamp = int(store_timestamp)
        self._whole: Optional[memoryview] = None

    def __call__(self, a: int, b: int, out: Optional[np.ndarray] = None):
        sizes = self.batch.sizes
        assert sizes is not None  # set by record_sizes before a batch is encoded
        if self._whole is None:
            text = properties_text(self.batch.property_parts, len(self.batch))
            self._whole = memoryview(codec.encode_records(self.batch, self.queue_offsets, self.physical_offsets,
                                                          self.store_timestamp, text))
        start = int(sizes[:a].sum())
        return self._whole[start:start + int(sizes[a:b].sum())]

    def write_files(self, files: list, segments: list, file_size: int, chunk: int, threaded: bool) -> None:
        for f, seg in zip(files, segments):
            rel = seg.position - seg.file_from_offset
            if seg.last > seg.first:
                data = self(seg.first, seg.last)
                f.write(rel, data)
                rel += len(data)
            if seg.blank_after:
                f.write(rel, codec.blank_record(file_size - rel))


def new_encoder(batch: codec.EncodedBatch, queue_offsets: np.ndarray, physical_offsets: np.ndarray,
                store_timestamp: int) -> Union[RecordEncoder, NumpyRecordEncoder]:
    """The batch's records, placed, for CommitLog.write."""
    return KERNELS.encoder(batch, queue_offsets, physical_offsets, store_timestamp)


def encode(batch: codec.EncodedBatch, queue_offsets: np.ndarray, physical_offsets: np.ndarray,
           store_timestamp: int):
    """The batch's records back to back."""
    return new_encoder(batch, queue_offsets, physical_offsets, store_timestamp)(0, len(batch))


def encode_record(topic: str, body: bytes, *, queue_id: int = 0, flag: int = 0, queue_offset: int = 0,
                  physical_offset: int = 0, sys_flag: int = 0, born_timestamp: int = 0,
                  born_host=("127.0.0.1", 0), store_timestamp: int = 0, store_host=("127.0.0.1", 0),
                  reconsume_times: int = 0, prepared_transaction_offset: int = 0,
                  properties: str | dict = "") -> bytes:
    """One record, for tools and tests, through the same encoder as put_batch."""
    born = codec.parse_host(born_host)
    store = codec.parse_host(store_host)
    if len(born[0]) == 16:
        sys_flag |= codec.BORNHOST_V6_FLAG
    if len(store[0]) == 16:
        sys_flag |= codec.STOREHOSTADDRESS_V6_FLAG
    props = properties if isinstance(properties, str) else codec.properties_to_string(properties)
    parts = [PropertyPart(None, pa.array([props], pa.string()))]
    batch = codec.EncodedBatch(
        topics=[topic], topic_index=np.zeros(1, np.int32), bodies=pa.array([body], pa.binary()),
        property_parts=parts, queue_ids=np.array([queue_id], np.int32),
        flags=np.array([flag], np.int32), sys_flags=np.array([sys_flag], np.int32),
        born_timestamps=np.array([born_timestamp], np.int64), born_host=born, store_host=store,
        reconsume_times=np.array([reconsume_times], np.int32),
        prepared_offsets=np.array([prepared_transaction_offset], np.int64))
    batch.sizes = record_sizes(batch).sizes
    return bytes(encode(batch, np.array([queue_offset]), np.array([physical_offset]), store_timestamp))
