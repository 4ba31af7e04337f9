"""RocketMQ's stored message records decoded into Arrow columns: a run of records back to back, as a pull's
response body carries them or the store's scan finds them in its mapped commitlog.

The records go through one compiled pass (rmq_common._native.decode_v4_records): header checks, fixed fields,
message ids, bodies with their CRC, and the properties map with TAGS and KEYS, each record read once while it is in
cache. Records it does not take (IPv6 hosts, anything corrupt) and builds without the compiled module use the numpy
decoder, which gives the same columns and names the error. A caller may ask for some columns only: the others are
not built at all (no properties map, keys lists, host or message-id strings nobody reads), and a body's CRC is
checked where bodies are read.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, ClassVar, Optional, Sequence, Union

import numpy as np
import pyarrow as pa

from . import message_codec as codec
from . import native
from .errors import CorruptRecordError
from .native import WANT_BODY, WANT_IDS, WANT_KEYS, WANT_MAP, WANT_PROPERTIES, WANT_TAGS, crc32_spans
from .numpy_arrow import empty_batch, from_numpy, repeated_string, strings, true_where_valid
from .properties_column import gather_spans, scan_columns, strided_view

SCAN_SCHEMA = pa.schema([
    ("topic", pa.string()), ("queue_id", pa.int32()), ("queue_offset", pa.int64()),
    ("commit_log_offset", pa.int64()), ("msg_id", pa.string()), ("tags", pa.string()),
    ("keys", pa.list_(pa.string())), ("properties", pa.map_(pa.string(), pa.string())), ("body", pa.binary()),
    ("born_timestamp", pa.timestamp("ms")), ("store_timestamp", pa.timestamp("ms")), ("born_host", pa.string()),
    ("store_host", pa.string()), ("sys_flag", pa.int32()), ("flag", pa.int32()), ("reconsume_times", pa.int32()),
    ("body_crc", pa.int32()),
])
SCAN_COLUMNS = tuple(SCAN_SCHEMA.names)
# Asked for by name only: the stored properties as their RocketMQ text, for rewriting records without a map.
EXTRA_FIELDS = {"properties_text": pa.field("properties_text", pa.string())}
# The kernel outputs each column needs (the others come from fixed fields every pass decodes).
_WANT = {"msg_id": WANT_IDS, "body": WANT_BODY, "properties": WANT_MAP, "tags": WANT_TAGS, "keys": WANT_KEYS}

_HEX = np.frombuffer(b"0123456789ABCDEF", dtype=np.uint8)
_HEAD_V4 = codec.header_dtype(False, False)  # TOTALSIZE .. BODY length with IPv4 hosts: 88 bytes


def scan_schema(columns: Optional[Sequence[str]]) -> pa.Schema:
    """SCAN_SCHEMA's fields named by `columns`, in that order (all of them for None)."""
    if columns is None:
        return SCAN_SCHEMA
    unknown = [c for c in columns if c not in SCAN_COLUMNS and c not in EXTRA_FIELDS]
    if unknown or not columns or len(set(columns)) != len(columns):
        raise ValueError(f"scan columns must be distinct names among {', '.join(SCAN_COLUMNS)}; got {list(columns)}")
    return pa.schema([EXTRA_FIELDS[c] if c in EXTRA_FIELDS else SCAN_SCHEMA.field(c) for c in columns])


class _Gather:
    """Big-endian integers at per-record byte positions of one mapped file, one fancy index per field."""

    def __init__(self, buf: np.ndarray):
        self.buf = buf
        self._views: dict = {}

    def view(self, dtype) -> np.ndarray:
        v = self._views.get(dtype)
        if v is None:
            v = self._views[dtype] = strided_view(self.buf, dtype)
        return v

    def ints(self, pos: np.ndarray, width: int, dtype: str) -> np.ndarray:
        v = self.view(dtype)
        pos = np.minimum(pos, len(v) - 1)  # positions past the file are caught by the size checks
        return v[pos].astype(np.int64)

    def raw(self, pos: np.ndarray, width: int) -> np.ndarray:
        v = self.view(f"V{width}")
        return v[np.minimum(pos, len(v) - 1)].view(np.uint8).reshape(len(pos), width)


def decode_pulled(body, topic: str, queue_id: int, where: str, schema: pa.Schema = SCAN_SCHEMA) -> pa.RecordBatch:
    """A pull's response body (one queue's records back to back, as the broker copies them from its commitlog)
    as a RecordBatch of `schema` (SCAN_SCHEMA or some of its columns), checked as a scan checks records;
    CorruptRecordError names `where`."""
    buf = np.frombuffer(body, dtype=np.uint8)
    try:
        starts, sizes = native.record_spans(buf)
    except ValueError as e:
        raise CorruptRecordError(str(e), where, 0) from None
    if not len(starts):
        return empty_batch(schema)
    g = _Gather(buf)
    queue_offsets = g.ints(starts + 20, 8, ">i8")
    offsets = g.ints(starts + 28, 8, ">i8")
    return decode_records(buf, starts, offsets, sizes, queue_offsets, topic, queue_id, where, schema=schema)


def decode_records(buf: np.ndarray, starts: np.ndarray, offsets: np.ndarray, sizes: np.ndarray,
                   queue_offsets: np.ndarray, topic: str, queue_id: Union[int, np.ndarray], path: str,
                   text_filter=None, schema: pa.Schema = SCAN_SCHEMA) -> pa.RecordBatch:
    """The records at buf[starts[i]:] (commit-log offsets[i], queue offsets[i] of topic/queue_id) decoded into
    `schema`'s columns only. queue_id: the queue's id, or an int32 array of each record's (records of several
    queues read in log order)."""
    names = schema.names
    want = 0
    for c in names:
        want |= _WANT.get(c, 0)
    # The compiled pass decodes and checks IPv4-host records (almost all) in one go, with the body CRC unless a
    # text filter will drop most records first; anything else (IPv6 hosts, a corrupt record) takes the numpy
    # decoder, which names the error.
    fast = native.decode_v4_records(buf, starts, offsets, sizes, queue_offsets, queue_id, topic.encode("utf-8"),
                                    want=want if text_filter is None else want & WANT_IDS)
    if fast is not None:
        f, bodies = _fields_v4(fast, offsets, queue_offsets, names), fast[3]
        prop_columns = fast[4] if text_filter is None else None
    else:
        f = _decode_fields(buf, starts, offsets, sizes, queue_offsets, topic, queue_id, path, names)
        bodies, prop_columns = None, None
    if text_filter is not None:
        props_text = gather_spans(buf, f.props_start, f.props_end, pa.string())
        keep = true_where_valid(text_filter(props_text))
        if not keep.all():
            kept = np.flatnonzero(keep)
            f = f.take(kept)
            if isinstance(queue_id, np.ndarray):
                queue_id = queue_id[kept]
    n = len(f.offsets)
    if want & WANT_BODY:
        if not f.crc_checked:
            computed = crc32_spans(buf, f.body_start, f.body_end)
            bad = computed != f.crc
            if bad.any():
                raise CorruptRecordError("body CRC mismatch", path, int(f.offsets[np.flatnonzero(bad)[0]]))
        if bodies is None:
            bodies = gather_spans(buf, f.body_start, f.body_end)
        compressed = (f.sys_flag & codec.COMPRESSED_FLAG) != 0
        if compressed.any():
            bodies = _decompress(bodies, f.sys_flag, compressed, f.offsets, path)
    if prop_columns is None and want & WANT_PROPERTIES:
        prop_columns = scan_columns(buf, f.props_start, f.props_end, want & WANT_PROPERTIES)
    props, tags, keys = prop_columns or (None, None, None)

    def ints(a: np.ndarray) -> pa.Array:
        return from_numpy(a.astype(np.int32, copy=False))

    def millis(a: np.ndarray) -> pa.Array:
        return from_numpy(a.astype(np.int64, copy=False)).cast(pa.timestamp("ms"))

    build: dict[str, Callable[[], pa.Array]] = {
        "topic": lambda: repeated_string(topic, n),
        "queue_id": lambda: from_numpy(queue_id.astype(np.int32, copy=False) if isinstance(queue_id, np.ndarray)
                                       else np.full(n, queue_id, dtype=np.int32)),
        "queue_offset": lambda: from_numpy(f.queue_offsets),
        "commit_log_offset": lambda: from_numpy(f.offsets),
        "msg_id": lambda: f.msg_ids,
        "tags": lambda: tags,
        "keys": lambda: keys,
        "properties": lambda: props,
        "body": lambda: bodies,
        "born_timestamp": lambda: millis(f.born_ts),
        "store_timestamp": lambda: millis(f.store_ts),
        "born_host": lambda: f.born_host,
        "store_host": lambda: f.store_host,
        "sys_flag": lambda: ints(f.sys_flag & ~codec.RESERVED_SYS_FLAGS),  # RocketMQ's flags only, not the store's
        "flag": lambda: ints(f.flag),
        "reconsume_times": lambda: ints(f.reconsume),
        "body_crc": lambda: ints(f.crc),
        "properties_text": lambda: gather_spans(buf, f.props_start, f.props_end, pa.string()),
    }
    return pa.RecordBatch.from_arrays([build[c]() for c in names], schema=schema)


@dataclass
class _Fields:
    """A run's decoded fixed fields and spans: numpy arrays (one per record) and Arrow arrays for the texts."""
    crc_checked: bool
    offsets: np.ndarray
    queue_offsets: np.ndarray
    crc: np.ndarray
    flag: np.ndarray
    sys_flag: np.ndarray
    reconsume: np.ndarray
    born_ts: np.ndarray
    store_ts: np.ndarray
    body_start: np.ndarray
    body_end: np.ndarray
    props_start: np.ndarray
    props_end: np.ndarray
    born_host: Optional[pa.Array]  # None: not asked for
    store_host: Optional[pa.Array]
    msg_ids: Optional[pa.Array]

    ARRAYS: ClassVar[tuple[str, ...]] = ("offsets", "queue_offsets", "crc", "flag", "sys_flag", "reconsume",
                                         "born_ts", "store_ts",
              "body_start", "body_end", "props_start", "props_end")
    ARROW: ClassVar[tuple[str, ...]] = ("born_host", "store_host", "msg_ids")

    def take(self, idx: np.ndarray) -> "_Fields":
        indices = from_numpy(idx)
        return replace(self, **{k: getattr(self, k)[idx] for k in self.ARRAYS},
                       **{k: getattr(self, k).take(indices) for k in self.ARROW if getattr(self, k) is not None})


def _fields_v4(fast, offsets: np.ndarray, queue_offsets: np.ndarray, names: Sequence[str]) -> _Fields:
    ints, longs, ids = fast[:3]
    n = len(offsets)
    crc, flag, sys_flag, reconsume = ints
    born_ts, store_ts, born_key, store_key, body_start, body_end, props_start, props_end = longs
    msg_ids = None if ids is None else codec.id_column(ids, n)
    crc_checked = fast[3] is not None  # bodies were copied, and their CRC checked, in the same pass
    return _Fields(crc_checked=crc_checked, offsets=offsets, queue_offsets=queue_offsets, crc=crc, flag=flag,
                   sys_flag=sys_flag, reconsume=reconsume, born_ts=born_ts, store_ts=store_ts, body_start=body_start,
                   body_end=body_end, props_start=props_start, props_end=props_end,
                   born_host=_hosts_from_keys(born_key) if "born_host" in names else None,
                   store_host=_hosts_from_keys(store_key) if "store_host" in names else None, msg_ids=msg_ids)


def _fields_after_hosts(g: _Gather, rel: np.ndarray, born_v6: np.ndarray, store_v6: np.ndarray, offsets: np.ndarray,
                        names: Sequence[str]):
    """Hosts, message ids (those two only when `names` has them, else None), store time, reconsume times, body
    length and position of records whose hosts may be IPv6 (the fields after BORNHOST move with the hosts'
    lengths)."""
    born_addr_pos = rel + codec.POS_BORNHOST
    born_port_pos = born_addr_pos + np.where(born_v6, 16, 4)
    store_ts_pos = born_port_pos + 4
    store_addr_pos = store_ts_pos + 8
    store_port_pos = store_addr_pos + np.where(store_v6, 16, 4)
    reconsume_pos = store_port_pos + 4
    body_len_pos = reconsume_pos + 4 + 8
    store_port = g.ints(store_port_pos, 4, ">i4")
    born_host = store_host = msg_ids = None
    if "born_host" in names:
        born_host = _hosts_any(g, born_addr_pos, born_v6, g.ints(born_port_pos, 4, ">i4"))
    if "store_host" in names:
        store_host = _hosts_any(g, store_addr_pos, store_v6, store_port)
    if "msg_id" in names:
        store_raw = [bytes(g.raw(store_addr_pos[i:i + 1], 16 if store_v6[i] else 4)[0]) for i in range(len(rel))]
        msg_ids = pa.array([codec.create_message_id(a, int(p), int(o))
                            for a, p, o in zip(store_raw, store_port.tolist(), offsets.tolist())], pa.string())
    return (born_host, store_host, msg_ids, g.ints(store_ts_pos, 8, ">i8"), g.ints(reconsume_pos, 4, ">i4"),
            g.ints(body_len_pos, 4, ">i4"), body_len_pos + 4)


def _decode_fields(buf: np.ndarray, starts: np.ndarray, offsets: np.ndarray, sizes: np.ndarray,
                   queue_offsets: np.ndarray, topic: str, queue_id: Union[int, np.ndarray], path: str,
                   names: Sequence[str]) -> _Fields:
    """The numpy decoder: any host kind, and the named error of the first invalid record (hosts and message ids
    only when `names` has them)."""
    g = _Gather(buf)
    rel = starts

    def fail(bad: np.ndarray, reason: str):
        i = int(np.flatnonzero(bad)[0])
        raise CorruptRecordError(reason, path, int(offsets[i]))

    if (rel + sizes > len(buf)).any():
        fail(rel + sizes > len(buf), "record runs past the end of its file")
    # One gather of the 88-byte header as IPv4 hosts lay it out; fields before BORNHOST are the same for all.
    head = g.view(_HEAD_V4)
    hdr = head[np.minimum(rel, len(head) - 1)]
    total = hdr["total"].astype(np.int64)
    magic = hdr["magic"].astype(np.int64)
    if not np.isin(magic, (codec.MAGIC_V1, codec.MAGIC_V2)).all():
        fail(~np.isin(magic, (codec.MAGIC_V1, codec.MAGIC_V2)), "bad magic code")
    if (total != sizes).any():
        fail(total != sizes, "TOTALSIZE does not match the consume-queue unit's size")
    phys = hdr["physical_offset"].astype(np.int64)
    if (phys != offsets).any():
        fail(phys != offsets, "PHYSICALOFFSET does not match the record's position")
    qid = hdr["queue_id"].astype(np.int64)
    qoff = hdr["queue_offset"].astype(np.int64)
    if (qid != queue_id).any() or (qoff != queue_offsets).any():
        fail((qid != queue_id) | (qoff != queue_offsets), "QUEUEID/QUEUEOFFSET do not match the consume queue")
    crc = hdr["crc"].astype(np.int64)
    flag = hdr["flag"].astype(np.int64)
    sys_flag = hdr["sys_flag"].astype(np.int64)
    born_ts = hdr["born_ts"].astype(np.int64)
    born_v6 = (sys_flag & codec.BORNHOST_V6_FLAG) != 0
    store_v6 = (sys_flag & codec.STOREHOSTADDRESS_V6_FLAG) != 0
    if not (born_v6.any() or store_v6.any()):
        store_port = hdr["store_port"].astype(np.int64)
        born_host = _hosts_v4(hdr["born_addr"], hdr["born_port"].astype(np.int64)) if "born_host" in names else None
        store_host = _hosts_v4(hdr["store_addr"], store_port) if "store_host" in names else None
        msg_ids = _msg_ids_v4(hdr["store_addr"], store_port, offsets) if "msg_id" in names else None
        store_ts = hdr["store_ts"].astype(np.int64)
        reconsume = hdr["reconsume"].astype(np.int64)
        body_len = hdr["body_len"].astype(np.int64)
        body_pos = rel + _HEAD_V4.itemsize
    else:
        born_host, store_host, msg_ids, store_ts, reconsume, body_len, body_pos = \
            _fields_after_hosts(g, rel, born_v6, store_v6, offsets, names)
    rec_end = rel + total
    bad = (body_len < 0) | (body_pos + body_len > rec_end)
    if bad.any():
        fail(bad, "BODY length exceeds the record")
    topic_len_pos = body_pos + body_len
    v2 = magic == codec.MAGIC_V2
    topic_len = np.where(v2, g.ints(topic_len_pos, 2, ">i2"), g.ints(topic_len_pos, 1, ">u1"))
    topic_pos = topic_len_pos + np.where(v2, 2, 1)
    props_len_pos = topic_pos + topic_len
    props_len = g.ints(props_len_pos, 2, ">i2")
    props_pos = props_len_pos + 2
    bad = (props_len < 0) | (props_pos + props_len != rec_end)
    if bad.any():
        fail(bad, "field lengths do not add up to TOTALSIZE")
    topic_bytes = topic.encode("utf-8")
    bad = topic_len != len(topic_bytes)
    if not bad.any() and topic_bytes:
        bad = g.raw(topic_pos, len(topic_bytes)).view(f"V{len(topic_bytes)}").ravel() != np.void(topic_bytes)
    if bad.any():
        fail(bad, f"record's TOPIC is not {topic!r}")
    return _Fields(crc_checked=False, offsets=offsets, queue_offsets=queue_offsets, crc=crc, flag=flag,
                   sys_flag=sys_flag,
                   reconsume=reconsume, born_ts=born_ts, store_ts=store_ts, body_start=body_pos,
                   body_end=body_pos + body_len, props_start=props_pos, props_end=props_pos + props_len,
                   born_host=born_host, store_host=store_host, msg_ids=msg_ids)


def _decompress(bodies: pa.Array, sys_flag, compressed, offsets, path) -> pa.Array:
    values = bodies.to_pylist()
    for i in np.flatnonzero(compressed).tolist():
        try:
            values[i] = codec.decompress_body(values[i], int(sys_flag[i]))
        except Exception as e:
            raise CorruptRecordError(f"body does not decompress: {e}", path, int(offsets[i])) from None
    return pa.array(values, pa.binary())


def _msg_ids_v4(addr: np.ndarray, port: np.ndarray, offsets: np.ndarray) -> pa.Array:
    n = len(offsets)
    raw = np.empty((n, 16), dtype=np.uint8)
    raw[:, :4] = addr
    raw[:, 4:8] = port.astype(">i4").view(np.uint8).reshape(n, 4)
    raw[:, 8:] = offsets.astype(">i8").view(np.uint8).reshape(n, 8)
    chars = np.empty((n, 32), dtype=np.uint8)
    chars[:, 0::2] = _HEX[raw >> 4]
    chars[:, 1::2] = _HEX[raw & 15]
    return codec.id_column(chars, n)


def _hosts_v4(addr: np.ndarray, port: np.ndarray) -> pa.Array:
    """'ip:port' per record from (n, 4) address bytes."""
    return _hosts_from_keys((addr.view(">u4").ravel().astype(np.int64) << 32) | (port & 0xFFFFFFFF))


def _hosts_from_keys(keys: np.ndarray) -> pa.Array:
    """'ip:port' per record from int64 keys (IPv4 address << 32 | port), formatted once per distinct host
    (a batch usually holds one: a single text repeated)."""
    def text(k: int) -> str:
        return codec.format_host(((k >> 32) & 0xFFFFFFFF).to_bytes(4, "big"),
                                 int(np.int32(np.uint32(k & 0xFFFFFFFF))))
    if len(keys) and (keys == keys[0]).all():
        return repeated_string(text(int(keys[0])), len(keys))
    uniq, inverse = np.unique(keys, return_inverse=True)
    return strings([text(k) for k in uniq.tolist()]).take(from_numpy(inverse.astype(np.int32)))


def _hosts_any(g: _Gather, addr_pos: np.ndarray, v6: np.ndarray, port: np.ndarray) -> pa.Array:
    """'ip:port' per record where some hosts are IPv6 (rare: one record at a time)."""
    return pa.array([codec.format_host(bytes(g.raw(addr_pos[i:i + 1], 16 if v6[i] else 4)[0]), int(port[i]))
                     for i in range(len(addr_pos))], pa.string())
