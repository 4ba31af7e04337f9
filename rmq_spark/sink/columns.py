"""What a DataFrame written to format("rmq") may hold, and its Arrow batches turned into put_batch's inputs.

The input schema is checked on the driver when the query starts; rows are converted in the tasks, column by
column in Arrow (no per-row Python), into the STAGED schema (rmq_log.staged_rows) that the log's writes stage and
commit as they are.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    ByteType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from rmq_common.message_codec import PROPERTY_UNIQ_KEY, new_uniq_keys
from rmq_common.native import value_offsets
from rmq_common.numpy_arrow import from_numpy, null_mask, repeated_string, string_scalar, strings, values
from rmq_common.properties_column import compact_map, map_lookup
from rmq_log.staged_rows import MAP_TYPE, STAGED_SCHEMA, entry_offsets, first_true, validate_staged

from ..errors import RmqOptionError, RowError

__all__ = ["MAP_TYPE", "STAGED_SCHEMA", "RowError", "check_input_schema", "to_staged", "validate_staged",
           "with_uniq_keys"]

_INTS = (ByteType, ShortType, IntegerType, LongType)
# column -> (accepted Spark types, how they are described to the user)
ACCEPTED = {
    "body": ((BinaryType, StringType), "binary or string (required; `value` is accepted as its alias)"),
    "topic": ((StringType,), "string (or the `topic` option, which wins)"),
    "tags": ((StringType,), "string"),
    "keys": ((StringType, ArrayType), "string (space-separated) or array<string>"),
    "properties": ((MapType,), "map<string,string>"),
    "queue_id": (_INTS, "int"),
    "sharding_key": ((StringType,), "string"),
    "born_timestamp": ((TimestampType, TimestampNTZType), "timestamp"),
}


def accepted_columns_text() -> str:
    return "; ".join(f"{name}: {text}" for name, (_, text) in ACCEPTED.items())


def check_input_schema(schema: StructType, topic_option: Optional[str]) -> dict:
    """Map canonical column name -> input column index. Raises RmqOptionError listing what is accepted."""
    found: dict = {}
    for i, field in enumerate(schema.fields):
        name = field.name.lower()
        canonical = "body" if name == "value" else name
        if canonical not in ACCEPTED:
            raise RmqOptionError("schema", f"column {field.name!r} is not accepted by the rmq sink. Accepted "
                                           f"columns and types: {accepted_columns_text()}")
        if canonical in found:
            raise RmqOptionError("schema", f"column {field.name!r}: the DataFrame has both `body` and its alias "
                                           "`value` (or the same column twice); keep one")
        types, text = ACCEPTED[canonical]
        dt = field.dataType
        ok = isinstance(dt, types)
        if ok and isinstance(dt, ArrayType):
            ok = isinstance(dt.elementType, StringType)
        if ok and isinstance(dt, MapType):
            ok = isinstance(dt.keyType, StringType) and isinstance(dt.valueType, StringType)
        if not ok:
            raise RmqOptionError("schema", f"column {field.name!r} has type {dt.simpleString()}; the rmq sink "
                                           f"takes {canonical}: {text}. Accepted columns and types: "
                                           f"{accepted_columns_text()}")
        found[canonical] = i
    if "body" not in found:
        raise RmqOptionError("schema", "the DataFrame has no `body` (or `value`) column. Accepted columns and "
                                       f"types: {accepted_columns_text()}")
    if "topic" not in found and topic_option is None:
        raise RmqOptionError("topic", "no topic: give option(\"topic\", name) or a `topic` column")
    return found


def _plain(arr: pa.Array, typ: pa.DataType) -> pa.Array:
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    return arr if arr.type == typ else arr.cast(typ)


def to_staged(batch: pa.RecordBatch, columns: dict, topic_option: Optional[str], address: bytes,
              first_row: int) -> pa.RecordBatch:
    """One input Arrow batch -> a STAGED_SCHEMA batch: types normalised, keys joined, a UNIQ_KEY for every row
    that has none. Raises RowError for values put_batch would refuse that only the rows can show."""
    n = batch.num_rows
    col = {name: batch.column(i) for name, i in columns.items()}

    body = col["body"]
    if pa.types.is_string(body.type) or pa.types.is_large_string(body.type):
        body = _plain(body, pa.string()).view(pa.binary())
    else:
        body = _plain(body, pa.binary())
    if body.null_count:
        raise RowError(f"row {first_row + first_true(body.is_null())}: body is null")

    if topic_option is not None:
        topic = repeated_string(topic_option, n)
    else:
        topic = _plain(col["topic"], pa.string())
        if topic.null_count:
            raise RowError(f"row {first_row + first_true(topic.is_null())}: topic is null (or give the `topic` option)")

    tags = _plain(col["tags"], pa.string()) if "tags" in col else pa.nulls(n, pa.string())
    keys = pa.nulls(n, pa.string())
    if "keys" in col:
        k = col["keys"]
        if pa.types.is_list(k.type) or pa.types.is_large_list(k.type):
            # array<string> whose elements Spark knows are never null arrives as list<string not null>, which
            # binary_join has no kernel for: the plain list type first
            keys = _plain(pc.binary_join(k.cast(pa.list_(pa.string())), string_scalar(" ")), pa.string())
        else:
            keys = _plain(k, pa.string())
    props = compact_map(_plain(col["properties"], MAP_TYPE)) if "properties" in col else None
    if props is not None:
        _check_map_entries(props, first_row)
    props, uniq = with_uniq_keys(props, n, address)

    queue_id = pa.nulls(n, pa.int32())
    if "queue_id" in col:
        q = col["queue_id"]
        qn = values(q) if q.null_count == 0 else None
        if qn is not None and len(qn) and (qn.min() < 0 or qn.max() > 1023):
            i = first_true((qn < 0) | (qn > 1023))
            raise RowError(f"row {first_row + i}: queue_id {int(qn[i])} is outside 0..1023")
        queue_id = _plain(q, pa.int32())
    sharding = _plain(col["sharding_key"], pa.string()) if "sharding_key" in col else pa.nulls(n, pa.string())
    born = pa.nulls(n, pa.timestamp("ms"))
    if "born_timestamp" in col:
        b = col["born_timestamp"]
        if b.type.tz is not None:
            b = b.cast(pa.timestamp(b.type.unit))  # Arrow keeps UTC instants; drop the zone, keep the instant
        born = b.cast(pa.timestamp("ms"), safe=False)
    return pa.RecordBatch.from_arrays([topic, body, tags, keys, props, queue_id, sharding, born, uniq],
                                      schema=STAGED_SCHEMA)



def _check_map_entries(props: pa.MapArray, first_row: int) -> None:
    """Null or empty property keys/values cannot be stored in RocketMQ's property text; say which row (of a
    compact map array)."""
    keys, items = props.keys, props.items
    if len(keys) == 0:
        return
    # lengths from the offsets (a byte count says "empty" as well as a character count, without decoding)
    bad = (np.diff(value_offsets(keys)) == 0) | (np.diff(value_offsets(items)) == 0)
    if items.null_count:
        bad |= null_mask(items)
    if bad.any():
        j = first_true(bad)
        off = entry_offsets(props)
        row = int(np.searchsorted(off, j, side="right") - 1)
        raise RowError(f"row {first_row + row}: property {keys[j].as_py()!r} has a null or empty value "
                       "(RocketMQ stores only non-empty property keys and values)")



def with_uniq_keys(props: Optional[pa.MapArray], n: int, address: bytes):
    """Every row's properties with a UNIQ_KEY (kept where the row gives one, a new client-style id where not),
    and the UNIQ_KEY column."""
    if props is None:
        uniq = new_uniq_keys(n, address)
        offsets = from_numpy(np.arange(n + 1, dtype=np.int32))
        names = repeated_string(PROPERTY_UNIQ_KEY, n)
        return pa.MapArray.from_arrays(offsets, names, uniq), uniq
    props = compact_map(props)
    given = map_lookup(props, PROPERTY_UNIQ_KEY)
    need = null_mask(given)
    k = int(need.sum())
    if k == 0:
        return props, given
    off = entry_offsets(props)
    m = int(off[-1])
    added = np.zeros(n + 1, dtype=np.int64)  # new entries in the rows before each row
    np.cumsum(need, out=added[1:])
    new_off = (off + added).astype(np.int32)
    # gather indices into (old entries + the new ones): an old entry moves by the entries added before its row,
    # a new entry ends its row
    src = np.empty(m + k, dtype=np.int32)
    src[np.arange(m, dtype=np.int64) + np.repeat(added[:-1], np.diff(off))] = np.arange(m, dtype=np.int32)
    ends = new_off[1:][need] - 1
    src[ends] = np.arange(m, m + k, dtype=np.int32)
    new = new_uniq_keys(k, address)
    items = pa.concat_arrays([props.items.cast(pa.string()), new]).take(from_numpy(src))
    src[ends] = m  # every new entry's key is the one name appended after the old keys
    keys = pa.concat_arrays([props.keys.cast(pa.string()), strings([PROPERTY_UNIQ_KEY])]).take(from_numpy(src))
    merged = pa.MapArray.from_arrays(from_numpy(new_off), keys, items)
    if k == n:
        return merged, new
    pos = np.cumsum(need) - 1
    uniq = pc.if_else(from_numpy(need), new.take(from_numpy(np.where(need, pos, 0))), given)
    return merged, uniq

