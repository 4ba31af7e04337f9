"""Recovery cannot be steered by user data, and never drops messages it cannot prove unacknowledged without
refusing to open: forged atomic-batch markers, damage in the middle, flushed data gone, a tail truncated while
the store was closed, and a failed open that must leave the store as it found it."""
from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conftest_durability import SMALL, all_messages, run_python  # noqa: E402
from store_fill import fill_store  # noqa: E402

from rmq_common import message_codec as codec  # noqa: E402
from store import InvalidMessageError, MessageStore, StoreConfig, StoreRecoveryError  # noqa: E402
from store.store_check import check_store  # noqa: E402

RMQ = [sys.executable, "-m", "rmq_cli"]


def _cfg():
    return StoreConfig(**SMALL)


def _count(path, topic):
    with MessageStore(path, _cfg(), read_only=True) as s:
        return sum(s.max_offset(topic, q) - s.min_offset(topic, q) for q in s.queues(topic))


def _rmq(*args, input=None):
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    return subprocess.run(RMQ + list(map(str, args)), input=input, capture_output=True, timeout=120, env=env)


def test_a_forged_atomic_batch_property_is_an_ordinary_property(tmp_path):
    # the reproduction: 100 messages, then one claiming an atomic batch from offset 0, then a crash
    out = run_python("""
        import os, sys
        from store import MessageStore
        s = MessageStore(sys.argv[1])
        s.put_batch("T", [b"x"] * 100)
        s.put("T", b"p", properties={"RMQ_SPARK_ATOMIC_BATCH": "0-999999999999"})
        os._exit(0)
    """, tmp_path, check=False)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "abort").exists()
    with MessageStore(tmp_path) as s:
        msgs = all_messages(s, "T")
    assert len(msgs) == 101
    assert [m[3].get("RMQ_SPARK_ATOMIC_BATCH") for m in msgs if m[4] == b"p"] == ["0-999999999999"]
    assert check_store(str(tmp_path)).ok


def test_reserved_sys_flag_bits_are_refused(tmp_path):
    with MessageStore(tmp_path) as s:
        for bit in (codec.ATOMIC_BATCH_FLAG, codec.ATOMIC_BATCH_END_FLAG):
            with pytest.raises(InvalidMessageError, match="sys_flag 0x.*reserves"):
                s.put("T", b"x", sys_flag=bit)
            with pytest.raises(InvalidMessageError, match="message 1: sys_flag"):
                s.put_batch("T", [b"a", b"b"], sys_flag=[0, bit])
        assert "T" not in s.topics()  # nothing was written


def test_atomic_batches_are_marked_in_sys_flag_bits(tmp_path):
    with MessageStore(tmp_path) as s:
        s.put_batch("T", [b"a", b"b", b"c"], queue_id=0, atomic=True)
        s.put("T", b"plain", queue_id=0)
        flags = [m.sys_flag for m in s.get_message("g", "T", 0, 0).messages]
    reserved = [f & codec.RESERVED_SYS_FLAGS for f in flags]
    assert reserved == [codec.ATOMIC_BATCH_FLAG] * 2 + [codec.ATOMIC_BATCH_FLAG | codec.ATOMIC_BATCH_END_FLAG, 0]


def test_a_copy_of_atomically_written_messages_survives_an_unclean_stop(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    with MessageStore(src) as s:
        s.put_batch("T", [b"m%d" % i for i in range(499)], queue_id=0, atomic=True)
        s.put_batch("T", [b"n0", b"n1"], queue_id=0, atomic=True)
    dumped = _rmq("-s", src, "consume", "--topic", "T", "--json")
    assert dumped.returncode == 0, dumped.stderr
    lines = dumped.stdout.decode().splitlines()
    assert len(lines) == 501 and all("RMQ_SPARK_ATOMIC_BATCH" not in line for line in lines)
    copied = _rmq("-s", dst, "produce", "--topic", "T", "--file", "-", input=dumped.stdout)
    assert copied.returncode == 0, copied.stderr
    (dst / "abort").touch()  # the writer of the copy stopped uncleanly
    with MessageStore(dst) as s:
        bodies = [m[4] for m in all_messages(s, "T")]
    assert sorted(bodies) == sorted([json.loads(x)["body"].encode() for x in lines])
    assert check_store(str(dst)).ok


def _fill(path, n=200):
    return fill_store(path, n, body=b"message-%04d", config=_cfg())


def test_damage_in_the_middle_refuses_to_open_and_cuts_only_when_asked(tmp_path):
    results = _fill(tmp_path)
    size = SMALL["mappedFileSizeCommitLog"]
    victim = results[40]  # in the second commitlog file; later files hold intact messages
    assert victim.commit_log_offset // size == 1 and results[-1].commit_log_offset // size >= 3
    path = tmp_path / "commitlog" / f"{size:020d}"
    with open(path, "r+b") as f:
        f.seek(victim.commit_log_offset - size + 4)
        f.write(b"\xde\xad\xbe\xef")  # MAGICCODE
    (tmp_path / "abort").touch()
    with pytest.raises(StoreRecoveryError) as err:
        MessageStore(tmp_path, _cfg())
    text = str(err.value)
    assert f"offset {victim.commit_log_offset}" in text and str(path) in text
    assert "159 message(s) after it still validate" in text and "drop 160 message(s)" in text
    assert "recover_truncate=True" in text and "rmq recover --truncate" in text
    assert err.value.messages == 160
    # nothing was cut, and the failed open gave everything back: a second open refuses the same way
    assert _count(tmp_path, "T") == 200
    with pytest.raises(StoreRecoveryError):
        MessageStore(tmp_path, _cfg())
    refused = _rmq("-s", tmp_path, "recover")
    assert refused.returncode == 1 and b"refusing to open" in refused.stderr
    done = _rmq("-s", tmp_path, "recover", "--truncate")
    assert done.returncode == 0, done.stderr
    assert b"40 messages" in done.stdout
    with MessageStore(tmp_path, _cfg()) as s:
        assert [m[4] for m in all_messages(s, "T")] == [b"message-%04d" % i for i in range(40)]
    assert check_store(str(tmp_path), _cfg()).ok


def test_a_tail_truncated_while_closed_is_found_on_a_clean_open(tmp_path):
    results = _fill(tmp_path, 50)
    last_file = max((tmp_path / "commitlog").iterdir())
    cut = results[45].commit_log_offset - int(last_file.name)
    assert cut > 0
    os.truncate(last_file, cut)  # the last 5 messages, flushed at close, are gone
    assert not (tmp_path / "abort").exists()
    with pytest.raises(StoreRecoveryError, match="checkpoint says it had been flushed to offset"):
        MessageStore(tmp_path, _cfg())
    with MessageStore(tmp_path, _cfg(), recover_truncate=True) as s:
        assert s.max_offset("T", 0) == 45
        r = s.put("T", b"after", queue_id=0)
        assert r.queue_offset == 45
    assert check_store(str(tmp_path), _cfg()).ok


def test_flushed_messages_zeroed_with_their_units_still_refuse(tmp_path):
    results = _fill(tmp_path, 30)
    size = SMALL["mappedFileSizeCommitLog"]
    last = results[-1]
    cl = tmp_path / "commitlog" / f"{last.commit_log_offset // size * size:020d}"
    with open(cl, "r+b") as f:
        f.seek(last.commit_log_offset % size)
        f.write(bytes(64))
    cq = tmp_path / "consumequeue" / "T" / "0"
    unit_file = max(cq.iterdir())
    with open(unit_file, "r+b") as f:
        f.seek((last.queue_offset * 20) % SMALL["mappedFileSizeConsumeQueue"])
        f.write(bytes(20))
    with pytest.raises(StoreRecoveryError, match="flushed"):
        MessageStore(tmp_path, _cfg())


def test_a_brokers_checkpoint_is_judged_by_store_times(tmp_path):
    # a checkpoint without our flushed offset (as a RocketMQ broker writes it): the guard compares the store
    # time of the last message kept with physicMsgTimestamp
    with MessageStore(tmp_path, _cfg()) as s:
        for i in range(5):
            s.put("T", b"m%d" % i, queue_id=0)
            time.sleep(0.005)
        last = s.get_message("g", "T", 0, 4).messages[0]
    raw = bytearray((tmp_path / "checkpoint").read_bytes())
    assert struct.unpack(">q", raw[:8])[0] == last.store_timestamp
    raw[24:] = bytes(len(raw) - 24)
    (tmp_path / "checkpoint").write_bytes(bytes(raw))
    size = SMALL["mappedFileSizeCommitLog"]
    with open(tmp_path / "commitlog" / f"{last.commit_log_offset // size * size:020d}", "r+b") as f:
        f.seek(last.commit_log_offset % size + 4)
        f.write(b"\0" * 4)
    (tmp_path / "abort").touch()
    with pytest.raises(StoreRecoveryError, match="messages stored at"):
        MessageStore(tmp_path, _cfg())
