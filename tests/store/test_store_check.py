"""check_store from Python: a good store passes; each kind of damage is found and named by file and position."""
from __future__ import annotations

import hashlib
import os
import struct

import pytest

from store import MessageStore, StoreConfig
from store.store_check import check_store

CONFIG = StoreConfig(mappedFileSizeCommitLog=4096, mappedFileSizeConsumeQueue=20 * 8, defaultTopicQueueNums=2)


@pytest.fixture
def store_path(tmp_path):
    path = tmp_path / "store"
    with MessageStore(path, CONFIG) as store:
        store.put_batch("Orders", [f"order {i}" for i in range(40)], tags=[["TagA", "TagB", None][i % 3]
                                                                          for i in range(40)],
                        keys=[f"k{i}" for i in range(40)], properties={"region": "EU"})
        store.put_batch("Payments", [b"\x00\xff" * 30] * 10, queue_id=1, tags="Aa")
    return path


def cl_file(path, offset):
    return path / "commitlog" / f"{offset - offset % CONFIG.mappedFileSizeCommitLog:020d}"


def patch(file, position, data):
    with open(file, "r+b") as f:
        f.seek(position)
        f.write(data)


def message(path, topic, queue_id, offset):
    with MessageStore(path, read_only=True) as store:
        return store.get_message("g", topic, queue_id, offset, 1).messages[0]


def digest(path):
    h = hashlib.sha256()
    for root, _, files in sorted(os.walk(path)):
        for name in sorted(files):
            full = os.path.join(root, name)
            h.update(full.encode())
            h.update(open(full, "rb").read())
    return h.hexdigest()


def test_a_good_store_passes_and_is_not_modified(store_path):
    before = digest(store_path)
    report = check_store(store_path)
    assert report.ok, [str(p) for p in report.problems]
    assert report.records == 50 and report.units == 50
    assert report.commit_log_files > 1 and report.consume_queues == 4  # two topics of two queues (one empty)
    assert digest(store_path) == before


def test_flipped_body_byte(store_path):
    m = message(store_path, "Orders", 1, 5)
    file = cl_file(store_path, m.commit_log_offset)
    rel = m.commit_log_offset % CONFIG.mappedFileSizeCommitLog
    body_at = open(file, "rb").read().index(m.body, rel)
    patch(file, body_at, b"#")
    report = check_store(store_path)
    assert not report.ok
    [p] = report.errors
    assert p.file == str(file) and p.position == rel and "body CRC mismatch" in p.message


def test_bad_magic_stops_the_file_and_units_into_it_are_reported(store_path):
    m = message(store_path, "Orders", 0, 3)
    file = cl_file(store_path, m.commit_log_offset)
    rel = m.commit_log_offset % CONFIG.mappedFileSizeCommitLog
    patch(file, rel + 4, b"\x12\x34\x56\x78")
    report = check_store(store_path)
    first = report.errors[0]
    assert first.file == str(file) and first.position == rel and "MAGICCODE 0x12345678" in first.message
    assert any("Orders/0 unit at queue offset 3" in p.message and "could not read" in p.message
               for p in report.errors)


def test_physical_offset_mismatch(store_path):
    m = message(store_path, "Payments", 1, 2)
    file = cl_file(store_path, m.commit_log_offset)
    rel = m.commit_log_offset % CONFIG.mappedFileSizeCommitLog
    patch(file, rel + 28, struct.pack(">q", 7))
    [p] = check_store(store_path).errors
    assert p.position == rel and "PHYSICALOFFSET is 7" in p.message


@pytest.mark.parametrize("field,value,expected", [
    ("offset", 1, "which is not the start of a record"),
    ("size", 9, "size 9 but the record's TOTALSIZE is"),
    ("tags", 2112, "tagsCode 2112 but the hashCode of the record's TAGS is"),
])
def test_corrupt_consume_queue_unit(store_path, field, value, expected):
    # Orders/1 unit 10 is the third unit of the queue's second file
    cq = store_path / "consumequeue" / "Orders" / "1" / f"{160:020d}"
    units = open(cq, "rb").read()
    offset, size, tags = struct.unpack_from(">qiq", units, 40)
    if field == "offset":
        patch(cq, 40, struct.pack(">q", offset + value))
    elif field == "size":
        patch(cq, 48, struct.pack(">i", value))
    else:
        patch(cq, 52, struct.pack(">q", value))
    report = check_store(store_path)
    assert not report.ok
    [p] = report.errors
    assert p.file == str(cq) and p.position == 40
    assert "Orders/1 unit at queue offset 10" in p.message and expected in p.message


def test_tag_hash_collision_is_not_a_match(tmp_path):
    # "Aa" and "BB" share String.hashCode: a unit of "BB" carrying the code of "Aa" is consistent
    path = tmp_path / "s"
    with MessageStore(path, CONFIG) as store:
        store.put_batch("T", ["x", "y"], tags=["Aa", "BB"], queue_id=0)
    report = check_store(path)
    assert report.ok


def test_unit_pointing_at_another_queues_record(store_path):
    cq0 = store_path / "consumequeue" / "Orders" / "0" / f"{0:020d}"
    cq1 = store_path / "consumequeue" / "Orders" / "1" / f"{0:020d}"
    other = open(cq1, "rb").read()[20:40]
    patch(cq0, 20, other)
    report = check_store(store_path)
    messages = " ".join(p.message for p in report.errors)
    assert "Orders/0 unit at queue offset 1" in messages and "QUEUEID 1" in messages
    assert all(p.file == str(cq0) for p in report.errors)


def test_hole_in_a_consume_queue(store_path):
    cq = store_path / "consumequeue" / "Orders" / "0" / f"{0:020d}"
    patch(cq, 2 * 20, bytes(20))
    [p] = check_store(store_path).errors
    assert p.file == str(cq) and p.position == 40 and "is empty but later units are written" in p.message


def test_missing_tail_units_are_a_warning(store_path):
    # A crash between the commitlog write and the dispatch leaves records without units; recovery adds them.
    with MessageStore(store_path, read_only=True) as store:
        last = store.max_offset("Payments", 1) - 1
    cq = store_path / "consumequeue" / "Payments" / "1" / f"{(last // 8) * 160:020d}"
    patch(cq, (last % 8) * 20, bytes(20))
    report = check_store(store_path)
    assert report.ok
    [w] = report.warnings
    assert "1 record of Payments/1 from queue offset 9 is not in the consume queue" in w.message


def test_scales_by_arrays(tmp_path):
    # many messages over many small files: every record and unit is visited
    path = tmp_path / "big"
    cfg = StoreConfig(mappedFileSizeCommitLog=64 * 1024, mappedFileSizeConsumeQueue=20 * 1000)
    with MessageStore(path, cfg) as store:
        for _ in range(4):
            store.put_batch("Big", [b"v" * 50] * 5000, tags=["A", "B", "C", "D", "E"] * 1000)
    report = check_store(path)
    assert report.ok and report.records == 20000 and report.units == 20000
    assert report.commit_log_files > 10


def test_a_record_with_a_wrong_totalsize_is_an_error_not_a_message_missing_from_a_queue(tmp_path):
    with MessageStore(tmp_path) as s:
        r = s.put_batch("T", [b"x" * 50] * 500, queue_id=0)[250]
    with open(tmp_path / "commitlog" / f"{0:020d}", "r+b") as f:
        f.seek(r.commit_log_offset)
        f.write(struct.pack(">i", 9999))
    report = check_store(str(tmp_path))
    texts = [str(p) for p in report.problems]
    assert any("field lengths do not add up to TOTALSIZE 9999" in t for t in texts)
    assert any("unit at queue offset 250: size 184 but the record's TOTALSIZE is 9999" in t for t in texts)
    assert not any("ends at 0" in t or "not in the consume queue" in t for t in texts)
