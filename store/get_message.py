"""The pull path: RocketMQ's DefaultMessageStore.getMessage loop over one consume queue."""
from __future__ import annotations

from .consume_queue import CQ_STORE_UNIT_SIZE
from .errors import CorruptRecordError, UnknownTopicError
from .get_message_result import GetMessageResult, GetMessageStatus

MIN = -(2**63)


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
