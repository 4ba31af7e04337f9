"""put_batch(atomic=True): after a crash anywhere inside the append, the batch is wholly there or wholly gone."""
import os
import shutil

import pytest

from store import MessageStore, StoreConfig
from store.store_check import check_store

CFG = dict(mappedFileSizeCommitLog=2048, mappedFileSizeConsumeQueue=20 * 8,
           maxHashSlotNum=64, maxIndexNum=256)  # a small IndexFile: the store is copied once per cut


def bodies_in(path, topic="T"):
    with MessageStore(path, StoreConfig(**CFG)) as s:
        return sorted(b for q in s.queues(topic) for batch in s.scan(topic, q, 0)
                      for b in batch.column("body").to_pylist())


@pytest.mark.parametrize("atomic", [True, False])
def test_batch_cut_at_any_byte_is_all_or_nothing_only_when_atomic(tmp_path, atomic):
    before = tmp_path / "before"
    with MessageStore(before, StoreConfig(**CFG)) as s:
        s.create_topic("T", 2)
        s.put_batch("T", [b"old-%d" % i for i in range(3)], queue_id=0)
        start = s.commit_log_max_offset()
    after = tmp_path / "after"
    shutil.copytree(before, after)
    batch = [b"new-%d" % i for i in range(12)]  # spans two commitlog files
    with MessageStore(after, StoreConfig(**CFG)) as s:
        s.put_batch("T", batch, queue_id=[i % 2 for i in range(12)], atomic=atomic)
        end = s.commit_log_max_offset()
    assert end // 2048 > start // 2048
    old = [b"old-%d" % i for i in range(3)]
    partial_seen = False
    for cut in list(range(start + 1, end, 41)) + [end]:
        crashed = tmp_path / f"crash-{cut}"
        shutil.rmtree(crashed, ignore_errors=True)
        shutil.copytree(before, crashed)  # consume queues and committed end as before the append
        for name in sorted(os.listdir(after / "commitlog")):
            lo = int(name)
            src = open(after / "commitlog" / name, "rb").read()
            keep = bytearray(src[:max(0, min(len(src), cut - lo))])
            if lo + len(keep) <= start:
                continue
            with open(crashed / "commitlog" / name, "r+b" if (crashed / "commitlog" / name).exists() else "wb") as f:
                f.write(keep)
                f.truncate(len(src))
        (crashed / "abort").touch()  # the writer died: abnormal recovery
        got = bodies_in(crashed)
        new = [b for b in got if b.startswith(b"new")]
        assert set(old) <= set(got)
        if atomic:
            assert new in ([], sorted(batch)), f"cut at {cut}: {len(new)} of {len(batch)} visible"
            if cut == end:
                assert len(new) == len(batch)
        elif 0 < len(new) < len(batch):
            partial_seen = True
        assert check_store(str(crashed)).ok
        with MessageStore(crashed, StoreConfig(**CFG)) as s:  # the store takes appends again
            r = s.put("T", b"later", queue_id=0)
            assert r.queue_offset == 3 + (len([b for b in new if int(b[4:]) % 2 == 0]))
        shutil.rmtree(crashed)
    if not atomic:
        assert partial_seen  # without atomic=True the complete records of a torn batch are kept


def test_exclusive_is_reentrant_and_serialises_check_then_append(tmp_path):
    with MessageStore(tmp_path / "s") as s:
        with s.exclusive():
            with s.exclusive():
                s.put("T", b"a", queue_id=0)
            s.put("T", b"b", queue_id=0)  # still held by the outer block
        assert s.max_offset("T", 0) == 2
