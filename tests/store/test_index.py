"""RocketMQ's IndexFile in the store: the bytes of index/ files, queries by key / unique key / offset msgId, files
rolling when full, catch-up after a crash (a real SIGKILL) or an index-less writer, retention."""
from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
import time

import pytest

from store import MessageStore, StoreConfig
from store.index_file import key_hash

SMALL = dict(maxHashSlotNum=64, maxIndexNum=40)


def _files(path):
    d = os.path.join(path, "index")
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def _entries(path, name, slots, num):
    """(header, entries) of an index file read by hand from RocketMQ's layout."""
    with open(os.path.join(path, "index", name), "rb") as f:
        raw = f.read()
    assert len(raw) == 40 + 4 * slots + 20 * num
    header = struct.unpack_from(">qqqqii", raw, 0)
    entries = [struct.unpack_from(">iqii", raw, 40 + 4 * slots + 20 * i) for i in range(1, header[5])]
    return header, entries, raw


def test_java_hash_of_keys():
    assert key_hash("hello") == 99162322  # "hello".hashCode()
    assert key_hash("polygenelubricants") == 0  # hashCode() is Integer.MIN_VALUE: abs() stays negative -> 0
    assert key_hash("Aa") == key_hash("BB") == 2112


def test_layout_entries_and_slots_as_rocketmq_writes_them(tmp_path):
    cfg = StoreConfig(**SMALL)
    with MessageStore(tmp_path, cfg) as s:
        r = s.put_batch("T", [b"a", b"b", b"c"], keys=[["k1", "shared"], "k2  shared", ["é😀"]])
    names = _files(tmp_path)
    assert len(names) == 1 and len(names[0]) == 17 and names[0].isdigit()  # yyyyMMddHHmmssSSS
    header, entries, raw = _entries(tmp_path, names[0], 64, 40)
    begin_ts, end_ts, begin_phy, end_phy, slot_count, count = header
    uniq = [u.as_py() for u in r.uniq_keys]
    want = [("T#" + uniq[0], 0), ("T#k1", 0), ("T#shared", 0), ("T#" + uniq[1], 1), ("T#k2", 1),
            ("T#shared", 1), ("T#" + uniq[2], 2), ("T#é😀", 2)]
    assert count == len(want) + 1  # entry 0 is never used
    assert [(e[0], e[1]) for e in entries] == [(key_hash(k), r[i].commit_log_offset) for k, i in want]
    assert begin_phy == r[0].commit_log_offset and end_phy == r[2].commit_log_offset and begin_ts <= end_ts
    assert slot_count == len({key_hash(k) % 64 for k, _ in want})
    # each slot holds its newest entry and each entry chains to the one before it in its slot (0: none); the
    # generated unique keys are random, so which keys share a slot is worked out here, not assumed
    heads: dict[int, int] = {}
    chain = []
    for n, (k, _) in enumerate(want, start=1):
        chain.append(heads.get(key_hash(k) % 64, 0))
        heads[key_hash(k) % 64] = n
    assert [e[3] for e in entries] == chain
    assert chain[5] >= 3  # "shared"'s second entry chains to its first, or to a unique key hashed after it
    assert {slot: struct.unpack_from(">i", raw, 40 + 4 * slot)[0] for slot in range(64)} == \
        {slot: heads.get(slot, 0) for slot in range(64)}
    assert entries[0][2] == 0


def test_queries_by_key_unique_key_time_range_and_offset_id(tmp_path):
    with MessageStore(tmp_path, StoreConfig(**SMALL)) as s:
        first = s.put_batch("T", [b"old"], keys=["order-1"])
        t_mid = int(time.time() * 1000) + 1
        time.sleep(1.1)  # entries keep whole seconds after the file's begin
        s.put_batch("T", [b"new", b"other"], keys=["order-1", "order-2"])
        s.put_batch("U", [b"elsewhere"], keys=["order-1"])
        assert [m.body for m in s.query_message("T", "order-1")] == [b"new", b"old"]  # newest first
        assert [m.body for m in s.query_message("T", "order-1", max_num=1)] == [b"new"]
        assert [m.body for m in s.query_message("T", "order-1", begin=t_mid)] == [b"new"]
        assert [m.body for m in s.query_message("T", "order-1", end=t_mid)] == [b"old"]
        assert s.query_message("T", "nope") == [] and s.query_message("V", "order-1") == []
        uniq = first.uniq_keys[0].as_py()
        assert s.query_message_by_unique_key("T", uniq).body == b"old"
        assert s.query_message("T", uniq) == []  # a unique key is not a KEYS entry
        assert s.view_message_by_offset_id(first[0].msg_id).body == b"old"
        assert s.view_message_by_offset_id(first[0].msg_id[:-4] + "FFFF") is None
        with pytest.raises(ValueError, match="offset message id"):
            s.view_message_by_offset_id("ABCD")
        res = s.query_offsets("T", "order-1")
        assert res.index_last_update_phy_offset == s.query_message("U", "order-1")[0].commit_log_offset
    with MessageStore(tmp_path, StoreConfig(**SMALL), read_only=True) as r:  # a reader: same answers
        assert [m.body for m in r.query_message("T", "order-1")] == [b"new", b"old"]


def test_files_roll_when_full_and_queries_span_them(tmp_path):
    with MessageStore(tmp_path, StoreConfig(**SMALL)) as s:
        for i in range(5):  # 5 x 20 messages x 2 entries: 200 entries, 39 a file
            s.put_batch("T", [b"x%d" % (i * 20 + j) for j in range(20)],
                        keys=[f"k{(i * 20 + j) % 7}" for j in range(20)])
        assert len(_files(tmp_path)) == 6
        assert len(s.query_message("T", "k3", max_num=100)) == len([i for i in range(100) if i % 7 == 3])
        # a new file begins where the previous one ended
        headers = [_entries(tmp_path, n, 64, 40)[0] for n in _files(tmp_path)]
        assert all(h[5] == 40 for h in headers[:-1])


def test_disabled_index_writes_nothing_and_a_later_open_catches_up(tmp_path):
    with MessageStore(tmp_path, StoreConfig(messageIndexEnable=False, **SMALL)) as s:
        s.put_batch("T", [b"a", b"b"], keys=["k1", "k2"])
    assert _files(tmp_path) == []
    with MessageStore(tmp_path, StoreConfig(**SMALL)) as s:  # an index-less writer's records, indexed at open
        assert [m.body for m in s.query_message("T", "k2")] == [b"b"]
        s.put_batch("T", [b"c"], keys=["k2"])
        assert [m.body for m in s.query_message("T", "k2")] == [b"c", b"b"]
    os.remove(os.path.join(tmp_path, "index", _files(tmp_path)[0]))  # a deleted index is rebuilt in full
    with MessageStore(tmp_path, StoreConfig(**SMALL)) as s:
        assert [m.body for m in s.query_message("T", "k2")] == [b"c", b"b"]
    # a crash right after a new index file was made leaves it empty: the catch-up adds nothing twice
    from store.index_file import IndexFile
    IndexFile(os.path.join(tmp_path, "index", "99991231235959999"), 64, 40, True, create=True).close()
    with MessageStore(tmp_path, StoreConfig(**SMALL)) as s:
        assert len(s.query_offsets("T", "k2").offsets) == 2
        s.put("T", b"d", keys="k2")
        assert [m.body for m in s.query_message("T", "k2")] == [b"d", b"c", b"b"]


def test_two_writers_on_one_store_index_each_others_records(tmp_path):
    cfg = StoreConfig(**SMALL)
    with MessageStore(tmp_path, cfg) as a, MessageStore(tmp_path, cfg) as b:
        a.put("T", b"1", keys="k")
        b.put("T", b"2", keys="k")
        a.put("T", b"3", keys="k")
        for s in (a, b):
            assert [m.body for m in s.query_message("T", "k")] == [b"3", b"2", b"1"]


def test_retention_removes_index_files_pointing_only_into_removed_commitlog_files(tmp_path):
    cfg = StoreConfig(mappedFileSizeCommitLog=4096, fileReservedTime=0, **SMALL)
    with MessageStore(tmp_path, cfg) as s:
        offsets = {}
        for i in range(12):
            offsets[i] = list(s.put_batch("T", [bytes(300)] * 4, keys=[f"b{i}"] * 4).commit_log_offsets)
        before = _files(tmp_path)
        summary = s.clean_expired(now=time.time() + 10)
        after = _files(tmp_path)
        cl_min = s.commit_log_min_offset()
        assert summary.commit_log_files_deleted and 0 < summary.index_files_deleted == len(before) - len(after)
        for n in after[:-1]:
            assert _entries(tmp_path, n, 64, 40)[0][3] >= cl_min  # each kept file reaches into the log
        for i in (0, 10, 11):  # what is left of each batch in the log
            assert sorted(m.commit_log_offset for m in s.query_message("T", f"b{i}")) == \
                [o for o in offsets[i] if o >= cl_min]


_CHILD = r"""
import sys
from store import MessageStore, StoreConfig
s = MessageStore(sys.argv[1], StoreConfig(maxHashSlotNum=997, maxIndexNum=3000))
i = 0
while True:
    s.put_batch("T", [b"m%d" % (i + j) for j in range(50)],
                keys=["k%d g%d" % (i + j, (i + j) // 50) for j in range(50)])
    i += 50
    if i == 500:
        print("go", flush=True)
"""


def test_sigkill_during_puts_then_recovery_rebuilds_the_index(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(tmp_path)], stdout=subprocess.PIPE,
                             cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    try:
        assert child.stdout.readline().strip() == b"go"
        time.sleep(0.3)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    assert os.path.exists(os.path.join(tmp_path, "abort"))
    with MessageStore(tmp_path, StoreConfig(maxHashSlotNum=997, maxIndexNum=3000)) as s:
        n = sum(s.max_offset("T", q) for q in s.queues("T"))
        assert n >= 500
        for i in list(range(0, n, 7)) + [n - 1]:  # every stored message is found by its key
            assert [m.body for m in s.query_message("T", f"k{i}")] == [b"m%d" % i], i
        assert len(s.query_message("T", f"g{(n - 1) // 50}")) == (n - 1) % 50 + 1
        assert s.query_message("T", f"k{n}") == []


def test_rmq_query_by_key_msg_id_and_offset_msg_id_on_a_store(tmp_path, capsys):
    from rmq_cli.cli import main
    with MessageStore(tmp_path, StoreConfig(**SMALL)) as s:
        r = s.put_batch("T", [b"a", b"b", b"c"], keys=["k1", "k2 k1", "k3"])
    args = ["-s", str(tmp_path), "--config", os.devnull, "query"]
    assert main(args + ["-t", "T", "-k", "k1"]) == 0
    out, err = capsys.readouterr()
    assert [line.rsplit("| ", 1)[1] for line in out.splitlines()] == ["b", "a"] and "found 2 messages" in err
    assert main(args + ["-t", "T", "-k", "k1", "--end", "2000-01-01T00:00:00"]) == 0
    assert capsys.readouterr().out == ""
    assert main(args + ["-t", "T", "-i", r.uniq_keys[2].as_py(), "--json"]) == 0
    assert '"body": "c"' in capsys.readouterr().out
    assert main(args + ["--offset-msg-id", r[1].msg_id]) == 0
    assert capsys.readouterr().out.endswith("| b\n")
    assert main(args + ["-t", "T", "-i", "00" * 16]) == 1
    assert "no message with msgId" in capsys.readouterr().err
    for bad, why in ((["-k", "k1"], "--key needs --topic"), (["--offset-msg-id", "xyz"], "--offset-msg-id"),
                     (["-t", "T", "-k", "k", "--begin", "soon"], "--begin 'soon'")):
        assert main(args + bad) == 2
        assert why in capsys.readouterr().err


def test_a_brokers_index_of_another_geometry_is_read_by_its_size(tmp_path):
    with MessageStore(tmp_path, StoreConfig(maxHashSlotNum=50, maxIndexNum=200)) as s:
        s.put_batch("T", [b"a", b"b"], keys=["k1", "k2"])
    os.remove(os.path.join(tmp_path, ".rmq-spark"))  # as a broker's copy: no record of the geometry
    with MessageStore(tmp_path, read_only=True) as r:  # RocketMQ's default geometry configured
        assert [m.body for m in r.query_message("T", "k2")] == [b"b"]


def test_generated_unique_keys_carry_the_time_where_a_java_client_reads_it(tmp_path):
    """MessageClientIDSetter.getNearlyTimeFromID: bytes 10..13 of the id are ms since the month's start (local);
    a Java client's viewMessage(topic, msgId) queries the index from that time less 1 s."""
    import datetime
    with MessageStore(tmp_path, StoreConfig(**SMALL)) as s:
        r = s.put_batch("T", [b"x"] * 70_000)  # more than a 16-bit counter: the time runs ahead by a ms
        stored = s.query_message_by_unique_key("T", r.uniq_keys[-1].as_py()).store_timestamp
    first, last = (bytes.fromhex(r.uniq_keys[i].as_py()) for i in (0, -1))
    now = datetime.datetime.now()
    month = datetime.datetime(now.year, now.month, 1).timestamp() * 1000
    for raw in (first, last):
        nearly = month + int.from_bytes(raw[10:14], "big")
        assert nearly - 1000 <= stored <= nearly + 60_000
    assert int.from_bytes(last[10:16], "big") - int.from_bytes(first[10:16], "big") == 69_999


def test_a_single_put_is_indexed_by_its_unique_key(tmp_path):
    with MessageStore(tmp_path, StoreConfig(**SMALL)) as s:
        one = s.put("T", b"single")  # no keys: the single-record append (put_one)
        assert s.query_message_by_unique_key("T", one.uniq_key).body == b"single"
        assert s.view_message_by_offset_id(one.msg_id).body == b"single"


def test_slots_a_writer_killed_before_the_header_left_are_repaired(tmp_path):
    cfg = StoreConfig(**SMALL)
    with MessageStore(tmp_path, cfg) as s:
        s.put_batch("T", [b"a", b"b"], keys=["k", "k"])
        path = os.path.join(tmp_path, "index", _files(tmp_path)[0])
        with open(path, "rb") as f:
            header = f.read(40)
        s.put_batch("T", [b"c"], keys=["k"])  # its entries and slots written...
        with open(path, "r+b") as f:
            f.write(header)  # ...but not the header's count: as a writer killed just before it
    with MessageStore(tmp_path, cfg) as s:  # the catch-up indexes "c" again, over the uncounted entries
        assert [m.body for m in s.query_message("T", "k")] == [b"c", b"b", b"a"]
        assert len(s.query_offsets("T", "k").offsets) == 3


def test_deferred_index_entries_are_written_once_found_by_queries_and_kept_by_close(tmp_path):
    """put_many(defer_index=True), the broker's single sends: the entries wait for flush_index(); a query in the
    same store writes them first, another writer's append in between indexes them and they are not written twice,
    and close() writes what is still waiting."""
    cfg = StoreConfig(**SMALL)

    def sends(store, n):
        return store.put_many([{"topic": "T", "body": b"m%d" % i} for i in range(n)], defer_index=True)

    with MessageStore(tmp_path, cfg) as a, MessageStore(tmp_path, cfg) as b:
        first = sends(a, 3) + sends(a, 2)
        assert a.has_index_pending() and not _files(tmp_path)  # nothing indexed yet: no index file
        other = b.put("T", b"other", keys="k")  # the other writer indexes from the index's end: a's five too
        later = sends(a, 4)
        a.flush_index()
        assert not a.has_index_pending()
        for r in first + later + [other]:
            assert len(a.query_offsets("T", r.uniq_key).offsets) == 1, r  # each entry once
        name, = _files(tmp_path)
        header, entries, _ = _entries(tmp_path, name, SMALL["maxHashSlotNum"], SMALL["maxIndexNum"])
        assert len(entries) == 5 + 4 + 2  # a's nine unique keys, b's unique key and its key "k"
        assert header[3] == later[-1].commit_log_offset  # the index's end: the last record
        waiting = sends(a, 1)[0]
        assert a.query_message_by_unique_key("T", waiting.uniq_key).body == b"m0"  # a query writes them first
        closing = sends(a, 2)
    with MessageStore(tmp_path, cfg, read_only=True) as r:
        assert [r.query_message_by_unique_key("T", c.uniq_key).body for c in closing] == [b"m0", b"m1"]


def test_an_index_file_takes_the_disk_its_keys_touched_not_its_whole_slot_table(tmp_path):
    """A stock IndexFile is sparse and mapped: only the pages written take disk. Ours reserves blocks before it
    writes (a full disk is an error, not a SIGBUS), chunk by chunk where the keys land: a store of a few keyed
    messages costs kilobytes of its 20 MB of default slots, and a full one still finds every key."""
    with MessageStore(tmp_path) as s:
        few = s.put_batch("T", [b"a", b"b", b"c"], keys=["k1", "k2", "k3"])
        (name,) = _files(tmp_path)
        st = os.stat(os.path.join(tmp_path, "index", name))
        assert st.st_size > 20_000_000 and st.st_blocks * 512 < 600_000, st.st_blocks
        keys = [f"key-{i}" for i in range(20_000)]
        many = s.put_batch("T", [b"x"] * len(keys), keys=keys)
        assert [m.body for m in s.query_message("T", "k2")] == [b"b"]
        for i in (0, 7_777, 19_999):
            assert [m.commit_log_offset for m in s.query_message("T", keys[i])] == [many[i].commit_log_offset]
        assert few[0].commit_log_offset == 0
