"""Apache RocketMQ 4.x CommitLog record layout: constants, encode (vectorised) and decode.

Layout (all integers big-endian): TOTALSIZE i32, MAGICCODE i32, BODYCRC i32, QUEUEID i32, FLAG i32,
QUEUEOFFSET i64, PHYSICALOFFSET i64, SYSFLAG i32, BORNTIMESTAMP i64, BORNHOST (4|16 + i32 port),
STORETIMESTAMP i64, STOREHOST (4|16 + i32 port), RECONSUMETIMES i32, PREPARED TRANSACTION OFFSET i64,
BODY (i32 len + bytes), TOPIC (v1: i8 len, v2: i16 len + bytes), PROPERTIES (i16 len + bytes).
"""
from __future__ import annotations

import functools
import ipaddress
import os
import re
import socket
import struct
import threading
import zlib
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

MAGIC_V1 = 0xDAA320A7
MAGIC_V2 = 0xDAA320AB
BLANK_MAGIC = 0xCBD43194
END_FILE_MIN_BLANK_LENGTH = 8

# SYSFLAG bits (org.apache.rocketmq.common.sysflag.MessageSysFlag)
COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x2
TRANSACTION_TYPE_MASK = 0xC
TRANSACTION_NOT_TYPE = 0x0
TRANSACTION_PREPARED_TYPE = 0x4
TRANSACTION_COMMIT_TYPE = 0x8
TRANSACTION_ROLLBACK_TYPE = 0xC
BORNHOST_V6_FLAG = 0x10
STOREHOSTADDRESS_V6_FLAG = 0x20
COMPRESSION_TYPE_MASK = 0x700
COMPRESSION_LZ4 = 0x100
COMPRESSION_ZSTD = 0x200
COMPRESSION_ZLIB = 0x300
# Ours, in bits RocketMQ leaves unused (its MessageSysFlag ends at 0x700; a client ignores higher bits): every
# record of an atomic put_batch carries ATOMIC_BATCH_FLAG and its last one ATOMIC_BATCH_END_FLAG too, so
# recovery finds a batch whose end was never written. The store sets them; a caller cannot.
ATOMIC_BATCH_FLAG = 0x10000000
ATOMIC_BATCH_END_FLAG = 0x20000000
RESERVED_SYS_FLAGS = ATOMIC_BATCH_FLAG | ATOMIC_BATCH_END_FLAG

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
PROPERTY_TAGS = "TAGS"
PROPERTY_KEYS = "KEYS"
PROPERTY_UNIQ_KEY = "UNIQ_KEY"
KEY_SEPARATOR = " "

MAX_TOPIC_LENGTH = 127
MAX_PROPERTIES_LENGTH = 32767
TOPIC_PATTERN = re.compile(r"[%|a-zA-Z0-9_-]+")

# Byte positions of the fixed fields that never move (before BORNHOST).
POS_TOTALSIZE = 0
POS_MAGIC = 4
POS_BODYCRC = 8
POS_QUEUEID = 12
POS_FLAG = 16
POS_QUEUEOFFSET = 20
POS_PHYSICALOFFSET = 28
POS_SYSFLAG = 36
POS_BORNTIMESTAMP = 40
POS_BORNHOST = 48


def is_message_magic(magic: int) -> bool:
    return magic == MAGIC_V1 or magic == MAGIC_V2


def crc32(data) -> int:
    """RocketMQ's UtilAll.crc32: CRC32 masked to a non-negative int32."""
    return zlib.crc32(data) & 0x7FFFFFFF


def transaction_type(sys_flag: int) -> int:
    return sys_flag & TRANSACTION_TYPE_MASK


def is_dispatched(sys_flag: int) -> bool:
    """Only non-transactional and committed messages get a consume-queue unit."""
    t = sys_flag & TRANSACTION_TYPE_MASK
    return t == TRANSACTION_NOT_TYPE or t == TRANSACTION_COMMIT_TYPE


def host_lengths(sys_flag: int) -> tuple[int, int]:
    born = 20 if sys_flag & BORNHOST_V6_FLAG else 8
    store = 20 if sys_flag & STOREHOSTADDRESS_V6_FLAG else 8
    return born, store


def body_length_position(sys_flag: int) -> int:
    """Position of the BODY length field within a record."""
    born, store = host_lengths(sys_flag)
    return POS_BORNHOST + born + 8 + store + 4 + 8


def record_length(body_len: int, topic_len: int, props_len: int, sys_flag: int = 0, version: int = 1) -> int:
    return body_length_position(sys_flag) + 4 + body_len + (1 if version == 1 else 2) + topic_len + 2 + props_len


# ---------------------------------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------------------------------

def properties_to_string(properties: dict | None) -> str:
    if not properties:
        return ""
    return "".join(f"{k}{NAME_VALUE_SEPARATOR}{v}{PROPERTY_SEPARATOR}" for k, v in properties.items())


def string_to_properties(text: str) -> dict[str, str]:
    """RocketMQ's string2messageProperties: pairs with an empty key or value are dropped; a later key wins."""
    result: dict[str, str] = {}
    if not text:
        return result
    for pair in text.split(PROPERTY_SEPARATOR):
        key, sep, value = pair.partition(NAME_VALUE_SEPARATOR)
        if sep and key and value:
            result[key] = value
    return result


def check_property(key: str, value: str, where: str = "") -> None:
    for name, text in (("key", key), ("value", value)):
        if NAME_VALUE_SEPARATOR in text or PROPERTY_SEPARATOR in text:
            raise ValueError(f"{where}property {name} {text!r} contains a reserved separator (\\x01 or \\x02)")


def check_topic(topic) -> None:
    if not isinstance(topic, str) or not topic:
        raise ValueError(f"topic must be a non-empty string, got {topic!r}")
    if len(topic) > MAX_TOPIC_LENGTH:
        raise ValueError(f"topic {topic[:40]!r}... is {len(topic)} characters; at most {MAX_TOPIC_LENGTH} are allowed")
    if not TOPIC_PATTERN.fullmatch(topic):
        raise ValueError(f"topic {topic!r} has characters outside [%|a-zA-Z0-9_-]")


# ---------------------------------------------------------------------------------------------------------------
# Hosts and message ids
# ---------------------------------------------------------------------------------------------------------------

def parse_host(host) -> tuple[bytes, int]:
    """'ip:port', '[v6]:port', or (ip, port) -> (address bytes, port)."""
    if isinstance(host, str):
        return _parse_host_text(host)
    if isinstance(host, tuple):
        ip, port = host
        return ipaddress.ip_address(ip).packed, int(port)
    return _parse_host_text(str(host))


@functools.lru_cache(maxsize=4096)  # a broker parses each client's address once, not per message
def _parse_host_text(text: str) -> tuple[bytes, int]:
    if text.startswith("["):
        ip, _, port = text[1:].partition("]:")
    else:
        ip, _, port = text.rpartition(":")
    return ipaddress.ip_address(ip).packed, int(port)


def format_host(addr: bytes, port: int) -> str:
    if len(addr) == 4:
        return f"{socket.inet_ntop(socket.AF_INET, addr)}:{port}"
    return f"[{socket.inet_ntop(socket.AF_INET6, addr)}]:{port}"


def create_message_id(store_addr: bytes, store_port: int, commit_log_offset: int) -> str:
    """The "offset message id": hex of store host address, port (i32) and physical offset (i64)."""
    return (store_addr + struct.pack(">iq", store_port, commit_log_offset)).hex().upper()


def message_ids_text(store_addr: bytes, store_port: int, commit_log_offsets) -> str:
    """create_message_id of every offset, joined by commas (a batch send's msgId)."""
    offsets = np.asarray(commit_log_offsets, dtype=">i8")
    if not len(offsets):
        return ""
    head = store_addr + struct.pack(">i", store_port)
    raw = np.empty((len(offsets), len(head) + 8), dtype=np.uint8)
    raw[:, :len(head)] = np.frombuffer(head, dtype=np.uint8)
    raw[:, len(head):] = offsets.view(np.uint8).reshape(len(offsets), 8)
    return raw.tobytes().hex(",", raw.shape[1]).upper()  # a comma after every id's bytes


def decode_message_id(msg_id: str) -> tuple[bytes, int, int]:
    raw = bytes.fromhex(msg_id)
    if len(raw) not in (16, 28):
        raise ValueError(f"message id {msg_id!r} is not an offset message id (32 or 56 hex digits)")
    addr = raw[:-12]
    port, offset = struct.unpack(">iq", raw[-12:])
    return addr, port, offset


def local_host_address() -> bytes:
    """This machine's address for STOREHOST/BORNHOST; loopback when nothing better is known."""
    try:
        ip = socket.gethostbyname(socket.gethostname())
        return ipaddress.ip_address(ip).packed
    except (OSError, ValueError):
        return b"\x7f\x00\x00\x01"


# ---------------------------------------------------------------------------------------------------------------
# Decompression
# ---------------------------------------------------------------------------------------------------------------

def decompress_body(body: bytes, sys_flag: int) -> bytes:
    if not sys_flag & COMPRESSED_FLAG:
        return body
    kind = sys_flag & COMPRESSION_TYPE_MASK
    if kind in (0, COMPRESSION_ZLIB):  # 0 is the legacy default, zlib
        return zlib.decompress(body)
    codec = {COMPRESSION_LZ4: "lz4", COMPRESSION_ZSTD: "zstd"}.get(kind)
    if codec is None:
        raise ValueError(f"unknown compression type 0x{kind:x} in SYSFLAG 0x{sys_flag:x}")
    # Both are streaming frame formats whose decompressed size is not stored up front.
    with pa.CompressedInputStream(pa.BufferReader(body), codec) as stream:
        return stream.read()


def body_decompress_error(body, sys_flag: int) -> Optional[str]:
    """Why a body whose SYSFLAG says compressed does not decompress (None if it does, or is not compressed). zlib
    is checked a chunk at a time, its output dropped, so a large expansion costs time but not memory."""
    if not sys_flag & COMPRESSED_FLAG:
        return None
    try:
        if sys_flag & COMPRESSION_TYPE_MASK not in (0, COMPRESSION_ZLIB):
            decompress_body(body, sys_flag)
            return None
        stream = zlib.decompressobj()
        pending = bytes(body)
        while not stream.eof:
            out = stream.decompress(pending, 1 << 20)
            pending = stream.unconsumed_tail
            if not out and not pending:
                break
        return None if stream.eof else "the zlib stream is truncated"
    except Exception as e:  # zlib.error, ValueError, ArrowInvalid...
        return f"{type(e).__name__}: {e}"


def compress_body(body: bytes, kind: int) -> bytes:
    if kind in (0, COMPRESSION_ZLIB):
        return zlib.compress(body)
    codec = {COMPRESSION_LZ4: "lz4", COMPRESSION_ZSTD: "zstd"}[kind]
    sink = pa.BufferOutputStream()
    with pa.CompressedOutputStream(sink, codec) as out:
        out.write(body)
    return sink.getvalue().to_pybytes()


# ---------------------------------------------------------------------------------------------------------------
# Decoding one record
# ---------------------------------------------------------------------------------------------------------------

@dataclass
class MessageExt:
    topic: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    msg_id: str
    tags: Optional[str]
    keys: list
    properties: dict
    body: bytes
    born_timestamp: int
    store_timestamp: int
    born_host: str
    store_host: str
    sys_flag: int
    flag: int
    reconsume_times: int
    body_crc: int
    prepared_transaction_offset: int
    store_size: int = 0
    stored_body: bytes = field(default=b"", repr=False)


_FIXED_HEAD = struct.Struct(">iiiiiqqiq")  # through BORNTIMESTAMP


class RecordFormatError(ValueError):
    """Raised by decode_record; the store wraps it into CorruptRecordError with file and offset."""


def decode_record(buf, pos: int = 0, *, check_crc: bool = True, limit: Optional[int] = None) -> MessageExt:
    """Decode the record at buf[pos:]. Raises RecordFormatError when it does not validate."""
    end = len(buf) if limit is None else limit
    if pos + 8 > end:
        raise RecordFormatError("record header runs past the end of the file")
    (total, magic, body_crc, queue_id, flag, queue_offset, physical_offset, sys_flag,
     born_ts) = _FIXED_HEAD.unpack_from(buf, pos)
    magic &= 0xFFFFFFFF
    if not is_message_magic(magic):
        raise RecordFormatError(f"bad magic code 0x{magic:08x}")
    if total < 0 or pos + total > end:
        raise RecordFormatError(f"TOTALSIZE {total} runs past the end of the file")
    p = pos + POS_BORNHOST
    born_len = 16 if sys_flag & BORNHOST_V6_FLAG else 4
    store_len = 16 if sys_flag & STOREHOSTADDRESS_V6_FLAG else 4
    rec_end = pos + total
    try:
        born_addr = bytes(buf[p:p + born_len])
        p += born_len
        born_port, store_ts = struct.unpack_from(">iq", buf, p)
        p += 12
        store_addr = bytes(buf[p:p + store_len])
        p += store_len
        store_port, reconsume, prepared, body_len = struct.unpack_from(">iiqi", buf, p)
        p += 20
        if body_len < 0 or p + body_len > rec_end:
            raise RecordFormatError(f"BODY length {body_len} exceeds the record")
        body = bytes(buf[p:p + body_len])
        p += body_len
        if magic == MAGIC_V1:
            topic_len = buf[p]
            p += 1
        else:
            (topic_len,) = struct.unpack_from(">h", buf, p)
            p += 2
        topic = bytes(buf[p:p + topic_len]).decode("utf-8")
        p += topic_len
        (props_len,) = struct.unpack_from(">h", buf, p)
        p += 2
        if props_len < 0 or p + props_len != rec_end:
            raise RecordFormatError(f"field lengths do not add up to TOTALSIZE {total}")
        props_text = bytes(buf[p:p + props_len]).decode("utf-8")
    except (struct.error, IndexError, UnicodeDecodeError) as e:
        raise RecordFormatError(f"malformed record: {e}") from None
    if check_crc and crc32(body) != body_crc:
        raise RecordFormatError(f"body CRC mismatch (stored {body_crc}, computed {crc32(body)})")
    props = string_to_properties(props_text)
    keys_text = props.get(PROPERTY_KEYS)
    try:
        plain_body = decompress_body(body, sys_flag)
    except Exception as e:  # a body that does not decompress is corrupt data, not a message
        raise RecordFormatError(f"body does not decompress: {e}") from None
    return MessageExt(
        topic=topic, queue_id=queue_id, queue_offset=queue_offset, commit_log_offset=physical_offset,
        msg_id=create_message_id(store_addr, store_port, physical_offset),
        tags=props.get(PROPERTY_TAGS),
        keys=[k for k in keys_text.split(KEY_SEPARATOR) if k] if keys_text else [],
        properties=props, body=plain_body, born_timestamp=born_ts, store_timestamp=store_ts,
        born_host=format_host(born_addr, born_port), store_host=format_host(store_addr, store_port),
        sys_flag=sys_flag, flag=flag, reconsume_times=reconsume, body_crc=body_crc,
        prepared_transaction_offset=prepared, store_size=total, stored_body=body)


# ---------------------------------------------------------------------------------------------------------------
# Encoding: one batch of records, vectorised
# ---------------------------------------------------------------------------------------------------------------

def header_dtype(born_v6: bool, store_v6: bool) -> np.dtype:
    return np.dtype([
        ("total", ">i4"), ("magic", ">u4"), ("crc", ">i4"), ("queue_id", ">i4"), ("flag", ">i4"),
        ("queue_offset", ">i8"), ("physical_offset", ">i8"), ("sys_flag", ">i4"), ("born_ts", ">i8"),
        ("born_addr", "u1", (16 if born_v6 else 4,)), ("born_port", ">i4"), ("store_ts", ">i8"),
        ("store_addr", "u1", (16 if store_v6 else 4,)), ("store_port", ">i4"), ("reconsume", ">i4"),
        ("prepared", ">i8"), ("body_len", ">i4"),
    ])


@dataclass
class EncodedBatch:
    """Inputs of one append, already validated, as arrays; positions are assigned by the CommitLog."""
    topics: list            # distinct topics in this batch
    topic_index: np.ndarray  # int32: index into topics per message (or one for all)
    bodies: pa.BinaryArray   # stored bodies (compressed if sys_flag says so)
    property_parts: list     # the properties text's pieces (record_encoder.PropertyPart)
    # Per message, or one value for every message (an array of one) for the columns from here on:
    queue_ids: np.ndarray    # int32
    flags: np.ndarray        # int32
    sys_flags: np.ndarray    # int32
    born_timestamps: np.ndarray  # int64 ms
    born_host: tuple
    store_host: tuple
    reconsume_times: np.ndarray
    prepared_offsets: np.ndarray
    sizes: Optional[np.ndarray] = None  # total record sizes
    size_total: Optional[int] = None  # their sum
    kernel_columns: Optional[tuple] = field(default=None, repr=False)  # record_encoder's, built once

    def __len__(self):
        return len(self.bodies)


def topic_parts(topics: list) -> list[bytes]:
    """Length-prefixed topic bytes; version 2 (int16 length) only past 127 bytes, as RocketMQ writes."""
    parts = []
    for t in topics:
        raw = t.encode("utf-8")
        parts.append((struct.pack(">b", len(raw)) if len(raw) <= 127 else struct.pack(">h", len(raw))) + raw)
    return parts


def encode_records(batch: EncodedBatch, queue_offsets: np.ndarray, physical_offsets: np.ndarray,
                   store_timestamp: int, properties: pa.StringArray) -> pa.Buffer:
    """The records of the batch back to back, as one buffer (no end-of-file blanks inside): numpy and Arrow
    column by column, the fallback of rmq_common/_encode.c (record_encoder)."""
    from .native import body_crcs, value_offsets
    n = len(batch)
    born_v6 = len(batch.born_host[0]) == 16
    store_v6 = len(batch.store_host[0]) == 16
    dtype = header_dtype(born_v6, store_v6)
    parts = topic_parts(batch.topics)
    v2 = np.array([len(p) - 1 > 127 for p in parts], dtype=bool)
    head = np.zeros(n, dtype=dtype)
    head["total"] = batch.sizes
    head["magic"] = np.where(v2[batch.topic_index], MAGIC_V2, MAGIC_V1)
    head["crc"] = body_crcs(batch.bodies)
    head["queue_id"] = batch.queue_ids
    head["flag"] = batch.flags
    head["queue_offset"] = queue_offsets
    head["physical_offset"] = physical_offsets
    head["sys_flag"] = batch.sys_flags
    head["born_ts"] = batch.born_timestamps
    head["born_addr"] = np.frombuffer(batch.born_host[0], dtype=np.uint8)
    head["born_port"] = batch.born_host[1]
    head["store_ts"] = store_timestamp
    head["store_addr"] = np.frombuffer(batch.store_host[0], dtype=np.uint8)
    head["store_port"] = batch.store_host[1]
    head["reconsume"] = batch.reconsume_times
    head["prepared"] = batch.prepared_offsets
    head["body_len"] = pc.binary_length(batch.bodies).to_numpy(zero_copy_only=False)
    header_col = pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(dtype.itemsize), n, [None, pa.py_buffer(head.tobytes())]).cast(pa.binary())
    topic_col = pa.array(parts, type=pa.binary()).take(pa.array(np.broadcast_to(batch.topic_index, n)))
    props_bin = properties.cast(pa.binary())
    props_len = pc.binary_length(props_bin).to_numpy(zero_copy_only=False).astype(">i2")
    props_len_col = pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(2), n, [None, pa.py_buffer(props_len.tobytes())]).cast(pa.binary())
    joined = pc.binary_join_element_wise(
        header_col, batch.bodies.cast(pa.binary()), topic_col, props_len_col, props_bin,
        pa.scalar(b"", pa.binary()))
    offsets = value_offsets(joined)
    data = joined.buffers()[2]
    return data.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))


def blank_record(remaining: int) -> bytes:
    """The end-of-file marker: the space left in the file and BLANK_MAGIC."""
    return struct.pack(">iI", remaining, BLANK_MAGIC)


from .compiled import _encode  # noqa: E402 - its loops where they help here (rmq_common/_encode.c); numpy otherwise

_uniq_counter = [0]
_uniq_prefix: dict = {}
_uniq_month = [0.0, 0.0]  # [start, end) of the month generated ids count from (seconds since the epoch)
_uniq_lock = threading.Lock()  # a range of the counter per call, whatever the threads
# Two upper-case hex digits per byte value, so a counter's 4 bytes become its 8 digits in one lookup.
_HEX_PAIRS = np.frombuffer(b"".join(f"{b:02X}".encode() for b in range(256)), dtype=np.uint16)


@dataclass(frozen=True)
class GeneratedIds:
    """n client-style unique ids, not built yet: `head` (24 hex digits), then the low 32 bits of start + i in 8
    hex digits. The compiled encoder writes them straight into the records; column() builds them."""
    head: bytes
    start: int
    n: int
    LENGTH = 32

    def column(self) -> pa.Array:
        return id_column(_id_chars(np.frombuffer(self.head, dtype=np.uint8), self.start, self.n, self.LENGTH), self.n)


def _id_chars_compiled(head: np.ndarray, start: int, n: int, width: int) -> np.ndarray:
    chars = np.empty(width * n, dtype=np.uint8)
    _encode.hex_ids(chars, head, start)
    return chars


def _id_chars_python(head: np.ndarray, start: int, n: int, width: int) -> np.ndarray:
    counters = (np.arange(start, start + n, dtype=np.uint64) & 0xFFFFFFFF).astype(">u4")
    chars = np.empty((n, width), dtype=np.uint8)
    chars[:, :len(head)] = head
    chars[:, len(head):].view(np.uint16)[:] = _HEX_PAIRS[counters.view(np.uint8).reshape(n, 4)]
    return chars


# The generated ids' hex digits (GeneratedIds.column), chosen once.
_id_chars = _id_chars_compiled if _encode is not None else _id_chars_python


def reserve_uniq_keys(n: int, address: bytes) -> GeneratedIds:
    """Client-style unique ids, as RocketMQ's MessageClientIDSetter lays them out: address, pid and a random
    part (the client's class-loader hash), then the milliseconds since the start of the month (local time) and a
    16-bit counter, in 32 upper-case hex digits. The time is where MessageClientIDSetter.getNearlyTimeFromID reads
    it: a Java client's viewMessage(topic, msgId) searches the index from it. Time and counter are one 48-bit
    number, ms << 16 plus a sequence, so a batch of more than 65,536 ids runs a few ms ahead; a batch never
    wraps the low 32 bits (GeneratedIds' part)."""
    import time
    pid = os.getpid()
    key = (address, pid)
    prefix = _uniq_prefix.get(key)
    if prefix is None:  # once per process and address, as the client's fixed part (a forked child gets its own)
        prefix = _uniq_prefix[key] = (address[-4:] + struct.pack(">h", pid & 0x7FFF) + os.urandom(4)).hex().upper()
    now = time.time()
    month = _uniq_month
    if not month[0] <= now < month[1]:  # MessageClientIDSetter.setStartTime: this month's start and the next's
        lt = time.localtime(now)
        month[0] = time.mktime((lt.tm_year, lt.tm_mon, 1, 0, 0, 0, 0, 0, -1))
        month[1] = time.mktime((lt.tm_year + lt.tm_mon // 12, lt.tm_mon % 12 + 1, 1, 0, 0, 0, 0, 0, -1))
    month_ms = max(0, int((now - month[0]) * 1000))
    with _uniq_lock:
        value = max(_uniq_counter[0], month_ms << 16)
        if value >> 48 or (value - (month_ms << 16)) >> 40:  # a new month (or a counter far ahead): start again
            value = month_ms << 16
        if (value & 0xFFFFFFFF) + n > 1 << 32:
            value = ((value >> 32) + 1) << 32
        _uniq_counter[0] = value + n
    return GeneratedIds((prefix + f"{value >> 32 & 0xFFFF:04X}").encode(), value & 0xFFFFFFFF, n)


def new_uniq_key(address: bytes) -> str:
    """One new client-style unique id (reserve_uniq_keys) as text."""
    ids = reserve_uniq_keys(1, address)
    return f"{ids.head.decode()}{ids.start & 0xFFFFFFFF:08X}"


def new_uniq_keys(n: int, address: bytes) -> pa.Array:
    """n new client-style unique ids (reserve_uniq_keys) as a string column."""
    return reserve_uniq_keys(n, address).column()


def id_column(chars, n: int) -> pa.Array:
    """n ids of 32 characters (message ids, unique ids), back to back in chars, as an Arrow string array."""
    bounds = np.arange(0, 32 * n + 1, 32, dtype=np.int32)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(bounds), pa.py_buffer(chars)])
