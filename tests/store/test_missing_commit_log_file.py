"""A commitlog file missing between others is data loss, not retention: readers say which file is gone."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from store import MessageStore, MissingFileError, StoreConfig, StoreRecoveryError
from store.store_check import check_store

CFG = StoreConfig(mappedFileSizeCommitLog=64 * 1024)
GONE = f"{131072:020d}"


@pytest.fixture
def path(tmp_path):
    with MessageStore(tmp_path, CFG) as s:  # the reproduction: 1,000 messages over 64 KiB files
        s.put_batch("T", [b"%04d" % i + b"x" * 200 for i in range(1000)], queue_id=[i % 4 for i in range(1000)])
    os.remove(tmp_path / "commitlog" / GONE)
    return tmp_path


def test_scan_and_get_message_name_the_missing_file(path):
    with MessageStore(path, read_only=True) as s:
        with pytest.raises(MissingFileError, match=f"missing file .*{GONE}"):
            for q in s.queues("T"):
                list(s.scan("T", q, 0))
        with pytest.raises(MissingFileError, match=GONE):
            offset = 0
            while offset < s.max_offset("T", 0):
                offset = s.get_message("g", "T", 0, offset).next_begin_offset
        # resuming after the gap: the first queue offset whose message lies past the missing file
        resume = s.queue_offset_at("T", 0, 131072 + 65536)
        first = next(s.scan("T", 0, resume)).column("body")[0].as_py()
        assert int(first[:4]) // 4 == resume and 0 < resume < s.max_offset("T", 0)


def test_rmq_consume_fails_naming_the_file_and_check_reports_it(path):
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    out = subprocess.run([sys.executable, "-m", "rmq_cli", "-s", str(path), "consume", "--topic", "T"],
                         capture_output=True, timeout=120, env=env)
    assert out.returncode == 1 and f"missing file {path}/commitlog/{GONE}".encode() in out.stderr, out.stderr
    assert not check_store(str(path)).ok


def test_a_writer_refuses_to_open_over_the_gap(path):
    (path / "abort").touch()
    with pytest.raises(StoreRecoveryError, match="still validate"):
        MessageStore(path, CFG)
