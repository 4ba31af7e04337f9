"""One message put without the batch machinery (the broker's SEND_MESSAGE, MessageStore.put): its record built
with a few struct packs, its queue offset, commitlog position and store timestamp patched in under the write lock.
Only the usual message takes this path; anything else (keys, a sharding key, a transaction half, the schedule
topic, a value out of range, a record that must roll the commitlog file) goes through put_batch, which also words
the errors, so both paths store the same bytes and refuse the same input."""
from __future__ import annotations

import struct
import time
from typing import Callable, Optional, Sequence

import numpy as np

from rmq_common import message_codec as codec
from rmq_common.compiled import _encode

from .append import Placement
from .consume_queue import CQ_STORE_UNIT_SIZE, UNIT_DTYPE
from .delay_levels import SCHEDULE_TOPIC
from .errors import StoreError
from .get_message_result import PutResult
from .tag_hash import tags_hash_code

_HEAD = struct.Struct(">iIiiiqqiq")  # TOTALSIZE .. BORNTIMESTAMP
_PORT = struct.Struct(">i")
_TAIL = struct.Struct(">iqi")  # RECONSUMETIMES, PREPAREDTRANSACTIONOFFSET, BODY length
_OFFSETS = struct.Struct(">qq")  # QUEUEOFFSET, PHYSICALOFFSET at codec.POS_QUEUEOFFSET
_STORE_TS = struct.Struct(">q")
_UNIT = struct.Struct(">qiq")  # a consume-queue unit (UNIT_DTYPE)
_I32_MAX = 2**31 - 1
_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1
_SEPARATORS = (codec.NAME_VALUE_SEPARATOR, codec.PROPERTY_SEPARATOR)


def _is_int(v) -> bool:
    return type(v) is int


def _clean_text(text: str) -> bool:
    return codec.NAME_VALUE_SEPARATOR not in text and codec.PROPERTY_SEPARATOR not in text


def canonical_text(text: Optional[str], properties: dict) -> Optional[str]:
    """text when it is exactly what properties_to_string(properties) writes for properties, its parse (every pair
    whole and kept, each key once, the last pair ended): a send's properties stored as the client sent them, not
    written again; else None."""
    if not text or not properties or text[-1] != codec.PROPERTY_SEPARATOR:
        return None
    n = len(properties)
    if text.count(codec.PROPERTY_SEPARATOR) != n or text.count(codec.NAME_VALUE_SEPARATOR) != n:
        return None
    return text


class OneRecord:
    """A record ready to append but for the fields known under the write lock (set_place)."""

    __slots__ = ("record", "topic", "queue_id", "tags_code", "uniq_key", "_store_ts_at")

    def __init__(self, record: bytearray, topic: str, queue_id: Optional[int], tags_code: int, uniq_key: str,
                 store_ts_at: int):
        self.record = record
        self.topic = topic
        self.queue_id = queue_id
        self.tags_code = tags_code
        self.uniq_key = uniq_key
        self._store_ts_at = store_ts_at

    def set_place(self, queue_id: int, queue_offset: int, position: int, store_ts: int) -> None:
        rec = self.record
        _PORT.pack_into(rec, codec.POS_QUEUEID, queue_id)
        _OFFSETS.pack_into(rec, codec.POS_QUEUEOFFSET, queue_offset, position)
        _STORE_TS.pack_into(rec, self._store_ts_at, store_ts)


def build_one(store, topic, body, tags, keys, properties, queue_id, sharding_key, flag, born_timestamp, sys_flag,
              born_host, reconsume_times, properties_text: Optional[str] = None) -> Optional[OneRecord]:
    """The record of one usual message, or None when it is not one (the caller then takes put_batch).
    properties_text: the properties as a canonical text (canonical_text), stored as it is."""
    if keys is not None or sharding_key is not None or topic == SCHEDULE_TOPIC or not isinstance(topic, str):
        return None
    if not (_is_int(flag) and _is_int(sys_flag) and _is_int(reconsume_times)) or \
            not (born_timestamp is None or _is_int(born_timestamp)) or not (queue_id is None or _is_int(queue_id)):
        return None
    if not (-2**31 <= flag <= _I32_MAX and 0 <= reconsume_times <= _I32_MAX and -2**31 <= sys_flag <= _I32_MAX) \
            or sys_flag & codec.RESERVED_SYS_FLAGS or not codec.is_dispatched(sys_flag) \
            or (queue_id is not None and queue_id < 0):
        return None
    if isinstance(body, str):
        body = body.encode("utf-8")
    elif type(body) is not bytes:
        if not isinstance(body, (bytearray, memoryview)):
            return None
        body = bytes(body)
    if len(body) > store.config.maxMessageSize:
        return None
    try:
        codec.check_topic(topic)
    except ValueError:
        return None
    # properties: the user's (a dict, stored in its order), then TAGS when given apart, then a new UNIQ_KEY
    text = ""
    tag = None
    uniq = None
    if properties and properties_text is not None:
        text = properties_text
        tag = properties.get(codec.PROPERTY_TAGS)
        uniq = properties.get(codec.PROPERTY_UNIQ_KEY)
    elif properties:
        if not isinstance(properties, dict):
            return None
        for k, v in properties.items():
            if type(k) is not str or type(v) is not str or not k or not v or not _clean_text(k) or \
                    not _clean_text(v):
                return None
        text = codec.properties_to_string(properties)
        tag = properties.get(codec.PROPERTY_TAGS)
        uniq = properties.get(codec.PROPERTY_UNIQ_KEY)
    if tags is not None:
        if type(tags) is not str or not tags or tag is not None or not _clean_text(tags):
            return None
        text += f"{codec.PROPERTY_TAGS}{codec.NAME_VALUE_SEPARATOR}{tags}{codec.PROPERTY_SEPARATOR}"
        tag = tags
    if uniq is None:
        uniq = codec.new_uniq_key(store.store_host[0])
        text += f"{codec.PROPERTY_UNIQ_KEY}{codec.NAME_VALUE_SEPARATOR}{uniq}{codec.PROPERTY_SEPARATOR}"
    props = text.encode("utf-8")
    if len(props) > codec.MAX_PROPERTIES_LENGTH:
        return None
    born = store.store_host if born_host is None else codec.parse_host(born_host)
    stored = store.store_host
    if len(born[0]) == 16:
        sys_flag |= codec.BORNHOST_V6_FLAG
    if len(stored[0]) == 16:
        sys_flag |= codec.STOREHOSTADDRESS_V6_FLAG
    if born_timestamp is None:
        born_timestamp = int(time.time() * 1000)
    elif not _I64_MIN <= born_timestamp <= _I64_MAX:
        return None
    raw_topic = topic.encode("utf-8")
    v2 = len(raw_topic) > 127
    size = codec.record_length(len(body), len(raw_topic), len(props), sys_flag, 2 if v2 else 1)
    store_ts_at = codec.POS_BORNHOST + len(born[0]) + 4
    record = bytearray(b"".join((
        _HEAD.pack(size, codec.MAGIC_V2 if v2 else codec.MAGIC_V1, codec.crc32(body), 0, flag, 0, 0, sys_flag,
                   born_timestamp),
        born[0], _PORT.pack(born[1]), _STORE_TS.pack(0), stored[0], _PORT.pack(stored[1]),
        _TAIL.pack(reconsume_times, 0, len(body)), body,
        struct.pack(">h", len(raw_topic)) if v2 else struct.pack(">b", len(raw_topic)), raw_topic,
        struct.pack(">h", len(props)), props)))
    assert len(record) == size
    return OneRecord(record, topic, queue_id, tags_hash_code(tag), uniq, store_ts_at)


def _build_plain_compiled(store, topic: str, body: bytes, properties_text: str, flag: int, sys_flag: int,
                          born_timestamp: int, born_host: tuple[bytes, int], reconsume_times: int,
                          refused: tuple[str, ...]) -> Optional[OneRecord]:
    """build_one's record in one compiled call, for the usual message whose properties come as a canonical text
    that already holds its UNIQ_KEY (what RocketMQ's clients send) and none of the `refused` keys; None for any
    other (the caller then takes the general put), and without the compiled encoder. The text's last separator
    may be missing (the Java client's since 4.9): the record ends it, as the general put stores it."""
    if sys_flag & codec.RESERVED_SYS_FLAGS or not codec.is_dispatched(sys_flag) or topic == SCHEDULE_TOPIC:
        return None
    stored = store.store_host
    built = _encode.one_record(topic, body, properties_text, flag, sys_flag, born_timestamp, born_host[0],
                               born_host[1], stored[0], stored[1], reconsume_times, store.config.maxMessageSize,
                               refused)
    if built is None:
        return None
    record, tags_code, uniq, store_ts_at = built
    return OneRecord(record, topic, None, tags_code, uniq, store_ts_at)


def _build_plain_uncompiled(*args) -> None:
    """Without the compiled encoder every message takes the general put."""
    return None


# Chosen once: build_plain is the compiled builder when rmq_common/_encode.c is built.
build_plain: Callable[..., Optional[OneRecord]] = _build_plain_compiled if _encode is not None \
    else _build_plain_uncompiled


class OneRecords:
    """Single messages' records appended together (Appender.append): put's one, or put_many's several."""

    noun = "message"
    units_full = "a consume-queue unit (the record is in the commitlog: the next writer dispatches it)"
    __slots__ = ("ones", "lone")

    def __init__(self, ones: list[OneRecord]):
        self.ones = ones
        self.lone = len(ones[0].record) if len(ones) == 1 else None  # may be written at the end at once

    def place(self, appender, write_pos: int, store_ts: int) -> Optional[Placement]:
        """Each record's queue (round robin when not given: one.queue_id then holds the choice) and queue offset,
        in the order given, patched into it; None when a queue id is outside its topic's write queues."""
        host, port = appender.store.store_host
        if len(self.ones) == 1:  # put, and a producer with one send in flight: without the grouping by queue
            one = self.ones[0]
            record, topic = one.record, one.topic
            config = appender.topic_for_write(topic)
            if one.queue_id is None:
                one.queue_id = appender.take_round_robin(topic, config.writeQueueNums, 1)
            queue_id = one.queue_id
            if queue_id >= config.writeQueueNums:
                return None
            queue_offset = appender.queue_end(topic, queue_id)
            one.set_place(queue_id, queue_offset, write_pos, store_ts)

            def unit() -> np.ndarray:  # made once the answer is out
                return np.frombuffer(bytearray(_UNIT.pack(write_pos, len(record), one.tags_code)), dtype=UNIT_DTYPE)
            return Placement(write_pos + len(record), np.array([write_pos], dtype=np.int64),
                             [(topic, queue_id, queue_offset, 0, 1)], unit,
                             [PutResult(codec.create_message_id(host, port, write_pos), topic, queue_id, queue_offset,
                                        write_pos, uniq_key=one.uniq_key)], record)
        ones = self.ones
        ends: dict[tuple[str, int], list[int]] = {}  # (topic, queue id) -> [first queue offset, indexes of ones]
        positions = np.empty(len(ones), dtype=np.int64)
        offsets: list[int] = []
        queue_ids: list[int] = []
        pos = write_pos
        for i, one in enumerate(ones):
            config = appender.topic_for_write(one.topic)
            if one.queue_id is None:
                one.queue_id = appender.take_round_robin(one.topic, config.writeQueueNums, 1)
            if one.queue_id >= config.writeQueueNums:
                return None
            queue = ends.get((one.topic, one.queue_id))
            if queue is None:
                queue = ends[(one.topic, one.queue_id)] = [appender.queue_end(one.topic, one.queue_id)]
            offsets.append(queue[0] + len(queue) - 1)
            queue_ids.append(one.queue_id)
            queue.append(i)
            one.set_place(one.queue_id, offsets[-1], pos, store_ts)
            positions[i] = pos
            pos += len(one.record)
        # the units grouped by queue (UnitWrites writes each queue's as one run), packed once the answer is out
        runs = []
        k = 0
        for (topic, queue_id), (first_offset, *members) in ends.items():
            runs.append((topic, queue_id, first_offset, k, len(members)))
            k += len(members)

        def units() -> np.ndarray:
            unit_bytes = bytearray(len(ones) * CQ_STORE_UNIT_SIZE)
            k = 0
            for _, *members in ends.values():
                for i in members:
                    _UNIT.pack_into(unit_bytes, k * CQ_STORE_UNIT_SIZE, int(positions[i]), len(ones[i].record),
                                    ones[i].tags_code)
                    k += 1
            return np.frombuffer(unit_bytes, dtype=UNIT_DTYPE)
        results = [PutResult(msg_id=codec.create_message_id(host, port, int(positions[i])), topic=one.topic,
                             queue_id=queue_ids[i], queue_offset=offsets[i], commit_log_offset=int(positions[i]),
                             uniq_key=one.uniq_key) for i, one in enumerate(ones)]
        return Placement(pos, positions, runs, units, results, b"".join(one.record for one in ones))


def build_many(store, messages: Sequence[dict], ones: Optional[Sequence[Optional[OneRecord]]]) -> Optional[list]:
    """put_many's records (each message a dict of put's arguments; ones: those built already, their queue_id
    None), or None when one of them is not the usual message."""
    built = []
    for i, m in enumerate(messages):
        one = ones[i] if ones is not None else None
        if one is None:
            one = build_one(store, m["topic"], m["body"], m.get("tags"), m.get("keys"), m.get("properties"),
                            m.get("queue_id"), m.get("sharding_key"), m.get("flag", 0), m.get("born_timestamp"),
                            m.get("sys_flag", 0), m.get("born_host"), m.get("reconsume_times", 0),
                            m.get("properties_text"))
            if one is None:
                return None
        else:
            one.queue_id = m.get("queue_id")
        built.append(one)
    return built


def put_one_by_one(store, messages: Sequence[dict], defer_flush: bool) -> list:
    """put_many's messages put one after another: per message its PutResult, or the error put raised for it."""
    out: list = []
    for m in messages:
        args = {k: v for k, v in m.items() if k != "properties_text"}
        if args.get("properties") is None and m.get("properties_text"):
            args["properties"] = codec.string_to_properties(m["properties_text"])
        try:
            out.append(store.put(defer_flush=defer_flush, **args))
        except (ValueError, StoreError) as e:  # this one refused; those before it are stored
            out.append(e)
    return out
