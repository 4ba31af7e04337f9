"""The pull path: RocketMQ's DefaultMessageStore.getMessage over one consume queue, as decoded messages (a
local reader) or as the records' stored bytes (the broker's pull: sent as they lie)."""
from __future__ import annotations

import struct
import time
from typing import Optional

import numpy as np

from rmq_common import message_codec as codec
from rmq_common import native

from .consume_queue import CQ_STORE_UNIT_SIZE
from .errors import CorruptRecordError, StoreError, UnknownTopicError
from .filter_matches import filter_matches
from .get_message_result import GetMessageResult, GetMessageStatus

MIN = -(2**63)
# the store's own SYSFLAG bits (atomic batches) stay in the store: the high byte of a record's SYSFLAG, ANDed
_KEEP_SYSFLAG_BITS = ~(codec.RESERVED_SYS_FLAGS >> 24) & 0xFF
# a consume-queue unit's commitlog offset and size, read where they lie (numpy's field access costs more per pull)
_UNIT_HEAD = struct.Struct(">qi")


def _batch_full(cfg, size: int, max_msgs: int, buffer_total: int, message_total: int, in_disk: bool) -> bool:
    """RocketMQ's isTheBatchFull: message count and transfer byte/count limits (disk vs memory)."""
    if buffer_total == 0 or message_total == 0:
        return False
    if max_msgs <= message_total:
        return True
    if in_disk:
        return (buffer_total + size > cfg.maxTransferBytesOnMessageInDisk
                or message_total > cfg.maxTransferCountOnMessageInDisk - 1)
    return (buffer_total + size > cfg.maxTransferBytesOnMessageInMemory
            or message_total > cfg.maxTransferCountOnMessageInMemory - 1)


def get_message(store, group, topic, queue_id, offset, max_msgs, message_filter) -> GetMessageResult:
    try:
        cq = store.find_consume_queue(topic, queue_id)
    except UnknownTopicError:
        return GetMessageResult(GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)
    max_offset_py = store.commit_log_max_offset()
    min_offset = cq.min_offset(store.commit_log.min_offset())
    max_offset = cq.max_offset()
    result = GetMessageResult(GetMessageStatus.NO_MESSAGE_IN_QUEUE, offset, min_offset, max_offset)
    if max_offset == 0:
        result.status, result.next_begin_offset = GetMessageStatus.NO_MESSAGE_IN_QUEUE, 0
    elif offset < min_offset:
        result.status, result.next_begin_offset = GetMessageStatus.OFFSET_TOO_SMALL, min_offset
    elif offset == max_offset:
        result.status, result.next_begin_offset = GetMessageStatus.OFFSET_OVERFLOW_ONE, offset
    elif offset > max_offset:
        result.status = GetMessageStatus.OFFSET_OVERFLOW_BADLY
        result.next_begin_offset = min_offset if min_offset == 0 else max_offset
    else:
        # RocketMQ's getIndexBuffer: the units from offset to the end of what is written in that file.
        units = cq.units(offset, min(max_offset, cq.file_end(offset)))
        if len(units) == 0:
            result.status = GetMessageStatus.OFFSET_FOUND_NULL
            result.next_begin_offset = cq.file_end(offset)
            return result
        _fill(store, cq, units, offset, max_msgs, message_filter, max_offset_py, result)
    return result


def _fill(store, cq, units, offset, max_msgs, message_filter, max_offset_py, result) -> None:
    cfg = store.config
    result.status = GetMessageStatus.NO_MATCHED_MESSAGE
    next_phy_file_start = MIN
    max_filter_bytes = max(16000, max_msgs * CQ_STORE_UNIT_SIZE)
    limit = min(len(units), max_filter_bytes // CQ_STORE_UNIT_SIZE)
    offsets = units["offset"][:limit].tolist()
    sizes = units["size"][:limit].tolist()
    codes = units["tags_code"][:limit].tolist()
    buffer_total = 0
    i = 0
    while i < limit:
        offset_py, size_py, tags_code = offsets[i], sizes[i], codes[i]
        if size_py == 0:
            break  # the end of the queue (a unit being written)
        if next_phy_file_start != MIN and offset_py < next_phy_file_start:
            i += 1
            continue
        in_disk = store.is_in_disk(offset_py, max_offset_py)
        if _batch_full(cfg, size_py, max_msgs, buffer_total, len(result.messages), in_disk):
            break
        store.stats["consume_queue_units_scanned"] += 1
        if message_filter is not None and not message_filter.is_matched_by_consume_queue(tags_code):
            if buffer_total == 0:
                result.status = GetMessageStatus.NO_MATCHED_MESSAGE
            i += 1
            continue
        msg = store.commit_log.read_message(offset_py, size_py)
        store.stats["commit_log_records_read"] += 1
        if msg is None:
            if buffer_total == 0:
                result.status = GetMessageStatus.MESSAGE_WAS_REMOVING
            next_phy_file_start = store.commit_log.roll_next_file(offset_py)
            i += 1
            continue
        if message_filter is not None and not message_filter.is_matched_by_commit_log(msg.properties):
            if buffer_total == 0:
                result.status = GetMessageStatus.NO_MATCHED_MESSAGE
            i += 1
            continue
        if msg.topic != cq.topic or msg.queue_id != cq.queue_id or msg.queue_offset != offset + i:
            raise CorruptRecordError(
                f"record belongs to {msg.topic}/{msg.queue_id}@{msg.queue_offset}, but the consume queue "
                f"{cq.topic}/{cq.queue_id} points at it from offset {offset + i}",
                store.commit_log.path_of(offset_py), offset_py)
        result.messages.append(msg)
        buffer_total += size_py
        result.status = GetMessageStatus.FOUND
        next_phy_file_start = MIN
        i += 1
    result.next_begin_offset = offset + i


def queue_min_offset(store, cq, fresh: bool = False) -> int:
    """A queue's min offset, re-read at most once a second: it moves only when retention deletes files (RocketMQ's
    broker keeps it in memory); listing the files on every pull would cost more than the pull."""
    key = (cq.topic, cq.queue_id)
    now = time.monotonic()
    cached = store.min_offset_cache.get(key)
    if fresh or cached is None or now - cached[1] > 1.0:
        cached = store.min_offset_cache[key] = (cq.min_offset(store.commit_log.min_offset()), now)
    return cached[0]


def _property_matches(store, topic: str, queue_id: int, offset: int, candidates: np.ndarray, examined: int,
                      want: int, message_filter) -> tuple[np.ndarray, int]:
    """(unit indexes among candidates whose records' properties match the filter, at most `want`; how many units
    were decided): decided a few thousand units at a time by the vectorised scan and kept for the pulls that
    follow (filter_matches). Units past the last candidate were refused by their tag codes: decided too, out of
    `examined`, so the next pull starts past them (getMessage moves past every unit it examined, matched or
    not)."""
    end = offset + (int(candidates[-1]) + 1 if len(candidates) else 0)
    taken = filter_matches(store).matches(store, topic, queue_id, offset, end, want, message_filter) - offset
    return taken, (int(taken[-1]) + 1 if len(taken) >= want else examined)


def _pull_compiled(store, units: np.ndarray, keep: Optional[np.ndarray], offset: int, max_msgs: int,
                   result: GetMessageResult) -> Optional[np.ndarray]:
    """The usual pull (no filter on properties) in one compiled pass per commitlog file it meets: the records'
    bytes, result made FOUND with its next offset; None for anything else (nothing found, a record that does not
    match its unit, a file gone, no compiled module), which the numpy path answers and words."""
    parts: list[bytes] = []
    at = taken = 0
    room = store.config.maxTransferBytesOnMessageInMemory
    count = len(units)
    while at < count and taken < max_msgs:
        first = at if keep is None else at + int(keep[at:].argmax())
        if keep is not None and not keep[first]:
            break
        # (numpy's stubs do not call an ndarray a Buffer)
        position, size = _UNIT_HEAD.unpack_from(units, first * CQ_STORE_UNIT_SIZE)  # type: ignore[arg-type]
        if size == 0:
            break
        view, base = store.commit_log.view_at(position, unit=True)
        if view is None:
            return None
        got = native.pull_records(units[at:], None if keep is None else keep[at:], view, base, max_msgs - taken,
                                  room, taken == 0, _KEEP_SYSFLAG_BITS)
        if got is None or got[3] >= 0:
            return None
        body, n, examined, _ = got
        if n == 0 or body is None:
            break
        parts.append(body)
        taken += n
        room -= len(body)
        at += examined
        if taken >= max_msgs or at >= count:
            break
        nxt = _UNIT_HEAD.unpack_from(units, at * CQ_STORE_UNIT_SIZE)[0]  # type: ignore[arg-type]
        if base <= nxt < base + len(view):
            break  # ended by the caps or the queue's end, not by the file's
    if not taken:
        return None
    result.status, result.next_begin_offset, result.records = GetMessageStatus.FOUND, offset + at, taken
    return np.frombuffer(parts[0] if len(parts) == 1 else b"".join(parts), dtype=np.uint8)


def get_message_records(store, topic: str, queue_id: int, offset: int, max_msgs: int, message_filter=None,
                        by_properties: bool = False) -> tuple[GetMessageResult, Optional[np.ndarray]]:
    """getMessage as buffers: the consume queue's units filtered by tag code (one vectorised mask), a filter on
    the records' properties (by_properties: SQL92) decided by the vectorised scan, the records' bytes sliced out
    of the commitlog as they lie, each checked for its TOTALSIZE and MAGICCODE so that nothing torn is sent."""
    cq = store.find_consume_queue(topic, queue_id)
    min_offset = queue_min_offset(store, cq)
    max_offset = cq.max_offset()
    if offset < min_offset:  # confirm with the files as they are now
        min_offset = queue_min_offset(store, cq, fresh=True)
    result = GetMessageResult(GetMessageStatus.NO_MESSAGE_IN_QUEUE, offset, min_offset, max_offset)
    if max_offset == 0:
        result.next_begin_offset = 0
        return result, None
    if offset < min_offset:
        result.status, result.next_begin_offset = GetMessageStatus.OFFSET_TOO_SMALL, min_offset
        return result, None
    if offset >= max_offset:
        result.status = GetMessageStatus.OFFSET_OVERFLOW_ONE if offset == max_offset else \
            GetMessageStatus.OFFSET_OVERFLOW_BADLY
        result.next_begin_offset = offset if offset == max_offset else (min_offset if min_offset == 0
                                                                        else max_offset)
        return result, None
    # without a filter the first max_msgs units are the answer; a filter looks further (as getMessage's
    # maxFilterMessageCount lets it)
    ahead = max_msgs if message_filter is None else max(800, max_msgs * 25)
    window = min(max_offset, cq.file_end(offset), offset + ahead)
    units = cq.units(offset, window)
    tag_keep = None if message_filter is None else \
        np.asarray(message_filter.consume_queue_mask(units["tags_code"].astype(np.int64)), dtype=bool)
    # maxTransferCountOnMessageInMemory / maxTransferBytesOnMessageInMemory bound a pull, as in getMessage
    max_msgs = min(max_msgs, store.config.maxTransferCountOnMessageInMemory)
    if not (by_properties and message_filter is not None):
        compiled = _pull_compiled(store, units, tag_keep, offset, max_msgs, result)
        if compiled is not None:
            return result, compiled
    sizes = units["size"].astype(np.int64)
    end = int(np.argmax(sizes == 0)) if (sizes == 0).any() else len(units)
    units, sizes = units[:end], sizes[:end]
    keep = np.ones(len(units), dtype=bool) if tag_keep is None else tag_keep[:end]
    decided = len(units)
    if by_properties and message_filter is not None:
        taken, decided = _property_matches(store, topic, queue_id, offset, np.flatnonzero(keep), len(units),
                                           max_msgs, message_filter)
        units, sizes = units[:decided], sizes[:decided]
    else:
        taken = np.flatnonzero(keep)[:max_msgs]
    if len(taken) > 1:
        fits = int(np.searchsorted(np.cumsum(sizes[taken]), store.config.maxTransferBytesOnMessageInMemory,
                                   side="right"))
        if fits < len(taken):  # cut by bytes: the next pull starts right after the last message sent
            taken = taken[:max(1, fits)]
            max_msgs = len(taken)
    if not len(taken):
        result.status = GetMessageStatus.NO_MATCHED_MESSAGE
        result.next_begin_offset = offset + decided
        return result, None
    try:
        body = store.commit_log.read_records(units["offset"].astype(np.int64)[taken], sizes[taken])
    except CorruptRecordError as e:
        raise StoreError(f"{topic}/{queue_id}@{offset}: {e}") from None
    if body is None:  # removed by retention since the consume queue was read
        result.status, result.next_begin_offset = GetMessageStatus.OFFSET_TOO_SMALL, \
            queue_min_offset(store, cq, fresh=True)
        return result, None
    result.status, result.records = GetMessageStatus.FOUND, len(taken)
    # past the units scanned, as RocketMQ's getMessage: a full batch ends at its last message
    result.next_begin_offset = offset + (int(taken[-1]) + 1 if len(taken) == max_msgs else len(units))
    return result, body
