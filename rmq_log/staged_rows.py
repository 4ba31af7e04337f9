"""The rows a sink writes, as every place messages live takes them: one Arrow batch of STAGED_SCHEMA per put_batch
call (a store's) or send (a broker's), checked row by row as put_batch would check them (validate_staged)."""
from __future__ import annotations

from typing import Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rmq_common.message_codec import MAX_PROPERTIES_LENGTH, check_topic
from rmq_common.native import value_offsets
from rmq_common.numpy_arrow import null_mask, true_where_valid
from rmq_common.properties_column import compact_map

from .errors import RowError

MAP_TYPE = pa.map_(pa.string(), pa.string())

# What the tasks stage and the commit appends: one column per put_batch argument, plus each row's UNIQ_KEY
# (also inside `properties`), which the commit uses to recognise rows already appended by a killed attempt.
STAGED_SCHEMA = pa.schema([
    ("topic", pa.string()), ("body", pa.binary()), ("tags", pa.string()), ("keys", pa.string()),
    ("properties", MAP_TYPE), ("queue_id", pa.int32()), ("sharding_key", pa.string()),
    ("born_timestamp", pa.timestamp("ms")), ("uniq_key", pa.string()),
])


def first_true(mask) -> int:
    arr = true_where_valid(mask) if isinstance(mask, (pa.Array, pa.ChunkedArray)) else mask
    return int(np.flatnonzero(arr)[0])


def entry_offsets(props: pa.MapArray) -> np.ndarray:
    off = value_offsets(props)
    return off - off[0]


def _has_separator(arr: pa.Array) -> Optional[int]:
    """Index of the first value holding RocketMQ's reserved \\x01 or \\x02, else None."""
    if len(arr) == 0 or arr.null_count == len(arr):
        return None
    data = arr.buffers()[2]
    if data is not None:  # fast path: no byte 1 or 2 anywhere in the values' buffer
        raw = np.frombuffer(data, dtype=np.uint8)
        if not np.any((raw == 1) | (raw == 2)):
            return None
    bad = pc.or_(pc.match_substring(arr, "\x01"), pc.match_substring(arr, "\x02"))
    bad = pc.fill_null(bad, False)
    return first_true(bad) if pc.any(bad).as_py() else None


def validate_staged(rows: pa.RecordBatch, max_message_size: int, first_row: int) -> None:
    """The checks put_batch makes on each message, vectorised over a staged batch, so a bad row fails its task
    (with its position) instead of the batch's commit. put_batch checks again when the batch is appended."""
    topic, body, tags, keys, props = (rows.column(i) for i in range(5))
    props = compact_map(props)
    enc = pc.dictionary_encode(topic)
    for i, name in enumerate(enc.dictionary.to_pylist()):
        try:
            check_topic(name)
        except ValueError as e:
            row = first_true(pc.equal(enc.indices, i))
            raise RowError(f"row {first_row + row}: {e}") from None
    lengths = np.diff(value_offsets(body))  # bodies are never null here (to_staged refuses null ones)
    if len(lengths) and lengths.max() > max_message_size:
        row = int(np.flatnonzero(lengths > max_message_size)[0])
        raise RowError(f"row {first_row + row}: body is {int(lengths[row])} bytes, more than maxMessageSize "
                       f"({max_message_size})")
    for name, arr in (("tags", tags), ("keys", keys)):
        at = _has_separator(arr)
        if at is not None:
            raise RowError(f"row {first_row + at}: {name} {arr[at].as_py()!r} contains a reserved separator "
                           "(\\x01 or \\x02)")
    off = entry_offsets(props)
    for name, arr in (("property key", props.keys), ("property value", props.items)):
        j = _has_separator(arr)
        if j is not None:
            row = int(np.searchsorted(off, j, side="right") - 1)
            raise RowError(f"row {first_row + row}: {name} {arr[j].as_py()!r} contains a reserved separator "
                           "(\\x01 or \\x02)")
    # The properties text: key \x01 value \x02 per entry, plus TAGS and KEYS when given; byte counts from the
    # offsets (a row's entries are consecutive, so its keys' bytes are a difference of their offsets).
    key_off, value_off = value_offsets(props.keys).astype(np.int64), value_offsets(props.items).astype(np.int64)
    sizes = (key_off[off[1:]] - key_off[off[:-1]] + value_off[off[1:]] - value_off[off[:-1]]
             + 2 * np.diff(off))
    for name, arr in (("TAGS", tags), ("KEYS", keys)):
        if arr.null_count < len(arr):
            part = np.diff(value_offsets(arr)) + (len(name) + 2)
            if arr.null_count:
                part[null_mask(arr)] = 0
            sizes = sizes + part
    limit = MAX_PROPERTIES_LENGTH
    if len(sizes) and sizes.max() > limit:
        row = int(np.flatnonzero(sizes > limit)[0])
        raise RowError(f"row {first_row + row}: properties are {int(sizes[row])} bytes, more than {limit}")

