"""Retention: expired commitlog files, then the consume-queue files below the new minimum."""
from __future__ import annotations

import os
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conftest_durability import SMALL, all_messages  # noqa: E402
from store_fill import fill_store  # noqa: E402

from store import GetMessageStatus, MessageStore, ReadOnlyStoreError, StoreConfig  # noqa: E402
from store.store_check import check_store  # noqa: E402

HOUR = 3600


def _store(path, **kw):
    return MessageStore(path, StoreConfig(**{**SMALL, "fileReservedTime": 72, **kw}))


def _fill(s, n=200):
    return fill_store(s, n, topic="Ret", body=b"r%04d" + b"." * 40, queue_id=lambda i: i % 2)


def _commit_log_files(path):
    return sorted(os.listdir(os.path.join(path, "commitlog")))


def _age(path, names, seconds):
    t = time.time() - seconds
    for n in names:
        os.utime(os.path.join(path, "commitlog", n), (t, t))


def test_expired_files_go_oldest_first_and_min_offset_moves_up(tmp_path):
    with _store(tmp_path) as s:
        _fill(s)
        files = _commit_log_files(tmp_path)
        assert len(files) >= 4
        _age(tmp_path, files[:2], 73 * HOUR)  # the two oldest are past fileReservedTime
        _age(tmp_path, files[3:4], 73 * HOUR)  # expired too, but behind a young file: RocketMQ stops there
        summary = s.clean_expired()
        assert summary.commit_log_files_deleted == files[:2]
        assert _commit_log_files(tmp_path) == files[2:]
        new_min = int(files[2])
        assert summary.commit_log_min_offset == new_min == s.commit_log_min_offset()
        for q in (0, 1):
            m = s.min_offset("Ret", q)
            assert m > 0 and summary.min_offsets["Ret"][q] == m
            # below the minimum: OFFSET_TOO_SMALL, and next_begin_offset is the new minimum
            r = s.get_message("g", "Ret", q, 0)
            assert r.status == GetMessageStatus.OFFSET_TOO_SMALL and r.next_begin_offset == m
            r = s.get_message("g", "Ret", q, m)
            assert r.status == GetMessageStatus.FOUND
            assert r.messages[0].commit_log_offset >= new_min
        remaining = all_messages(s, "Ret")
        assert len(remaining) == sum(s.max_offset("Ret", q) - s.min_offset("Ret", q) for q in (0, 1))
    assert check_store(tmp_path, StoreConfig(**SMALL)).ok


def test_consume_queue_files_wholly_below_the_commitlog_minimum_are_deleted(tmp_path):
    with _store(tmp_path) as s:
        _fill(s, 400)
        cq_dir = tmp_path / "consumequeue" / "Ret" / "0"
        before = sorted(os.listdir(cq_dir))
        summary = s.clean_expired(now=time.time() + 100 * HOUR)  # every file but the last has expired
        assert len(_commit_log_files(tmp_path)) == 1
        after = sorted(os.listdir(cq_dir))
        assert summary.consume_queue_files_deleted > 0
        assert after == before[len(before) - len(after):]
        unit_file = SMALL["mappedFileSizeConsumeQueue"] // 20
        # what is left starts at a file that still reaches the commitlog
        assert int(after[0]) // 20 <= s.min_offset("Ret", 0) < int(after[0]) // 20 + unit_file


def test_the_file_being_written_is_never_deleted(tmp_path):
    with _store(tmp_path) as s:
        _fill(s)
        files = _commit_log_files(tmp_path)
        s.clean_expired(now=time.time() + 10_000 * HOUR)
        assert _commit_log_files(tmp_path) == files[-1:]
        r = s.put("Ret", b"still writable", queue_id=0)
        assert s.get_message("g", "Ret", 0, r.queue_offset).messages[0].body == b"still writable"
        assert s.min_offset("Ret", 0) <= r.queue_offset


def test_nothing_young_is_deleted(tmp_path):
    with _store(tmp_path) as s:
        _fill(s)
        files = _commit_log_files(tmp_path)
        summary = s.clean_expired()
        assert summary.commit_log_files_deleted == [] and _commit_log_files(tmp_path) == files
        assert s.min_offset("Ret", 0) == 0


def test_periodic_runs_honour_delete_when_and_disk_space(tmp_path):
    now = time.mktime((2030, 1, 1, 4, 30, 0, 0, 0, -1))  # 04:30 local time
    with _store(tmp_path, deleteWhen="03;05", diskMaxUsedSpaceRatio=75) as s:
        _fill(s)
        files = _commit_log_files(tmp_path)
        _age(tmp_path, files, 0)
        later = now  # seen from 2030, files written today have expired
        r = s.clean_expired(now=later, periodic=True, disk_used_ratio=10)
        assert r.commit_log_files_deleted == [] and "not a deleteWhen hour" in r.reason
        # a full disk cleans expired files at once, whatever the hour
        r = s.clean_expired(now=later, periodic=True, disk_used_ratio=80)
        assert r.commit_log_files_deleted == files[:-1] and "disk full" in r.reason


def test_periodic_run_in_a_delete_when_hour_and_forced_cleaning_above_85_percent(tmp_path):
    with _store(tmp_path, deleteWhen="04") as s:
        _fill(s)
        files = _commit_log_files(tmp_path)
        four = time.mktime((2030, 1, 1, 4, 10, 0, 0, 0, -1))
        _age(tmp_path, files, time.time() - four + 1 * HOUR)  # written an hour before `four`: young
        assert s.clean_expired(now=four, periodic=True, disk_used_ratio=10).commit_log_files_deleted == []
        # above diskSpaceCleanForciblyRatio even young files go, oldest first
        r = s.clean_expired(now=four, periodic=True, disk_used_ratio=90)
        assert r.commit_log_files_deleted == files[:-1]


def test_bad_delete_when_is_refused_by_name(tmp_path):
    with _store(tmp_path, deleteWhen="4am") as s:
        with pytest.raises(ValueError, match="deleteWhen"):
            s.clean_expired(now=time.time(), periodic=True, disk_used_ratio=10)


def test_read_only_store_refuses_to_clean(tmp_path):
    with _store(tmp_path) as s:
        _fill(s, 10)
    with MessageStore(tmp_path, read_only=True) as ro:
        with pytest.raises(ReadOnlyStoreError):
            ro.clean_expired()


def test_rmq_clean(tmp_path, capsys):
    from rmq_cli.cli import main
    with _store(tmp_path) as s:
        _fill(s)
    files = _commit_log_files(tmp_path)
    conf = tmp_path / "store.conf"
    conf.write_text("fileReservedTime=1\n")
    assert main(["--store", str(tmp_path), "--config", str(conf), "clean"]) == 0
    out = capsys.readouterr().out
    assert "deleted 0 commitlog files" in out and _commit_log_files(tmp_path) == files
    _age(tmp_path, files[:2], 2 * HOUR)
    assert main(["--store", str(tmp_path), "--config", str(conf), "clean", "--json"]) == 0
    import json
    summary = json.loads(capsys.readouterr().out)
    assert summary["commit_log_files_deleted"] == files[:2]
    assert summary["commit_log_min_offset"] == int(files[2])
    assert int(summary["min_offsets"]["Ret"]["0"]) > 0
    assert main(["--store", str(tmp_path / "missing"), "clean"]) == 2


def test_a_reader_in_another_object_copes_with_files_deleted_under_it(tmp_path):
    with _store(tmp_path) as s:
        _fill(s, 400)
        reader = MessageStore(tmp_path, read_only=True)
        try:
            assert reader.get_message("g", "Ret", 0, 0).status == GetMessageStatus.FOUND  # files listed, cached
            s.clean_expired(now=time.time() + 100 * HOUR)
            m = s.min_offset("Ret", 0)
            r = reader.get_message("g", "Ret", 0, 0)
            assert r.status == GetMessageStatus.OFFSET_TOO_SMALL and r.next_begin_offset == m
            r = reader.get_message("g", "Ret", 0, m)
            assert r.status == GetMessageStatus.FOUND
            assert sum(b.num_rows for b in reader.scan("Ret", 0, 0)) == s.max_offset("Ret", 0) - m
        finally:
            reader.close()


def test_rmq_check_explains_units_below_the_retention_minimum(tmp_path, capsys):
    from rmq_cli.cli import main
    with _store(tmp_path) as s:
        _fill(s)
        s.clean_expired(now=time.time() + 100 * HOUR)  # every commitlog file but the last has expired
    assert main(["--store", str(tmp_path), "check"]) == 0
    out = capsys.readouterr().out
    assert "check OK" in out
    assert "point below the commitlog's first file, at messages retention removed: expected" in out


def _reference_pass(path, cl_min):
    """Retention the simple way, the reference for the pass that reads single units: every queue's files mapped,
    each non-last file deleted while its last unit lies below cl_min, then min_offset of each queue. Run on a copy
    of the store."""
    deleted, mins = 0, {}
    with MessageStore(path, StoreConfig(**SMALL)) as s:
        for topic in s.topics():
            for q in s.queues(topic):
                cq = s.consume_queue(topic, q)
                cq.refresh()
                for f in list(cq.files.files[:-1]):
                    units = cq._file_units(f)
                    if not len(units) or units[-1]["size"] == 0 or int(units[-1]["offset"]) >= cl_min:
                        break
                    cq.files.delete_file(f)
                    deleted += 1
                mins.setdefault(topic, {})[q] = cq.min_offset(cl_min)
    return deleted, mins


def _spread(s, rounds, topics=("A", "B", "C"), start=0):
    """Uneven queues: some with several consume-queue files, one that stops being written early."""
    for r in range(start, start + rounds):
        for i, t in enumerate(topics):
            n = 1 if (t == "C" and r > 2) else 7 + 3 * i
            s.put_batch(t, [b"m%05d" % r + b"." * 30] * n, queue_id=[k % (i + 2) for k in range(n)])


def test_retention_result_equals_the_full_reading_pass_before_and_after_other_writers(tmp_path):
    """clean_expired reads a unit or two per queue (the first unit kept from the pass before while no other
    writer published): what it deletes and the min offsets it reports equal a pass that maps every file."""
    import shutil
    path, copy = tmp_path / "s", tmp_path / "copy"
    with _store(path) as s:
        for topic, n in (("A", 2), ("B", 3), ("C", 4)):
            s.create_topic(topic, n)
        _spread(s, 30)
        s.clean_expired(now=time.time())  # nothing expired yet: fills the first units
        for step in range(3):
            files = _commit_log_files(path)
            _age(path, files[:len(files) // 3 + 1], 73 * HOUR)
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(path, copy)
            cl_min_after = int(files[len(files) // 3 + 1])
            want_deleted, want_mins = _reference_pass(copy, cl_min_after)
            summary = s.clean_expired()
            assert summary.commit_log_min_offset == cl_min_after
            assert summary.consume_queue_files_deleted == want_deleted
            assert summary.min_offsets == want_mins
            assert want_deleted or step  # the first step deletes consume-queue files
            if step == 1:  # another writer appends (and publishes): the next pass reads the units again
                with _store(path) as other:
                    _spread(other, 10, start=100)
            else:
                _spread(s, 10, start=200 + step * 10)
            assert s.clean_expired(now=time.time(), periodic=True).min_offsets == \
                {t: {q: s.min_offset(t, q) for q in qs} for t, qs in summary.min_offsets.items()}
    assert check_store(path, StoreConfig(**SMALL)).ok


def test_a_cut_first_unit_is_read_again(tmp_path):
    """A recovery's cut zeroes units in place: the first unit retention remembered for the file is forgotten."""
    with _store(tmp_path) as s:
        s.create_topic("A", 2)
        _spread(s, 40, topics=("A",))
        cq = s.consume_queue("A", 0)
        s.clean_expired(now=time.time() + 100 * HOUR)
        first = cq.files.first()
        assert first.first_unit_position is not None
        first.truncate_to(0)
        assert first.first_unit_position is None
