"""Many writers, many readers: 4 writer processes into shared topics while 2 processes read.

The unit suite runs 4 x 2,000 messages to stay fast on CI's 2 cores; `benchmarks/crash_bench.py --concurrency`
runs the issue's full 4 x 10,000 through the same harness.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conftest_durability import load_crash_bench  # noqa: E402

from store import StoreConfig  # noqa: E402
from store.store_check import check_store  # noqa: E402

WRITERS = 4
PER_WRITER = 2_000


def test_four_writers_two_readers_every_message_exactly_once_in_order(tmp_path):
    bench = load_crash_bench()
    result = bench.concurrency_run(str(tmp_path), WRITERS, PER_WRITER)

    expected = {f"w{i}-{seq}" for i in range(WRITERS) for seq in range(PER_WRITER)}
    for mode, seen in result["readers"].items():
        assert seen["problems"] == [], mode  # no torn record, no gap, no reordering while writers ran
        assert set(seen["seen"]) == expected, mode
        assert set(seen["seen"].values()) == {1}, mode

    stored = [x for rows in result["queues"].values() for x in rows]
    assert len(stored) == len(set(stored)) == WRITERS * PER_WRITER
    for (topic, qid), rows in result["queues"].items():
        for w in {x[0] for x in rows}:
            seqs = [seq for writer, seq in rows if writer == w]
            assert seqs == sorted(seqs), f"{topic}/{qid}: {w}'s messages out of its append order"
    # Writers chose queues round robin from a random start: every queue got messages from several writers.
    assert all(len({x[0] for x in rows}) > 1 for rows in result["queues"].values())
    report = check_store(tmp_path, StoreConfig(**bench.CONCURRENCY_CONFIG))
    assert report.ok, report.summary()
