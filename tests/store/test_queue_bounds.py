"""queue_bounds: the (min, max) offsets of many queues, answered from memory while nothing changed and re-read
for exactly the queues that did: always equal to min_offset/max_offset, whoever appended and whatever retention
removed."""
from __future__ import annotations

import os
import subprocess
import sys
import time

from store import MessageStore

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PUT = ("import sys; from store import MessageStore\n"
       "with MessageStore(sys.argv[1]) as s:\n"
       "    for t, q in (a.split(':') for a in sys.argv[2].split(',')):\n"
       "        s.put(t, b'y' * int(sys.argv[3]), queue_id=int(q))\n")


def put_elsewhere(path, queues, size=10):
    subprocess.run([sys.executable, "-c", PUT, str(path), ",".join(f"{t}:{q}" for t, q in queues), str(size)],
                   check=True, timeout=60, env=dict(os.environ, PYTHONPATH=ROOT))


def truth(store, queues):
    return {q: (store.min_offset(*q), store.max_offset(*q)) for q in queues}


def test_bounds_follow_appends_by_another_process_and_retention(tmp_path):
    path = tmp_path / "s"
    with MessageStore(path) as s:
        for t in ("A", "B", "C"):
            s.create_topic(t, 4)
            s.put_batch(t, [b"x"] * 4, queue_id=[0, 1, 2, 3])
    reader = MessageStore(path, read_only=True)
    try:
        queues = [(t, q) for t in ("A", "B", "C") for q in range(4)]
        assert reader.queue_bounds(queues) == truth(reader, queues)
        assert reader.queue_bounds(queues) == truth(reader, queues)  # from memory, unchanged
        put_elsewhere(path, [("A", 1), ("C", 3), ("C", 3)])  # a few records: walked, three queues re-read
        assert reader.queue_bounds(queues) == truth(reader, queues)
        assert reader.queue_bounds(queues)[("C", 3)] == (0, 3)
        put_elsewhere(path, [("B", 2)], size=300_000)  # too much to walk: every queue re-read
        put_elsewhere(path, [("B", 0)])
        assert reader.queue_bounds(queues) == truth(reader, queues)
        assert reader.queue_bounds(queues)[("B", 0)] == (0, 2)
        put_elsewhere(path, [("D", 0)])  # a new topic
        assert reader.queue_bounds(queues + [("D", 0)])[("D", 0)] == (0, 1)
    finally:
        reader.close()


def test_bounds_after_retention_removed_files(tmp_path):
    from store.store_config import StoreConfig
    config = StoreConfig(mappedFileSizeCommitLog=4096, fileReservedTime=0)
    path = tmp_path / "s"
    with MessageStore(path, config) as s:
        for i in range(60):
            s.put("T", b"z" * 200, queue_id=i % 2)
        queues = [("T", 0), ("T", 1)]
        before = s.queue_bounds(queues)
        assert before == truth(s, queues) and before[("T", 0)][0] == 0
        s.clean_expired(now=time.time() + 100 * 3600)  # every commitlog file but the last has expired
        after = s.queue_bounds(queues)
        assert after == truth(s, queues) and after[("T", 0)][0] > 0


def tracked(tracker):
    return {q: (int(tracker.mins[i]), int(tracker.maxs[i])) for i, q in enumerate(tracker.queues)}


def test_tracker_arrays_follow_appends_by_another_process_and_retention(tmp_path):
    """bounds_tracker: the same answers as queue_bounds, as arrays updated in place; an update says which
    queues it read again (none while nothing changed, the ones appended to, or all)."""
    from store.store_config import StoreConfig
    path = tmp_path / "s"
    config = StoreConfig(mappedFileSizeCommitLog=4096, fileReservedTime=0)
    with MessageStore(path, config) as s:
        for t in ("A", "B"):
            s.create_topic(t, 3)
            s.put_batch(t, [b"x"] * 3, queue_id=[0, 1, 2])
    reader = MessageStore(path, read_only=True)
    try:
        queues = [(t, q) for t in ("A", "B") for q in range(3)]
        tracker = reader.bounds_tracker(queues)
        assert tracker.update() is None and tracked(tracker) == truth(reader, queues)
        assert tracker.update().tolist() == []
        put_elsewhere(path, [("B", 2), ("A", 0), ("B", 2)])
        assert tracker.update().tolist() == [0, 5]
        assert tracked(tracker) == truth(reader, queues) and tracked(tracker)[("B", 2)] == (0, 3)
        put_elsewhere(path, [("A", 1)] * 30, size=200)
        with MessageStore(path, config) as s:
            s.clean_expired(now=time.time() + 100 * 3600)
        assert tracker.update() is None  # retention: every queue read again
        assert tracked(tracker) == truth(reader, queues) and tracked(tracker)[("A", 1)][0] > 0
    finally:
        reader.close()


def test_topics_version_moves_with_topics_another_process_creates(tmp_path):
    path = tmp_path / "s"
    with MessageStore(path) as s:
        s.create_topic("A", 2)
    reader = MessageStore(path, read_only=True)
    try:
        v = reader.topics_version()
        assert reader.topics_version() == v
        time.sleep(0.25)  # past the directory mtime's coarse tick, as a stream's later trigger is
        put_elsewhere(path, [("B", 0)])
        assert reader.topics_version() != v and "B" in reader.topics()
    finally:
        reader.close()
