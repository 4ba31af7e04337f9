"""A commitlog file missing between others is data loss, not retention: readers say which file is gone."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from store_fill import fill_store

from store import MessageStore, MissingFileError, StoreConfig, StoreRecoveryError
from store.store_check import check_store

CFG = StoreConfig(mappedFileSizeCommitLog=64 * 1024)
GONE = f"{131072:020d}"


@pytest.fixture
def path(tmp_path):
    # the reproduction: 1,000 messages over 64 KiB files
    fill_store(tmp_path, 1000, body=b"%04d" + b"x" * 200, queue_id=lambda i: i % 4, config=CFG)
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


@pytest.fixture
def last_gone(tmp_path):
    """The issue's reproduction: 240 messages of 1 KiB over 64 KiB files, the newest file removed."""
    fill_store(tmp_path, 240, body=b"%04d" + b"x" * 1000, config=CFG)
    newest = sorted(os.listdir(tmp_path / "commitlog"))[-1]
    os.remove(tmp_path / "commitlog" / newest)
    return tmp_path, newest


def test_a_missing_last_file_is_an_error_naming_it_and_the_offsets_not_the_end_of_data(last_gone):
    path, newest = last_gone
    with MessageStore(path, read_only=True) as s:
        with pytest.raises(MissingFileError, match=f"commitlog file {newest} is missing .*points at commitlog "
                                                   f"offset {int(newest)}, past the end of the log's files"):
            offset = 160
            while offset < s.max_offset("T", 0):
                offset = s.get_message("g", "T", 0, offset, 100).next_begin_offset
        with pytest.raises(MissingFileError, match=newest):
            sum(b.num_rows for b in s.scan("T", 0, 0))
    consume = subprocess.run([sys.executable, "-m", "rmq_cli", "-s", str(path), "consume", "--topic", "T"],
                             capture_output=True, timeout=120, env=dict(os.environ, PYTHONPATH=os.getcwd()))
    assert consume.returncode == 1 and f"commitlog file {newest} is missing".encode() in consume.stderr
    check = subprocess.run([sys.executable, "-m", "rmq_cli", "-s", str(path), "check"], capture_output=True,
                           timeout=120, env=dict(os.environ, PYTHONPATH=os.getcwd()))
    assert check.returncode == 1 and f"in commitlog file {newest}, which is missing".encode() in check.stdout
