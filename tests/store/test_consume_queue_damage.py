"""Consume-queue files cut short or missing: every reader stops with an error naming the file or reads what is
there, never loops; a writable open rebuilds the lost units from the commitlog, as RocketMQ rebuilds queues."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from store import CorruptRecordError, MessageStore, StoreConfig
from store.store_check import check_store

CFG = dict(mappedFileSizeConsumeQueue=2000)  # 100 units a file
CQ = os.path.join("consumequeue", "T", "0")


def _store(path, n=300):
    with MessageStore(path, StoreConfig(**CFG)) as s:
        s.put_batch("T", [b"m%03d" % i for i in range(n)], queue_id=0)


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
    os.truncate(short, 1010)  # the reproduction
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
