"""Retention: expired commitlog files, then the consume-queue files below the new minimum."""
from __future__ import annotations

import os
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conftest_durability import SMALL, all_messages  # noqa: E402

from store import GetMessageStatus, MessageStore, ReadOnlyStoreError, StoreConfig  # noqa: E402
from store.store_check import check_store  # noqa: E402

HOUR = 3600


def _store(path, **kw):
    return MessageStore(path, StoreConfig(**{**SMALL, "fileReservedTime": 72, **kw}))


def _fill(s, n=200):
    return s.put_batch("Ret", [b"r%04d" % i + b"." * 40 for i in range(n)], queue_id=[i % 2 for i in range(n)])


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
