"""MessageBatch bodies (MessageDecoder.encodeMessages) built from Arrow columns without a Python loop per message:
each message is TOTALSIZE, MAGICCODE, BODYCRC, FLAG (i32 each), BODY with its i32 length, PROPERTIES with its
i16 length; Arrow's element-wise binary join lays them back to back."""
from __future__ import annotations

from typing import Mapping, Optional, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rmq_common.numpy_arrow import repeated_string, string_scalar, values
from rmq_common.properties_column import properties_to_strings

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
MAX_PROPERTIES_LENGTH = 32767  # an i16 in the frame


def properties_text(props: Optional[pa.MapArray], n: int,
                    extra: Mapping[str, Union[str, pa.Array, None]]) -> pa.StringArray:
    """Each message's properties in RocketMQ's text form: the map's entries, then `extra` (a value for all, or a
    column; a null leaves the property out)."""
    empty = string_scalar("")
    parts = [properties_to_strings(props).cast(pa.string()) if props is not None else repeated_string("", n)]
    for key, value in extra.items():
        if value is None:
            continue
        if isinstance(value, str):
            parts.append(repeated_string(f"{key}{NAME_VALUE_SEPARATOR}{value}{PROPERTY_SEPARATOR}", n))
            continue
        joined = pc.binary_join_element_wise(string_scalar(key + NAME_VALUE_SEPARATOR), value.cast(pa.string()),
                                             string_scalar(PROPERTY_SEPARATOR), empty)
        parts.append(pc.fill_null(joined, empty))
    if len(parts) == 1:
        return parts[0]
    return pc.binary_join_element_wise(*parts, empty)


def encode_message_batch(bodies: pa.Array, properties: pa.StringArray, flags: Optional[np.ndarray] = None) -> bytes:
    """The MessageBatch body of these messages (BODYCRC 0, as RocketMQ's clients send it: the broker computes it)."""
    n = len(bodies)
    body_len = values(pc.binary_length(bodies)).astype(np.int64)  # a null body's is refused below
    text = properties.cast(pa.binary())
    text_len = values(pc.binary_length(text)).astype(np.int64)
    if n and text_len.max() > MAX_PROPERTIES_LENGTH:
        i = int(np.argmax(text_len))
        raise ValueError(f"message {i}: properties of {int(text_len[i])} bytes (at most {MAX_PROPERTIES_LENGTH})")
    head = np.zeros(n, dtype=[("total", ">i4"), ("magic", ">i4"), ("crc", ">i4"), ("flag", ">i4"), ("blen", ">i4")])
    head["total"] = 4 * 5 + body_len + 2 + text_len
    head["flag"] = 0 if flags is None else flags
    head["blen"] = body_len
    tail = np.zeros(n, dtype=">i2")
    tail[:] = text_len
    heads = pa.FixedSizeBinaryArray.from_buffers(pa.binary(20), n, [None, pa.py_buffer(head.tobytes())])
    lens = pa.FixedSizeBinaryArray.from_buffers(pa.binary(2), n, [None, pa.py_buffer(tail.tobytes())])
    joined = pc.binary_join_element_wise(heads.cast(pa.binary()), bodies.cast(pa.binary()), lens.cast(pa.binary()),
                                         text, string_scalar("").cast(pa.binary()))
    if joined.null_count:
        raise ValueError(f"message {pc.index(joined.is_null(), True).as_py()}: a null body")
    offsets = np.frombuffer(joined.buffers()[1], dtype=np.int32, count=n + 1, offset=joined.offset * 4)
    return joined.buffers()[2].slice(int(offsets[0]), int(offsets[-1] - offsets[0])).to_pybytes()
