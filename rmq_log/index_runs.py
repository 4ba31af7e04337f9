"""A store directory's reads answered from its index (RocketMQ's IndexFile) instead of a scan: a key (the messages
whose keys hold it), a unique key (the message whose UNIQ_KEY property is it) and offset msgIds (an offset msgId
names its record's commitlog offset: no index needed). The records found become runs of queue offsets, read by the
usual scan; the caller's row mask then keeps exactly the rows the same filter keeps on a scan (the index holds key
hashes, and may hold entries a crash's cut left behind)."""
from __future__ import annotations

import logging
from typing import Optional

from rmq_common import message_codec as codec
from store import StoreError

log = logging.getLogger(__name__)

_ALL = 2**31 - 1  # every entry the index has for a key


def lookup_runs(store, ranges: list, key: Optional[str], uniq_key: Optional[str],
                msg_ids: Optional[frozenset]) -> Optional[list]:
    """(topic, queue, start, end) runs of the queue offsets the lookups find within `ranges` (each (topic, queue,
    start, end)); None when there is nothing to look up, or the index cannot answer (a store without an index, or
    whose index does not reach back to the log's first record): then the read scans."""
    if key is None and uniq_key is None and msg_ids is None:
        return None
    bounds = {(t, q): (s, e) for t, q, s, e in ranges}
    topics = sorted({t for t, _ in bounds})
    offsets: Optional[set] = None
    for k in (key, uniq_key):
        if k is None:
            continue
        if not store.index.covers_log():
            log.info("rmq: the store's index does not cover its log; the key lookup scans instead")
            return None
        found = set()
        for t in topics:
            found.update(store.index.query_offset(t, k, _ALL, 0, 2**63 - 1).offsets)
        offsets = found if offsets is None else offsets & found
    if msg_ids is not None:
        found = set()
        for m in msg_ids:
            try:
                found.add(codec.decode_message_id(m)[2])
            except ValueError:
                pass  # not an offset msgId: no row has it
        offsets = found if offsets is None else offsets & found
    assert offsets is not None
    lo, hi = store.commit_log_min_offset(), store.commit_log_max_offset()
    per_queue: dict[tuple, set] = {}
    for off in sorted(o for o in offsets if lo <= o < hi):
        try:
            hit = store.look_message_by_offset(off)
        except (codec.RecordFormatError, StoreError, ValueError, OSError):
            continue  # an entry into a cut tail or a removed file
        if hit is None:
            continue
        m = hit[0]
        span = bounds.get((m.topic, m.queue_id))
        if span is not None and span[0] <= m.queue_offset < span[1]:
            per_queue.setdefault((m.topic, m.queue_id), set()).add(m.queue_offset)
    runs = []
    for (t, q), found_offsets in sorted(per_queue.items()):
        ordered = sorted(found_offsets)
        start = prev = ordered[0]
        for o in ordered[1:]:
            if o != prev + 1:
                runs.append((t, q, start, prev + 1))
                start = o
            prev = o
        runs.append((t, q, start, prev + 1))
    log.info("rmq: the index found %d message(s) in %d run(s)", sum(len(v) for v in per_queue.values()), len(runs))
    return runs
