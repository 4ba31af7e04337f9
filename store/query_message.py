"""Messages found through the index (RocketMQ's DefaultMessageStore.queryMessage): the index gives commitlog
offsets of entries whose hash is `topic#key`'s; each record there is read, and checked against the key."""
from __future__ import annotations

from rmq_common import message_codec as codec

from .errors import CorruptRecordError, MissingFileError


def query_records(store, topic: str, key: str, max_num: int, begin: int, end: int) -> tuple[bytes, int, int]:
    """MessageStore.query_records."""
    out: list[bytes] = []
    last_ts = last_phy = 0
    for _ in range(3):
        res = store.query_offsets(topic, key, max_num, begin, end)
        if not res.offsets:
            break
        last_ts, last_phy = res.index_last_update_timestamp, res.index_last_update_phy_offset
        for m, offset in enumerate(sorted(res.offsets)):
            try:
                hit = store.look_message_by_offset(offset) if offset >= store.commit_log.min_offset() else None
            except (codec.RecordFormatError, MissingFileError, CorruptRecordError):
                hit = None
            if hit is None:
                continue
            if m == 0:
                end = hit[0].store_timestamp
            out.append(hit[1])
        if out or end < begin:
            break
    return b"".join(out), last_ts, last_phy


def query_message(store, topic: str, key: str, max_num: int, begin: int, end: int,
                  unique_key: bool) -> list[codec.MessageExt]:
    """MessageStore.query_message."""
    if max_num < 1:
        raise ValueError(f"max_num must be >= 1, got {max_num}")
    found: list[codec.MessageExt] = []
    seen: set = set()
    store.flush_index()
    for offset in store.index.query_offset(topic, key, max(max_num, store.config.maxMsgsNumBatch) * 4,
                                          begin, end).offsets:
        if offset in seen or offset < store.commit_log.min_offset():
            continue
        seen.add(offset)
        try:
            hit = store.look_message_by_offset(offset)
        except (codec.RecordFormatError, MissingFileError, CorruptRecordError):
            continue  # an entry past a crash's cut, or into a removed file
        if hit is None:
            continue
        msg = hit[0]
        uniq = msg.properties.get(codec.PROPERTY_UNIQ_KEY)
        if msg.topic != topic or not begin <= msg.store_timestamp <= end or \
                not (uniq == key if unique_key else key in msg.keys):
            continue
        found.append(msg)
        if len(found) >= max_num:
            break
    return found
