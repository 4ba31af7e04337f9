"""Windows of the log across a topic's queues (MessageStore.log_windows) and their read in log order
(MessageStore.scan_queues): every offset of every range read exactly once, as the queue's own scan reads it."""
from __future__ import annotations

import struct

import numpy as np
import pytest
from python_kernels import use_python_kernels
from store_fill import fill_store

from filters import MessageFilter
from rmq_common import native
from store import CorruptRecordError, MessageStore, StoreConfig

CFG = StoreConfig(mappedFileSizeCommitLog=64 * 1024)  # records of one window span several files
TAGS = ["A", "B", "C", None]


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    """Topic T's 4 queues filled unevenly (queue 3 gets half the messages), written in three rounds with topic U
    between them, over 64 KiB commitlog files."""
    p = tmp_path_factory.mktemp("windows")
    with MessageStore(p, CFG) as s:
        s.create_topic("T", 4)
        s.create_topic("U", 2)
        for start, n in ((0, 1200), (1200, 900), (2100, 700)):
            fill_store(s, n, topic="T", body=b"t%05d" + b"x" * 50, start=start,
                       queue_id=lambda i: 3 if i % 2 else (i // 2) % 3, tags=[TAGS[i % 4] for i in range(n)],
                       properties=[{"i": str(start + i)} for i in range(n)])
            fill_store(s, 300, topic="U", body=b"u%05d", queue_id=lambda i: i % 2)
    return p


def key(row):
    return row["queue_id"], row["queue_offset"]


def per_queue_rows(s, ranges, message_filter=None):
    return sorted((r for q, a, b in ranges for batch in s.scan("T", q, a, b, message_filter=message_filter)
                   for r in batch.to_pylist()), key=key)


@pytest.mark.parametrize("count", [1, 2, 3, 5, 9])
def test_windows_hold_every_offset_once_in_disjoint_stretches_of_the_log(path, count):
    with MessageStore(path, read_only=True) as s:
        ranges = [(q, 7 * q, s.max_offset("T", q) - q) for q in range(4)]
        windows = s.log_windows("T", ranges, count)
        assert len(windows) == count
        pieces = sorted(p for w in windows for p in w)
        for q, a, b in ranges:  # each range cut into consecutive pieces, nothing left out or read twice
            mine = [(s_, e_) for q_, s_, e_ in pieces if q_ == q]
            assert mine[0][0] == a and mine[-1][1] == b and all(x[1] == y[0] for x, y in zip(mine, mine[1:]))
        sizes = [sum(e - a for _, a, e in w) for w in windows]
        assert max(sizes) - min(sizes) <= 0.1 * sum(sizes) / count + 8, sizes
        spans = []
        for w in windows:
            got = [r for batch in s.scan_queues("T", w, None, 500) for r in batch.to_pylist()]
            offsets = [r["commit_log_offset"] for r in got]
            assert offsets == sorted(offsets)  # log order, hence each queue's in its offset order
            spans.append((offsets[0], offsets[-1]))
        assert all(x[1] < y[0] for x, y in zip(spans, spans[1:]))  # one stretch of the log each, in turn
        rows = sorted((r for w in windows for batch in s.scan_queues("T", w, None, 500) for r in batch.to_pylist()),
                      key=key)
        assert rows == per_queue_rows(s, ranges)


@pytest.mark.skipif(not native.available(), reason="rmq_common._native is not built here")
def test_the_compiled_pass_decodes_a_window_of_several_queues_whole(path, monkeypatch):
    decode = native.decode_v4_records

    def compiled_only(*args, **kwargs):
        out = decode(*args, **kwargs)
        assert out is not None, "the compiled pass left records of several queues to the numpy decoder"
        return out

    with MessageStore(path, read_only=True) as s:
        ranges = [(q, 0, s.max_offset("T", q)) for q in range(4)]
        want = per_queue_rows(s, ranges)
        monkeypatch.setattr(native, "decode_v4_records", compiled_only)
        assert sorted((r for batch in s.scan_queues("T", ranges, None, 1000) for r in batch.to_pylist()),
                      key=key) == want


def test_the_numpy_decoder_reads_a_window_as_the_compiled_pass_does(path, monkeypatch):
    with MessageStore(path, read_only=True) as s:
        ranges = [(q, 0, s.max_offset("T", q)) for q in range(4)]
        compiled = [r for batch in s.scan_queues("T", ranges, None, 700) for r in batch.to_pylist()]
        use_python_kernels(monkeypatch)
        assert [r for batch in s.scan_queues("T", ranges, None, 700) for r in batch.to_pylist()] == compiled
        assert len({r["queue_id"] for r in compiled}) == 4


def test_a_window_read_filters_as_each_queues_scan_does(path):
    with MessageStore(path, read_only=True) as s:
        ranges = [(q, 0, s.max_offset("T", q)) for q in range(4)]
        for f in (MessageFilter.by_tags("A || C"), MessageFilter.by_sql("i > 1000 AND i < 1100")):
            got = sorted((r for w in s.log_windows("T", ranges, 3) for batch in s.scan_queues("T", w, f, 256)
                          for r in batch.to_pylist()), key=key)
            assert got == per_queue_rows(s, ranges, f) and got


def test_progress_says_where_each_queue_resumes(path):
    with MessageStore(path, read_only=True) as s:
        ranges = [(q, 0, s.max_offset("T", q)) for q in range(4)]
        progress: dict = {}
        seen: dict = {}
        for batch in s.scan_queues("T", ranges, None, 400, columns=["queue_id", "queue_offset"], progress=progress):
            for q, o in zip(batch.column("queue_id").to_pylist(), batch.column("queue_offset").to_pylist()):
                seen[q] = o + 1
            assert all(progress.get(q, 0) <= seen.get(q, 0) for q in range(4))  # never past what was yielded
        assert progress == {q: s.max_offset("T", q) for q in range(4)} == seen


def test_a_record_of_another_queue_than_its_unit_says_is_corrupt_on_both_decoders(tmp_path, monkeypatch):
    with MessageStore(tmp_path, CFG) as s:
        fill_store(s, 400, topic="T", queue_id=lambda i: i % 4, queues=4)
        at = int(s.consume_queue("T", 2).units(30, 31)["offset"][0])
    with open(tmp_path / "commitlog" / f"{0:020d}", "r+b") as f:
        f.seek(at + 12)  # QUEUEID
        f.write(struct.pack(">i", 1))
    for python in (False, True):
        with monkeypatch.context() as mp:
            if python:
                use_python_kernels(mp)
            with MessageStore(tmp_path, read_only=True) as s:
                ranges = [(q, 0, 100) for q in range(4)]
                with pytest.raises(CorruptRecordError, match=f"at offset {at}: QUEUEID"):
                    list(s.scan_queues("T", ranges, None, 64))


def test_ranges_below_a_queues_first_offset_stay_whole_in_the_first_window(tmp_path):
    with MessageStore(tmp_path, CFG) as s:
        fill_store(s, 800, topic="T", queue_id=lambda i: i % 2, queues=2)
        first = s.log_windows("T", [(0, 0, 400), (1, 0, 400), (5, 3, 3)], 2)
        assert sorted(p for w in first for p in w if p[0] == 0) == [(0, 0, first[1][0][1]), (0, first[1][0][1], 400)]
        # a queue with nothing readable (no units there) is not cut
        s.create_topic("V", 2)
        fill_store(s, 50, topic="V", queue_id=0)
        windows = s.log_windows("V", [(0, 0, 50), (1, 0, 10)], 2)
        assert (1, 0, 10) in windows[0] and sum(e - a for w in windows for _, a, e in w) == 60
        assert np.all([a < e for w in windows for _, a, e in w])
