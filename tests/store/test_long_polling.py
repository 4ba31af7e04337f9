"""Long polling (PullRequestHoldService): a held get_message returns as soon as a matching message arrives."""
from __future__ import annotations

import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conftest_durability import start_python  # noqa: E402

from store import GetMessageStatus, MessageStore, StoreConfig  # noqa: E402

TIMEOUT_MS = 20_000


class TagIs:
    """A message filter (the protocol): exact tag."""

    def __init__(self, tag):
        self.tag = tag

    def is_matched_by_consume_queue(self, tags_code):
        return True

    def is_matched_by_commit_log(self, properties):
        return properties.get("TAGS") == self.tag


APPENDER = """
    import sys, time
    from store import MessageStore, StoreConfig
    with MessageStore(sys.argv[1], StoreConfig(defaultTopicQueueNums=1)) as s:
        print("open", flush=True)
        sys.stdin.readline()
        for tag in sys.argv[2:]:
            s.put("LP", tag.encode(), tags=tag, queue_id=0)
            time.sleep(0.05)
        print("sent", flush=True)
        sys.stdin.readline()
"""


def _store(path):
    s = MessageStore(path, StoreConfig(defaultTopicQueueNums=1))
    s.create_topic("LP", 1)
    return s


def test_message_from_another_process_is_received_well_within_the_timeout(tmp_path):
    with _store(tmp_path) as s:
        proc = start_python(APPENDER, tmp_path, "x", stdin=-1, stdout=-1)
        try:
            assert proc.stdout.readline().strip() == b"open"
            result = {}

            def pull():
                t0 = time.monotonic()
                result["r"] = s.get_message("g", "LP", 0, 0, suspend_timeout_ms=TIMEOUT_MS)
                result["t"] = time.monotonic() - t0

            puller = threading.Thread(target=pull)
            puller.start()
            time.sleep(0.3)
            assert puller.is_alive(), "the pull is held while the queue is empty"
            proc.stdin.write(b"go\n")
            proc.stdin.flush()
            puller.join(TIMEOUT_MS / 1000)
            r = result["r"]
            assert r.status == GetMessageStatus.FOUND and [m.body for m in r.messages] == [b"x"]
            assert result["t"] < TIMEOUT_MS / 1000 / 4
            assert r.next_begin_offset == 1
        finally:
            proc.communicate(b"\n", timeout=30)


def test_held_pull_skips_non_matching_arrivals_and_returns_the_match(tmp_path):
    with _store(tmp_path) as s:
        proc = start_python(APPENDER, tmp_path, "no", "no", "yes", stdin=-1, stdout=-1)
        try:
            assert proc.stdout.readline().strip() == b"open"
            proc.stdin.write(b"go\n")
            proc.stdin.flush()
            r = s.get_message("g", "LP", 0, 0, message_filter=TagIs("yes"), suspend_timeout_ms=TIMEOUT_MS)
            assert r.status == GetMessageStatus.FOUND
            assert [(m.queue_offset, m.body) for m in r.messages] == [(2, b"yes")]
            assert r.next_begin_offset == 3
        finally:
            proc.communicate(b"\n", timeout=30)


def test_in_process_append_wakes_the_held_pull(tmp_path):
    with _store(tmp_path) as s:
        s.put("LP", b"old", queue_id=0)
        other = MessageStore(tmp_path, StoreConfig(defaultTopicQueueNums=1))  # another object, same process
        try:
            threading.Timer(0.2, lambda: other.put("LP", b"new", queue_id=0)).start()
            t0 = time.monotonic()
            r = s.get_message("g", "LP", 0, 1, suspend_timeout_ms=TIMEOUT_MS)
            assert r.status == GetMessageStatus.FOUND and r.messages[0].body == b"new"
            assert time.monotonic() - t0 < TIMEOUT_MS / 1000 / 4
        finally:
            other.close()


def test_timeout_statuses(tmp_path):
    with _store(tmp_path) as s:
        t0 = time.monotonic()
        r = s.get_message("g", "LP", 0, 0, suspend_timeout_ms=150)
        assert time.monotonic() - t0 >= 0.15
        assert r.status == GetMessageStatus.NO_MESSAGE_IN_QUEUE and r.next_begin_offset == 0
        s.put("LP", b"a", tags="no", queue_id=0)
        r = s.get_message("g", "LP", 0, 1, suspend_timeout_ms=100)
        assert r.status == GetMessageStatus.NO_MESSAGE_IN_QUEUE and r.next_begin_offset == 1
        # messages arrived, none passed the filter: NO_MATCHED_MESSAGE, and the pull moved past them
        threading.Timer(0.05, lambda: s.put("LP", b"b", tags="no", queue_id=0)).start()
        r = s.get_message("g", "LP", 0, 0, message_filter=TagIs("yes"), suspend_timeout_ms=300)
        assert r.status == GetMessageStatus.NO_MATCHED_MESSAGE and r.next_begin_offset == 2
        # statuses waiting cannot change come back at once
        t0 = time.monotonic()
        r = s.get_message("g", "LP", 0, 99, suspend_timeout_ms=TIMEOUT_MS)
        assert r.status == GetMessageStatus.OFFSET_OVERFLOW_BADLY and time.monotonic() - t0 < 5
        r = s.get_message("g", "Nope", 0, 0, suspend_timeout_ms=TIMEOUT_MS)
        assert r.status == GetMessageStatus.NO_MATCHED_LOGIC_QUEUE


def test_without_suspend_the_pull_returns_at_once(tmp_path):
    with _store(tmp_path) as s:
        r = s.get_message("g", "LP", 0, 0)
        assert r.status == GetMessageStatus.NO_MESSAGE_IN_QUEUE
