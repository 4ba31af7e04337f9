"""MessageStore(path, read_only=True) never writes, locks or recovers; it reads up to the last valid record."""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conftest_durability import SMALL, all_messages, start_python, tree_snapshot  # noqa: E402
from store_fill import fill_store  # noqa: E402

from store import GetMessageStatus, MessageStore, ReadOnlyStoreError, StoreConfig  # noqa: E402


def _broker_like(path, n=30):
    """A store as a broker leaves it after a crash: abort present, no lock file of ours, a torn tail."""
    with MessageStore(path, StoreConfig(**SMALL)) as s:
        rs = fill_store(s, n, topic="B", body=b"b%d")
        end = s.commit_log_max_offset()
    assert end % 4096 < 4000
    os.remove(path / "lock")
    os.remove(path / ".rmq-spark")
    (path / "abort").write_bytes(b"")
    f = path / "commitlog" / f"{end // 4096 * 4096:020d}"
    with open(f, "r+b") as fh:  # the head of a record past the end, and no unit: a torn append
        fh.seek(end % 4096)
        fh.write(b"\x00\x00\x00\x90\xda\xa3\x20\xa7" + b"\x07" * 30)
    return rs


def test_read_only_open_and_reads_change_nothing(tmp_path):
    _broker_like(tmp_path)
    before = tree_snapshot(tmp_path)
    with MessageStore(tmp_path, read_only=True) as s:
        assert s.topics() == ["B"]
        assert [m[4] for m in all_messages(s)] == [b"b%d" % i for i in range(30)]
        r = s.get_message("g", "B", 0, 0)
        assert r.status == GetMessageStatus.FOUND
        assert s.offset_for_timestamp("B", 0, 0) == 0
        assert s.commit_log_max_offset() > 0
        for call in (lambda: s.put("B", b"x"), lambda: s.create_topic("C"), lambda: s.clean_expired()):
            with pytest.raises(ReadOnlyStoreError):
                call()
    assert tree_snapshot(tmp_path) == before  # no abort/lock/checkpoint touched, the torn tail left as it is
    assert not (tmp_path / "lock").exists()


def test_read_only_does_not_wait_for_a_live_writer_and_sees_its_appends(tmp_path):
    writer = start_python("""
        import sys
        from store import MessageStore, StoreConfig
        with MessageStore(sys.argv[1], StoreConfig(mappedFileSizeCommitLog=4096)) as s:
            s.put("L", b"one", queue_id=0)
            with s.write_lock():  # hold the append lock while the reader works
                print("holding", flush=True)
                sys.stdin.readline()
            s.put("L", b"two", queue_id=0)
            print("two", flush=True)
            sys.stdin.readline()
    """, tmp_path, stdin=-1, stdout=-1)
    try:
        assert writer.stdout.readline().strip() == b"holding"
        with MessageStore(tmp_path, read_only=True) as s:
            assert [m[4] for m in all_messages(s, "L")] == [b"one"]
            writer.stdin.write(b"\n")
            writer.stdin.flush()
            assert writer.stdout.readline().strip() == b"two"
            assert [m[4] for m in all_messages(s, "L")] == [b"one", b"two"]
    finally:
        writer.communicate(b"\n", timeout=30)


def test_read_only_on_a_missing_directory_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        MessageStore(tmp_path / "nope", read_only=True)
    assert not (tmp_path / "nope").exists()
