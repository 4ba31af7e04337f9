"""Offsets by time: RocketMQ's ConsumeQueue.getOffsetInQueueByTime.

A binary search over the queue's units; each probe reads one record's STORETIMESTAMP from the commitlog (after
checking the record's magic, size and position), so a search touches log2(n) records and nothing else.
"""
from __future__ import annotations

import struct

from rmq_common import message_codec as codec

from .errors import CorruptRecordError

_HEAD = struct.Struct(">iIiiiqqi")  # TOTALSIZE .. SYSFLAG


def _store_timestamp(store, offset: int, size: int):
    """STORETIMESTAMP of the record at offset, or None when its file was deleted (it is older than any kept)."""
    view, base = store.commit_log.view_at(offset, unit=True)
    if view is None:
        return None
    rel = offset - base
    if rel + size > len(view) or size < codec.POS_BORNHOST + 8 + 8:
        raise CorruptRecordError(f"consume-queue unit (size {size}) runs past the end of its commitlog file",
                                 store.commit_log.path_of(offset), offset)
    total, magic, _crc, _qid, _flag, _qoff, phys, sys_flag = _HEAD.unpack_from(view, rel)
    if not codec.is_message_magic(magic) or total != size or phys != offset:
        raise CorruptRecordError(
            f"record (magic 0x{magic:08x}, TOTALSIZE {total}, PHYSICALOFFSET {phys}) does not match its "
            f"consume-queue unit (size {size})", store.commit_log.path_of(offset), offset)
    born_len = 20 if sys_flag & codec.BORNHOST_V6_FLAG else 8
    (ts,) = struct.unpack_from(">q", view, rel + codec.POS_BORNHOST + born_len)
    return ts


def offset_in_queue_by_time(store, topic: str, queue_id: int, timestamp_ms: int) -> int:
    """The earliest queue offset whose STORETIMESTAMP >= timestamp_ms; the max offset when all are older.

    Store timestamps rise with the commitlog position (they are taken under the append lock), so the
    predicate "stored at or after timestamp_ms" is monotonic over a queue and a binary search finds its edge.
    """
    timestamp_ms = int(timestamp_ms)
    cq = store.find_consume_queue(topic, queue_id)
    lo = cq.min_offset(store.commit_log.min_offset())
    hi = cq.max_offset()
    while lo < hi:
        mid = (lo + hi) // 2
        unit = cq.units(mid, mid + 1)
        if len(unit) == 0 or int(unit["size"][0]) == 0:
            hi = mid  # the end moved under us (truncation): search what is left
            continue
        ts = _store_timestamp(store, int(unit["offset"][0]), int(unit["size"][0]))
        if ts is None or ts < timestamp_ms:
            lo = mid + 1
        else:
            hi = mid
    return lo
