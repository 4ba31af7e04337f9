"""Thousands of queues: the store keeps a bounded number of files mapped and open (least recently used let go
and mapped again on use), topics created by another process are seen without re-reading everything, and
nothing read or written changes because of it."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from store import MessageStore, mapped_file
from store.store_check import check_store

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def small_budget(monkeypatch):
    monkeypatch.setattr(mapped_file.OPEN_FILES, "budget", 16)


def test_a_small_descriptor_budget_changes_nothing_read_or_written(tmp_path, small_budget):
    before = open_descriptors()
    with MessageStore(tmp_path / "s") as s:
        for t in range(40):
            s.create_topic(f"T{t}", 4)
            s.put_batch(f"T{t}", [b"a%d" % t, b"b%d" % t, b"c%d" % t, b"d%d" % t], queue_id=[0, 1, 2, 3])
        for t in range(40):  # a second round: every queue's files were let go and come back
            s.put_batch(f"T{t}", [b"e%d" % t] * 4, queue_id=[0, 1, 2, 3])
        assert len(mapped_file.OPEN_FILES.files) <= 16 + 2
        assert open_descriptors() - before < 2 * 16 + 20  # not one per queue file (160 of them)
        for t in range(40):
            for q in range(4):
                assert s.max_offset(f"T{t}", q) == 2
                got = s.get_message("g", f"T{t}", q, 0, 10).messages
                assert [m.body for m in got] == [[b"a", b"b", b"c", b"d"][q] + b"%d" % t, b"e%d" % t]
    with MessageStore(tmp_path / "s", read_only=True) as r:
        assert len(r.topics()) == 40
        assert sum(r.max_offset(t, q) for t in r.topics() for q in r.queues(t)) == 40 * 4 * 2
    assert check_store(str(tmp_path / "s")).ok


def test_topics_created_by_another_process_are_seen_by_a_reader(tmp_path):
    with MessageStore(tmp_path / "s") as s:
        s.put("Old", b"x", queue_id=0)
    reader = MessageStore(tmp_path / "s", read_only=True)
    try:
        assert reader.topics() == ["Old"]
        code = ("import sys; from store import MessageStore\n"
                "with MessageStore(sys.argv[1]) as s:\n"
                "    [s.put(f'New{i}', b'y', queue_id=0) for i in range(30)]\n")
        subprocess.run([sys.executable, "-c", code, str(tmp_path / "s")], check=True, timeout=60,
                       env=dict(os.environ, PYTHONPATH=ROOT))
        assert reader.has_topic("New7") and reader.max_offset("New7", 0) == 1  # a lookup finds one at once
        assert reader.topics() == sorted(["Old", *(f"New{i}" for i in range(30))])
    finally:
        reader.close()
