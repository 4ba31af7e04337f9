"""Consume-queue files cut short or missing: every reader stops with an error naming the file or reads what is
there, never loops; a writable open rebuilds the lost units from the commitlog, as RocketMQ rebuilds queues."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from store_fill import fill_store

from store import CorruptRecordError, MessageStore, StoreConfig
from store.store_check import check_store

CFG = dict(mappedFileSizeConsumeQueue=2000)  # 100 units a file
CQ = os.path.join("consumequeue", "T", "0")


def _store(path, n=300):
    fill_store(path, n, body=b"m%03d", config=StoreConfig(**CFG))


def _rmq(path, *args):
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    # a reader that loops allocates until killed: the timeout and the address-space limit end it either way
    return subprocess.run(["bash", "-c", 'ulimit -v 3000000; exec "$@"', "rmq", sys.executable, "-m", "rmq_cli",
                           "-s", str(path), *args], capture_output=True, timeout=120, env=env)


def _bodies(store, end=None):
    return [b for batch in store.scan("T", 0, 0, end) for b in batch.column("body").to_pylist()]


def test_a_short_middle_file_is_reported_by_every_reader_and_rebuilt_by_a_writer(tmp_path):
    _store(tmp_path)
    short = tmp_path / CQ / f"{2000:020d}"
    os.truncate(short, 1010)  # the issue's reproduction
    with MessageStore(tmp_path, StoreConfig(**CFG), read_only=True) as s:
        with pytest.raises(CorruptRecordError, match=f"{short}.*shorter than mappedFileSizeConsumeQueue"):
            _bodies(s)
        assert len(_bodies(s, 150)) == 150  # what lies before the hole reads as before
    out = _rmq(tmp_path, "consume", "--topic", "T", "--queue", "0")
    assert out.returncode == 1 and str(short).encode() in out.stderr, out.stderr
    assert 0 < out.stdout.count(b"\n") <= 150  # messages before the hole, then the error
    check = _rmq(tmp_path, "check")
    assert check.returncode == 1 and b"00000000000000002000 at byte 0: file is 1010 bytes" in check.stdout
    with MessageStore(tmp_path, StoreConfig(**CFG)) as s:  # a writer rebuilds the lost units
        assert _bodies(s) == [b"m%03d" % i for i in range(300)]
        assert s.put("T", b"next", queue_id=0).queue_offset == 300
    assert check_store(str(tmp_path)).ok


def test_a_missing_middle_file_is_reported_and_rebuilt(tmp_path):
    _store(tmp_path)
    gone = tmp_path / CQ / f"{2000:020d}"
    os.remove(gone)
    with MessageStore(tmp_path, StoreConfig(**CFG), read_only=True) as s:
        with pytest.raises(CorruptRecordError, match=f"{gone}.*missing"):
            _bodies(s)
    with MessageStore(tmp_path, StoreConfig(**CFG)) as s:
        assert _bodies(s) == [b"m%03d" % i for i in range(300)]
    assert check_store(str(tmp_path)).ok


def test_a_short_last_file_reads_what_is_there_and_a_writer_repairs_it(tmp_path):
    _store(tmp_path)
    os.truncate(tmp_path / CQ / f"{4000:020d}", 1010)  # a torn write of the last file: units 250.. lost
    with MessageStore(tmp_path, StoreConfig(**CFG), read_only=True) as s:
        assert s.max_offset("T", 0) == 250
        assert _bodies(s) == [b"m%03d" % i for i in range(250)]
    out = _rmq(tmp_path, "consume", "--topic", "T", "--queue", "0")
    assert out.returncode == 0 and out.stdout.count(b"\n") == 250, out.stderr
    check = _rmq(tmp_path, "check")
    assert check.returncode == 1 and b"file is 1010 bytes" in check.stdout
    (tmp_path / "abort").touch()  # after a crash, too
    with MessageStore(tmp_path, StoreConfig(**CFG)) as s:
        assert _bodies(s) == [b"m%03d" % i for i in range(300)]
        assert s.put("T", b"next", queue_id=0).queue_offset == 300
    assert check_store(str(tmp_path)).ok


def _issue_store(path):
    """The issue's reproduction: one queue, 700 messages, 6,000-byte consume-queue files (300 units each)."""
    fill_store(path, 700, body=b"m%03d", config=StoreConfig(mappedFileSizeConsumeQueue=6000))
    return path / CQ / f"{0:020d}"


@pytest.mark.parametrize("damage", ["emptied", "deleted"])
def test_a_first_file_emptied_or_deleted_is_reported_and_rebuilt_by_recover(tmp_path, damage):
    first = _issue_store(tmp_path)
    os.truncate(first, 0) if damage == "emptied" else os.remove(first)
    check = _rmq(tmp_path, "check")
    assert check.returncode == 1 and b"300 records of T/0 below queue offset 300 (queue offsets 0..299) are in " \
        b"the commitlog but in no consume-queue file" in check.stdout, check.stdout
    recover = _rmq(tmp_path, "recover")
    assert recover.returncode == 0 and b"700 messages in the consume queues" in recover.stdout, recover.stderr
    assert b"rebuilt units 0..299 from the commitlog" in recover.stderr
    assert _rmq(tmp_path, "check").returncode == 0
    with MessageStore(tmp_path, read_only=True) as s:
        assert _bodies(s) == [b"m%03d" % i for i in range(700)]


def test_a_first_file_cut_to_40_bytes_keeps_the_stores_file_size_and_is_rebuilt(tmp_path):
    first = _issue_store(tmp_path)
    os.truncate(first, 40)
    check = _rmq(tmp_path, "check")
    assert check.returncode == 1 and b"file is 40 bytes; the store's consume-queue files are 6000" in check.stdout
    assert check.stdout.count(b"ERROR") == 1, check.stdout  # the other files are not blamed for the cut one
    recover = _rmq(tmp_path, "recover")
    assert recover.returncode == 0 and b"700 messages" in recover.stdout, recover.stderr
    assert b"was short (40 bytes); rebuilt units 2..299" in recover.stderr
    assert _rmq(tmp_path, "check").returncode == 0


def test_a_store_without_its_recorded_sizes_takes_them_from_the_file_names(tmp_path):
    first = _issue_store(tmp_path)
    (tmp_path / ".rmq-spark").write_text("")  # a store written before the sizes were recorded (or a broker's)
    os.truncate(first, 40)
    with MessageStore(tmp_path, read_only=True) as s:
        assert s.config.mappedFileSizeConsumeQueue == 6000
    with MessageStore(tmp_path) as s:
        assert _bodies(s) == [b"m%03d" % i for i in range(700)]


def test_a_lost_head_after_retention_is_rebuilt_with_pre_blank_units_by_recover(tmp_path):
    cfg = StoreConfig(mappedFileSizeCommitLog=8192, mappedFileSizeConsumeQueue=2000)
    with MessageStore(tmp_path, cfg) as s:
        s.put_batch("T", [b"m%03d" % i + b"x" * 100 for i in range(400)], queue_id=0)
    os.remove(tmp_path / "commitlog" / f"{0:020d}")  # as retention removes the oldest file: the log starts later
    os.remove(tmp_path / CQ / f"{2000:020d}")  # units 100..199: still in the commitlog, their file lost
    os.remove(tmp_path / CQ / f"{0:020d}")
    check = _rmq(tmp_path, "check")
    assert check.returncode == 1 and b"in no consume-queue file" in check.stdout
    with MessageStore(tmp_path) as s:
        min_before = s.min_offset("T", 0)
        assert min_before == 200  # an open alone does not walk a log that expired files
        assert s.rebuild_consume_queues() > 0
        lo = s.min_offset("T", 0)
        assert 0 < lo < 100 and _bodies(s)[0] == b"m%03d" % lo + b"x" * 100
    assert _rmq(tmp_path, "check").returncode == 0


def test_serve_starts_on_a_store_whose_first_consume_queue_file_was_cut(tmp_path):
    from test_config_file_damage import serve
    os.truncate(_issue_store(tmp_path), 40)
    started, err, code = serve(tmp_path)
    assert started is not None and code == 0, err
    assert "was short (40 bytes); rebuilt units 2..299" in err
    assert check_store(str(tmp_path)).ok
