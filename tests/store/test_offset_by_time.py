"""offset_for_timestamp: RocketMQ's getOffsetInQueueByTime over STORETIMESTAMP."""
from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytest  # noqa: E402
from conftest_durability import SMALL  # noqa: E402

from store import MessageStore, StoreConfig, UnknownTopicError  # noqa: E402


def _stamped_store(path, groups=6, per_group=7):
    """Batches appended a few ms apart: each batch shares one STORETIMESTAMP."""
    s = MessageStore(path, StoreConfig(**SMALL))
    for g in range(groups):
        s.put_batch("Time", [b"%d-%d" % (g, i) for i in range(per_group)], queue_id=0)
        time.sleep(0.005)
    stamps = [m.store_timestamp for m in _all(s)]
    return s, stamps


def _all(s):
    out, off = [], 0
    while off < s.max_offset("Time", 0):
        r = s.get_message("g", "Time", 0, off, 32)
        out += r.messages
        off = r.next_begin_offset
    return out


def test_earliest_offset_at_or_after_the_timestamp(tmp_path):
    s, stamps = _stamped_store(tmp_path)
    with s:
        assert stamps == sorted(stamps) and len(set(stamps)) > 3
        probes = sorted({p for ts in stamps for p in (ts - 1, ts, ts + 1)})
        for probe in probes:
            expected = next((i for i, t in enumerate(stamps) if t >= probe), len(stamps))
            assert s.offset_for_timestamp("Time", 0, probe) == expected, probe


def test_bounds(tmp_path):
    s, stamps = _stamped_store(tmp_path)
    with s:
        assert s.offset_for_timestamp("Time", 0, 0) == 0
        assert s.offset_for_timestamp("Time", 0, stamps[-1] + 1) == s.max_offset("Time", 0) == len(stamps)
        s.create_topic("Empty", 1)
        assert s.offset_for_timestamp("Empty", 0, 0) == 0
        with pytest.raises(UnknownTopicError):
            s.offset_for_timestamp("Nope", 0, 0)


def test_after_retention_the_answer_starts_at_the_new_minimum(tmp_path):
    s, stamps = _stamped_store(tmp_path, groups=10, per_group=20)
    with s:
        s.clean_expired(now=time.time() + 1000 * 3600)
        m = s.min_offset("Time", 0)
        assert m > 0
        assert s.offset_for_timestamp("Time", 0, 0) == m
        assert s.offset_for_timestamp("Time", 0, stamps[-1]) == stamps.index(stamps[-1])


def test_reads_only_log2_records(tmp_path):
    s, stamps = _stamped_store(tmp_path, groups=8, per_group=16)
    with s:
        from store import offset_by_time
        calls = []
        real = offset_by_time._store_timestamp
        offset_by_time._store_timestamp = lambda *a: calls.append(a) or real(*a)
        try:
            s.offset_for_timestamp("Time", 0, stamps[70])
        finally:
            offset_by_time._store_timestamp = real
        assert len(calls) <= 8  # ceil(log2(128)) + 1
