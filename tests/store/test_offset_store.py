"""OffsetStore: RocketMQ's operations over config/consumerOffset.json, atomic and safe between processes."""
from __future__ import annotations

import json
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conftest_durability import start_python  # noqa: E402

from store import OffsetStore, ReadOffsetType  # noqa: E402
from store.offset_store import OffsetFileWarning  # noqa: E402


def _file(path):
    return path / "config" / "consumerOffset.json"


def test_persisted_in_consumer_offset_manager_shape(tmp_path):
    o = OffsetStore(tmp_path, "g1")
    o.update_offset(("T", 0), 17)
    o.update_offset(("T", 3), 4)
    o.update_offset(("U", 1), 9)
    o.persist_all()
    data = json.loads(_file(tmp_path).read_text())
    assert data == {"offsetTable": {"T@g1": {"0": 17, "3": 4}, "U@g1": {"1": 9}}}
    fresh = OffsetStore(tmp_path, "g1")
    fresh.load()
    assert fresh.clone_offset_table("T") == {0: 17, 3: 4}
    assert fresh.read_offset(("U", 1), ReadOffsetType.READ_FROM_MEMORY) == 9


def test_reads_a_broker_file_with_fastjson_unquoted_keys(tmp_path):
    _file(tmp_path).parent.mkdir(parents=True)
    _file(tmp_path).write_text('{"offsetTable":{"T@g":{0:17,1:5},"T@other":{0:99}},"dataVersion":{"counter":3}}')
    o = OffsetStore(tmp_path, "g")
    o.load()
    assert o.clone_offset_table("T") == {0: 17, 1: 5}
    o.update_offset(("T", 0), 18)
    o.persist(("T", 0))
    data = json.loads(_file(tmp_path).read_text())
    assert data["offsetTable"] == {"T@g": {"0": 18, "1": 5}, "T@other": {"0": 99}}
    assert data["dataVersion"] == {"counter": 3}  # what we do not own is kept


def test_read_offset_types_and_minus_one_when_none(tmp_path):
    writer = OffsetStore(tmp_path, "g")
    writer.update_offset(("T", 0), 5)
    writer.persist_all()
    o = OffsetStore(tmp_path, "g")
    assert o.read_offset(("T", 0), ReadOffsetType.READ_FROM_MEMORY) == -1
    assert o.read_offset(("T", 0), ReadOffsetType.READ_FROM_STORE) == 5
    assert o.read_offset(("T", 0), ReadOffsetType.READ_FROM_MEMORY) == 5  # kept in memory, as RocketMQ
    o.update_offset(("T", 0), 8)
    assert o.read_offset(("T", 0), ReadOffsetType.MEMORY_FIRST_THEN_STORE) == 8
    assert o.read_offset(("T", 0), ReadOffsetType.READ_FROM_STORE) == 5
    assert o.read_offset(("T", 1), ReadOffsetType.MEMORY_FIRST_THEN_STORE) == -1
    assert o.read_offset(("T", 9), "READ_FROM_STORE") == -1


def test_increase_only_and_remove(tmp_path):
    o = OffsetStore(tmp_path, "g")
    o.update_offset(("T", 0), 10)
    o.update_offset(("T", 0), 7, increase_only=True)
    assert o.read_offset(("T", 0), ReadOffsetType.READ_FROM_MEMORY) == 10
    o.update_offset(("T", 0), 7)
    assert o.read_offset(("T", 0), ReadOffsetType.READ_FROM_MEMORY) == 7
    o.update_offset(("T", 1), 3)
    o.persist_all()
    o.remove_offset(("T", 1))
    assert o.clone_offset_table("T") == {0: 7}
    o.persist_all()
    assert json.loads(_file(tmp_path).read_text())["offsetTable"] == {"T@g": {"0": 7}}


def test_atomic_write_keeps_the_previous_version_and_load_falls_back_to_it(tmp_path):
    o = OffsetStore(tmp_path, "g")
    o.update_offset(("T", 0), 1)
    o.persist_all()
    o.update_offset(("T", 0), 2)
    o.persist_all()
    bak = _file(tmp_path).with_name("consumerOffset.json.bak")
    assert json.loads(bak.read_text())["offsetTable"]["T@g"] == {"0": 1}
    assert [n for n in os.listdir(_file(tmp_path).parent) if n.endswith(".tmp")] == []
    for damage in ('{"offsetTable": {"T@g": {"0": 2', "", None):  # torn, empty, missing
        if damage is None:
            _file(tmp_path).unlink()
        else:
            _file(tmp_path).write_text(damage)
        fresh = OffsetStore(tmp_path, "g")
        with pytest.warns(OffsetFileWarning, match="consumerOffset.json.bak"):
            fresh.load()
        assert fresh.read_offset(("T", 0), ReadOffsetType.READ_FROM_MEMORY) == 1


def test_nothing_committed_yet_is_not_a_warning(tmp_path, recwarn):
    o = OffsetStore(tmp_path, "g")
    o.load()
    assert o.read_offset(("T", 0)) == -1
    assert not [w for w in recwarn if issubclass(w.category, OffsetFileWarning)]


def test_bad_arguments_name_the_value(tmp_path):
    with pytest.raises(ValueError, match="group"):
        OffsetStore(tmp_path, "a@b")
    o = OffsetStore(tmp_path, "g")
    with pytest.raises(ValueError, match="queue_id"):
        o.update_offset(("T", -1), 3)
    with pytest.raises(ValueError, match="offset"):
        o.update_offset(("T", 0), -5)
    with pytest.raises(ValueError, match="mq"):
        o.update_offset("T", 3)
    with pytest.raises(ValueError, match="read_type"):
        o.read_offset(("T", 0), "FROM_NOWHERE")


COMMITTER = """
    import sys
    from store import OffsetStore
    path, group, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    o = OffsetStore(path, group)
    o.load()
    for i in range(1, rounds + 1):
        for q in range(4):
            o.update_offset(("Shared", q), i * 10 + q)
        o.persist_all()
"""


def test_two_processes_committing_different_groups_keep_each_others_offsets(tmp_path):
    rounds = 80
    procs = [start_python(COMMITTER, tmp_path, g, rounds) for g in ("ga", "gb", "gc")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
    table = json.loads(_file(tmp_path).read_text())["offsetTable"]
    for g in ("ga", "gb", "gc"):
        assert table[f"Shared@{g}"] == {str(q): rounds * 10 + q for q in range(4)}


def test_two_objects_of_one_group_on_different_queues_do_not_overwrite_each_other(tmp_path):
    a, b = OffsetStore(tmp_path, "g"), OffsetStore(tmp_path, "g")
    a.update_offset(("T", 0), 1)
    b.update_offset(("T", 1), 1)
    a.persist_all()
    b.persist_all()
    a.load()
    b.load()
    a.update_offset(("T", 0), 50)
    a.persist_all()
    b.update_offset(("T", 1), 60)
    b.persist_all()  # b loaded T/0 = 1 but did not change it: a's 50 stays
    fresh = OffsetStore(tmp_path, "g")
    fresh.load()
    assert fresh.clone_offset_table("T") == {0: 50, 1: 60}
