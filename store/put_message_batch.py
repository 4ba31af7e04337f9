"""A client's MessageBatch body (SEND_BATCH_MESSAGE, as RocketMQ's MessageDecoder.encodeMessages writes it) put
without the batch machinery: one compiled pass plans every message's record (sizes, tags codes, which texts need
their last \\x02 or a UNIQ_KEY) before the write lock, one more writes the records and their consume-queue units
under it. Each message keeps its FLAG and its properties text as sent, as put_batch stores a text. Only the usual
batch takes this path: properties in plain ASCII, no transaction half, every message within the size limits;
anything else (message_batch_plan answers -1) goes through put_batch, which also words the errors."""
from __future__ import annotations

import struct
from typing import Callable, Optional

import numpy as np

from rmq_common import message_codec as codec
from rmq_common.compiled import _encode

from .consume_queue import UNIT_DTYPE

_MB_COLS = 8  # _encode.c's plan row: body, body length, properties, properties length, flag, extra, tags code, size
_MB_SIZE = 7


class MessageBatchPlan:
    """The records of a MessageBatch body, ready to encode once their place is known (encode)."""

    __slots__ = ("topic", "raw_topic", "body", "plan", "n", "sizes", "total", "sys_flag", "born_timestamp",
                 "born_host", "ids")

    def __init__(self, topic: str, raw_topic: bytes, body, plan: np.ndarray, n: int, sys_flag: int,
                 born_timestamp: int, born_host: tuple, ids: Optional[codec.GeneratedIds]):
        self.topic, self.raw_topic, self.body, self.plan, self.n = topic, raw_topic, body, plan, n
        self.sizes = plan[:n, _MB_SIZE]
        self.total = int(self.sizes.sum())
        self.sys_flag, self.born_timestamp, self.born_host, self.ids = sys_flag, born_timestamp, born_host, ids

    def encode(self, queue_id: int, queue_offset: int, write_pos: int, store_ts: int, store_host: tuple):
        """(records back to back, their consume-queue units, their commitlog offsets, the log end after them)."""
        born, stored = self.born_host, store_host
        hosts = born[0] + struct.pack(">iq", born[1], store_ts) + stored[0] + struct.pack(">i", stored[1])
        records = bytearray(self.total)
        units = np.empty(self.n, dtype=UNIT_DTYPE)
        ids = self.ids
        end = _encode.encode_message_batch(records, units.view(np.uint8), self.body, self.plan, self.n,
                                           self.raw_topic, queue_id, queue_offset, write_pos, self.sys_flag,
                                           self.born_timestamp, hosts, ids.head if ids else b"0" * 24,
                                           ids.start if ids else 0)
        return records, units, units["offset"].astype(np.int64), end


def _plan_message_batch_compiled(store, topic: str, body, born_timestamp: int,
                                 born_host) -> Optional[MessageBatchPlan]:
    """The plan of a MessageBatch body, or None when it is not the usual batch (the caller takes put_batch).
    ValueError when the body does not decode."""
    if not isinstance(topic, str):
        return None
    try:
        codec.check_topic(topic)
    except ValueError:
        return None
    raw_topic = topic.encode("utf-8")
    born = store.store_host if born_host is None else codec.parse_host(born_host)
    stored = store.store_host
    sys_flag = (codec.BORNHOST_V6_FLAG if len(born[0]) == 16 else 0) | \
        (codec.STOREHOSTADDRESS_V6_FLAG if len(stored[0]) == 16 else 0)
    plan = np.empty((len(body) // 22 + 1, _MB_COLS), dtype=np.int64)
    n, generated = _encode.message_batch_plan(body, len(raw_topic), len(born[0]) + len(stored[0]),
                                              store.config.maxMessageSize, plan)
    if n <= 0:
        return None
    ids = codec.reserve_uniq_keys(generated, stored[0]) if generated else None
    return MessageBatchPlan(topic, raw_topic, body, plan, n, sys_flag, born_timestamp, born, ids)


def _plan_message_batch_uncompiled(*args) -> None:
    """Without the compiled encoder every batch takes put_batch."""
    return None


# Chosen once: plan_message_batch is the compiled planner when rmq_common/_encode.c is built.
plan_message_batch: Callable[..., Optional[MessageBatchPlan]] = _plan_message_batch_compiled \
    if _encode is not None else _plan_message_batch_uncompiled
