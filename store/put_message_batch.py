"""A client's MessageBatch body (SEND_BATCH_MESSAGE, as RocketMQ's MessageDecoder.encodeMessages writes it) put
without the batch machinery: one compiled pass plans every message's record (sizes, tags codes, which texts need
their last \\x02 or a UNIQ_KEY) before the write lock, one more writes the records and their consume-queue units
under it. Each message keeps its FLAG and its properties text as sent, as put_batch stores a text. Only the usual
batch takes this path: properties in plain ASCII, no transaction half, every message within the size limits;
anything else (message_batch_plan answers -1) goes through put_batch, which also words the errors."""
from __future__ import annotations

import struct
from typing import Callable, Optional, Sequence

import numpy as np

from rmq_common import message_codec as codec
from rmq_common.compiled import _encode

from .append import Placement
from .consume_queue import UNIT_DTYPE
from .errors import StoreError
from .put_batch import PutBatchResult

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


class MessageBatches:
    """MessageBatch bodies appended together (Appender.append), each with its queue id: put_message_batch's one,
    or put_message_batches' several."""

    noun = "message"
    units_full = "a consume-queue unit (the record is in the commitlog: the next writer dispatches it)"
    lone = None
    __slots__ = ("plans", "queue_ids")

    def __init__(self, plans: list[MessageBatchPlan], queue_ids: list[int]):
        self.plans, self.queue_ids = plans, queue_ids

    def place(self, appender, write_pos: int, store_ts: int) -> Optional[Placement]:
        """Each batch's consecutive queue offsets, in the order given, and its records encoded; None when a queue
        id is outside its topic's write queues."""
        store_host = appender.store.store_host
        next_offset: dict[tuple[str, int], int] = {}
        records, units, positions, runs, placed = [], [], [], [], []
        pos, first = write_pos, 0
        for plan, queue_id in zip(self.plans, self.queue_ids):
            config = appender.topic_for_write(plan.topic)
            if not 0 <= queue_id < config.writeQueueNums:
                return None
            queue_offset = next_offset.get((plan.topic, queue_id))
            if queue_offset is None:
                queue_offset = appender.queue_end(plan.topic, queue_id)
            encoded, batch_units, batch_positions, pos = plan.encode(queue_id, queue_offset, pos, store_ts,
                                                                     store_host)
            next_offset[(plan.topic, queue_id)] = queue_offset + plan.n
            runs.append((plan.topic, queue_id, queue_offset, first, plan.n))
            first += plan.n
            records.append(encoded)
            units.append(batch_units)
            positions.append(batch_positions)
            placed.append((plan, queue_id, queue_offset, batch_positions))
        all_units = np.empty(first, dtype=UNIT_DTYPE)  # np.concatenate would turn them to native byte order
        for (_, _, _, at, n), batch_units in zip(runs, units):
            all_units[at:at + n] = batch_units
        results = [PutBatchResult([plan.topic], np.zeros(1, np.int32), np.full(plan.n, queue_id, np.int32),
                                  np.arange(queue_offset, queue_offset + plan.n, dtype=np.int64), at, store_host,
                                  None) for plan, queue_id, queue_offset, at in placed]
        return Placement(pos, np.concatenate(positions), runs, all_units, results, b"".join(records))


def plan_all(store, batches: Sequence[tuple]) -> Optional[MessageBatches]:
    """put_message_batches' batches, each (topic, body, queue id, born timestamp, born host), planned together;
    None when one is not the usual batch or its body does not decode."""
    try:
        plans = [plan_message_batch(store, topic, body, born_ts, born_host)
                 for topic, body, _, born_ts, born_host in batches]
    except ValueError:
        return None
    ready = [p for p in plans if p is not None]
    if not ready or len(ready) != len(plans):
        return None
    return MessageBatches(ready, [b[2] for b in batches])


def put_batches_one_by_one(store, batches: Sequence[tuple], defer_flush: bool) -> list:
    """put_message_batches' batches put one after another: per batch its PutBatchResult, the error its put
    raised, or None from the first that is not the usual batch on."""
    out: list = []
    for topic, body, queue_id, born_ts, born_host in batches:
        if out and out[-1] is None:
            out.append(None)
            continue
        try:
            out.append(store.put_message_batch(topic, body, queue_id, born_timestamp=born_ts, born_host=born_host,
                                               defer_flush=defer_flush))
        except (ValueError, StoreError) as e:  # this one refused; those before it are stored
            out.append(e)
    return out
