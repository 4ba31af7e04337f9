"""A full disk: appends fail with DiskFullError naming what was written; readers and `rmq check` never map
the unwritten holes of the store's sparse files (on tmpfs that allocates pages, and on a full one is SIGBUS)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from store import DiskFullError, MessageStore


@pytest.fixture
def small_fs(tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mnt)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=True)


def _rmq(*args):
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    return subprocess.run([sys.executable, "-m", "rmq_cli", *map(str, args)], capture_output=True, timeout=120,
                          env=env)


def test_a_full_disk_is_a_clear_error_and_the_store_stays_readable(small_fs):
    path = small_fs / "s"
    acked = 0
    with MessageStore(path) as s:
        with pytest.raises(DiskFullError, match="no space left on the device writing (the commitlog; nothing of "
                           "this batch was|consume-queue units; the batch was not) acknowledged") as e:
            while True:
                s.put_batch("T", [b"x" * 1000] * 100, queue_id=0)
                acked += 100
    assert e.value.errno == 28 and acked > 1000
    # which file the disk runs out under depends on what the others took; a batch refused at its consume-queue
    # units is in the log unacknowledged, and the next writer dispatches it (never lost, never half there)
    in_log = acked if str(path / "commitlog") in str(e.value) else acked + 100
    assert in_log == acked or str(path / "consumequeue") in str(e.value)
    with open(small_fs / "filler", "wb") as f:  # whatever room is left, taken
        try:
            while True:
                f.write(bytes(65536))
                f.flush()
        except OSError:
            pass
    check = _rmq("-s", path, "check")
    assert check.returncode == 0, (check.returncode, check.stdout.decode()[-3000:])
    assert f"check OK: {in_log} records".encode() in check.stdout
    consume = _rmq("-s", path, "consume", "--topic", "T", "--max", "5")
    assert consume.returncode == 0 and consume.stdout.count(b"\n") == 5
    produce = _rmq("-s", path, "produce", "--topic", "T", "more")
    assert produce.returncode == 1 and b"no space left on the device writing" in produce.stderr
    (path / "abort").touch()  # and a crash recovery on the full disk: what was acknowledged, no more
    with MessageStore(path) as s:
        assert s.max_offset("T", 0) == acked
    subprocess.run(["mount", "-o", "remount,size=16m", str(small_fs)], check=True)  # room: a cut batch goes in
    with MessageStore(path) as s:
        assert s.max_offset("T", 0) == in_log


def _fill_up(path, small_fs) -> int:
    """A store that filled the disk, then every byte left taken: how many messages were acknowledged (batches
    until the disk refuses one, so not tests/store_fill.py's one batch of n)."""
    acked = 0
    with MessageStore(path) as s:
        with pytest.raises(DiskFullError):
            while True:
                s.put_batch("T", [b"x" * 1000] * 100, queue_id=0)
                acked += 100
    with open(small_fs / "filler", "wb") as f:
        try:
            while True:
                f.write(bytes(65536))
                f.flush()
        except OSError:
            pass
    return acked


def test_serve_on_a_full_disk_starts_serves_reads_and_a_new_groups_pull_and_refuses_writes(small_fs):
    import json
    import signal
    path = small_fs / "s"
    acked = _fill_up(path, small_fs)
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    proc = subprocess.Popen([sys.executable, "-m", "rmq_cli", "-s", str(path), "serve", "--listen", "127.0.0.1:0",
                             "--namesrv-listen", "127.0.0.1:0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line, proc.communicate(timeout=60)[1]
        ns = json.loads(line)["namesrv"]
        consume = _rmq("consume", "--namesrv", ns, "-t", "T", "-g", "a-new-group", "--max", "50")
        assert consume.returncode == 0 and consume.stdout.count(b"\n") == 50, consume.stderr
        commit = _rmq("consume", "--namesrv", ns, "-t", "T", "-g", "g2", "--max", "5", "--commit")
        assert commit.returncode == 1 and b"no space left on the device writing consumerOffset.json" in \
            commit.stderr, commit.stderr  # committing offsets is a write: refused, and the broker goes on
        produce = _rmq("produce", "--namesrv", ns, "-t", "T", "more")
        # as a stock broker answers a full disk, naming what could not be written: the commitlog, or the units of
        # a batch cut short before (the store opened with them not dispatched, and each append tries them again)
        assert produce.returncode == 1 and b"SERVICE_NOT_AVAILABLE (14): the broker's disk is full: no space left " \
            b"on the device writing the co" in produce.stderr, produce.stderr
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "no space left on the device writing" in err and "kept in memory" in err  # said, not fatal
    os.remove(small_fs / "filler")
    with MessageStore(path, read_only=True) as s:
        assert s.max_offset("T", 0) == acked


def test_a_store_on_a_disk_smaller_than_its_index_slot_table_finds_messages_by_key(small_fs):
    """The default index file has 20 MB of hash slots; on an 8 MB disk the slots a put's keys land in are
    allocated, not the whole table, so queries by key work on a small disk."""
    with MessageStore(small_fs / "s") as s:
        keys = [f"order-{i}" for i in range(2_000)]
        r = s.put_batch("T", [b"x" * 100] * len(keys), keys=keys)
        for i in (0, 999, 1_999):
            assert [m.commit_log_offset for m in s.query_message("T", keys[i])] == [r[i].commit_log_offset]


def _take_all_room(small_fs) -> None:
    with open(small_fs / "filler", "wb", buffering=0) as f:
        try:
            while True:
                f.write(bytes(4096))
        except OSError:
            pass


def test_a_batch_cut_short_at_its_consume_queue_units_is_dispatched_once_there_is_room(small_fs):
    """The commitlog's blocks are reserved ahead, consume-queue pages are not: on a disk filled after the first
    batch, the next batch's records go into the log and its units stop at a new page. That batch is refused;
    the store opens on the full disk to serve what was dispatched, refuses appends naming the units, and once
    there is room the next append dispatches the cut batch before its own records: nothing lost, nothing twice."""
    path = small_fs / "s"
    with MessageStore(path) as s:
        s.put_batch("T", [b"x" * 1000] * 100, queue_id=0)  # units 0..99: the first page of the queue's file
        _take_all_room(small_fs)
        with pytest.raises(DiskFullError, match="writing consume-queue units; the batch was not acknowledged"):
            s.put_batch("T", [b"cut %d" % i for i in range(150)], queue_id=0)  # units 100..249 cross a page
    check = _rmq("-s", path, "check")
    assert check.returncode == 0 and b"check OK: 250 records" in check.stdout and \
        b"a dispatch cut short" in check.stdout, check.stdout
    (path / "abort").touch()  # a crash recovery on the full disk clears the units past the end, holes left as
    with MessageStore(path) as s:  # they are (zeros written there would need room), and opens to be read
        assert s.max_offset("T", 0) == 100
    with MessageStore(path) as s:  # on the full disk: opens, serves the dispatched messages, refuses appends
        assert s.max_offset("T", 0) == 100
        with pytest.raises(DiskFullError, match="consume-queue units of T/0 from queue offset 100"):
            s.put("T", b"more", queue_id=0)
        os.remove(small_fs / "filler")
        r = s.put("T", b"more", queue_id=0)
        assert r.queue_offset == 250 and s.max_offset("T", 0) == 251
        bodies = [m.body for at in (100, 132, 164, 196, 228) for m in s.get_message("g", "T", 0, at, 32).messages]
    assert bodies == [b"cut %d" % i for i in range(150)] + [b"more"]
