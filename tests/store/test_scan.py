"""The vectorised scan agrees with the per-record pull path and with what was put, over random messages."""
import datetime

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from python_kernels import use_python_kernels

from rmq_common import message_codec as codec
from rmq_common import native
from store import SCAN_SCHEMA, CorruptRecordError, MessageStore, StoreConfig

text = st.text(alphabet=st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), max_size=12)
nonempty = text.filter(lambda s: s != "")
key_text = st.text(alphabet=st.characters(blacklist_characters="\x01\x02 ", blacklist_categories=("Cs",)),
                   min_size=1, max_size=8)
message = st.fixed_dictionaries({
    "body": st.binary(max_size=300),
    "tags": st.one_of(st.none(), nonempty),
    "keys": st.lists(key_text, max_size=3),
    "properties": st.dictionaries(nonempty.filter(lambda k: k not in ("TAGS", "KEYS", "UNIQ_KEY")), nonempty,
                                  max_size=4),
    "queue_id": st.integers(0, 2),
})


def rows_of(store, topic, queue_id, start=0, message_filter=None):
    rows = []
    for b in store.scan(topic, queue_id, start, message_filter=message_filter, batch_rows=7):
        assert b.schema == SCAN_SCHEMA
        rows += b.to_pylist()
    return rows


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(message, min_size=1, max_size=40))
def test_round_trip_put_batch_scan_and_get_message(tmp_path_factory, msgs):
    path = tmp_path_factory.mktemp("rt")
    with MessageStore(path, StoreConfig(mappedFileSizeCommitLog=2048, mappedFileSizeConsumeQueue=20 * 5)) as s:
        s.create_topic("T", 3)
        res = s.put_batch("T", [m["body"] for m in msgs], tags=[m["tags"] for m in msgs],
                          keys=[m["keys"] for m in msgs], properties=[m["properties"] for m in msgs],
                          queue_id=[m["queue_id"] for m in msgs])
        for q in range(3):
            want = [(m, res[i]) for i, m in enumerate(msgs) if m["queue_id"] == q]
            rows = rows_of(s, "T", q)
            pulled = []
            offset = 0
            while offset < s.max_offset("T", q):
                r = s.get_message("g", "T", q, offset, max_msgs=4)
                pulled += r.messages
                offset = r.next_begin_offset
            assert len(rows) == len(pulled) == len(want)
            for row, pm, (m, put) in zip(rows, pulled, want):
                assert row["body"] == pm.body == m["body"]
                tag = m["tags"] or None  # an empty tag is no tag
                assert row["tags"] == pm.tags == tag
                assert row["keys"] == pm.keys == m["keys"]
                props = dict(row["properties"])
                assert props == pm.properties
                for k, v in m["properties"].items():
                    assert props[k] == v
                assert props["UNIQ_KEY"] == put.uniq_key
                assert (row["queue_offset"], row["commit_log_offset"], row["msg_id"]) == (
                    put.queue_offset, put.commit_log_offset, put.msg_id) == (
                    pm.queue_offset, pm.commit_log_offset, pm.msg_id)
                assert row["store_host"] == pm.store_host and row["born_host"] == pm.born_host
                assert row["store_timestamp"] == datetime.datetime.fromtimestamp(
                    pm.store_timestamp / 1000, datetime.timezone.utc).replace(tzinfo=None)
                assert row["body_crc"] == pm.body_crc == codec.crc32(m["body"])


def test_scan_ranges_and_batches(tmp_path):
    with MessageStore(tmp_path / "s", StoreConfig(mappedFileSizeCommitLog=4096,
                                                  mappedFileSizeConsumeQueue=20 * 8)) as s:
        s.put_batch("T", [b"%d" % i for i in range(100)], queue_id=0)
        got = [r["body"] for r in rows_of(s, "T", 0, 10)]
        assert got == [b"%d" % i for i in range(10, 100)]
        batches = list(s.scan("T", 0, 5, 25, batch_rows=8))
        assert [b.num_rows for b in batches] == [8, 8, 4]
        assert batches[0].column("queue_offset").to_pylist() == list(range(5, 13))
        assert list(s.scan("T", 0, 100)) == []


def test_scan_returns_decompressed_bodies(tmp_path):
    plain = b"zstd body " * 30
    with MessageStore(tmp_path / "s") as s:
        s.put_batch("T", [codec.compress_body(plain, codec.COMPRESSION_ZSTD), b"plain"], queue_id=0,
                    sys_flag=[codec.COMPRESSED_FLAG | codec.COMPRESSION_ZSTD, 0])
        rows = rows_of(s, "T", 0)
        assert [r["body"] for r in rows] == [plain, b"plain"]
        assert s.get_message("g", "T", 0, 0).messages[0].body == plain


def test_scan_with_a_filter_reads_only_matching_records(tmp_path):
    from test_message_store import TagIn
    with MessageStore(tmp_path / "s") as s:
        s.put_batch("T", [b"%d" % i for i in range(1000)], tags=["A", "B", "C", "D"] * 250, queue_id=0)
        s.stats.update(consume_queue_units_scanned=0, commit_log_records_read=0)
        rows = rows_of(s, "T", 0, message_filter=TagIn("B"))
        assert [r["body"] for r in rows] == [b"%d" % i for i in range(1, 1000, 4)]
        assert s.stats == {"consume_queue_units_scanned": 1000, "commit_log_records_read": 250}


def test_scan_arrow_properties_input(tmp_path):
    props = pa.array([[("a", "1")], [("b", "2"), ("TAGS", "FromMap")]], pa.map_(pa.string(), pa.string()))
    with MessageStore(tmp_path / "s") as s:
        s.put_batch("T", pa.array(["x", "y"]), properties=props, queue_id=0)
        rows = rows_of(s, "T", 0)
        assert [r["tags"] for r in rows] == [None, "FromMap"]
        assert [dict(r["properties"]).get("a") for r in rows] == ["1", None]


def test_scan_of_ipv6_born_hosts_equals_get_message(tmp_path):
    with MessageStore(tmp_path / "s") as s:
        s.put_batch("T", [b"v4", b"v4b"], queue_id=0)
        s.put_batch("T", [b"v6"], queue_id=0, born_host="[2001:db8::1]:5555")
        rows = rows_of(s, "T", 0)
        pulled = s.get_message("g", "T", 0, 0).messages
        assert [r["born_host"] for r in rows] == [m.born_host for m in pulled]
        assert rows[-1]["born_host"] == "[2001:db8::1]:5555" and rows[-1]["sys_flag"] & codec.BORNHOST_V6_FLAG
        assert [r["msg_id"] for r in rows] == [m.msg_id for m in pulled]
        assert [r["body"] for r in rows] == [b"v4", b"v4b", b"v6"]


@pytest.mark.parametrize("make", [
    lambda: __import__("filters").MessageFilter.by_sql("a between 2 and 5 AND region <> 'us'"),
    lambda: __import__("filters").MessageFilter.by_tags("Aa || TagC"),
    lambda: __import__("filters").MessageFilter.by_sql("TAGS IS NULL"),
])
def test_real_filters_in_scan_equal_the_pull_path(tmp_path, make):
    f = make()
    with MessageStore(tmp_path / "s") as s:
        n = 300
        s.put_batch("T", [b"m%d" % i for i in range(n)], queue_id=[i % 2 for i in range(n)],
                    tags=[("Aa", "BB", "TagC", None)[i % 4] for i in range(n)],
                    properties=[{"a": str(i % 9), "region": ("eu", "us", "ap")[i % 3]} for i in range(n)])
        total = 0
        for q in (0, 1):
            scanned = [r["body"] for r in rows_of(s, "T", q, message_filter=f)]
            pulled, offset = [], 0
            while offset < s.max_offset("T", q):
                r = s.get_message("g", "T", q, offset, message_filter=f)
                pulled += [m.body for m in r.messages]
                offset = r.next_begin_offset
            assert scanned == pulled
            total += len(scanned)
        assert 0 < total < 300


# -- the compiled decoder (rmq_common/_native.c) against the numpy decoder it falls back to --------------------------

needs_native = pytest.mark.skipif(not native.available(), reason="rmq_common._native is not built here")


def rows_without_native(store, topic, queue_id, message_filter=None):
    with pytest.MonkeyPatch.context() as mp:
        use_python_kernels(mp)
        return rows_of(store, topic, queue_id, message_filter=message_filter)


@needs_native
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(message, min_size=1, max_size=40))
def test_compiled_and_numpy_decoders_agree(tmp_path_factory, msgs):
    from filters import MessageFilter
    path = tmp_path_factory.mktemp("agree")
    with MessageStore(path, StoreConfig(mappedFileSizeCommitLog=4096)) as s:
        s.create_topic("T", 3)
        s.put_batch("T", [m["body"] for m in msgs], tags=[m["tags"] for m in msgs],
                    keys=[m["keys"] for m in msgs], properties=[m["properties"] for m in msgs],
                    queue_id=[m["queue_id"] for m in msgs])
        for f in (None, MessageFilter.by_sql("TAGS IS NOT NULL")):
            for q in range(3):
                assert rows_of(s, "T", q, message_filter=f) == rows_without_native(s, "T", q, message_filter=f)


pairs_text = st.lists(st.tuples(st.sampled_from(["TAGS", "KEYS", "a", "é", "", "TAG", "KEYSX"]),
                                st.text(alphabet=st.sampled_from(["x", " ", "😀", "\x01", "y"]), max_size=6)),
                      max_size=6).map(lambda ps: "\x02".join(f"{k}\x01{v}" for k, v in ps))


@needs_native
@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(pairs_text, st.text(alphabet=st.sampled_from(["\x01", "\x02", "T", "A", "G", "S", " "]),
                                              max_size=12)), min_size=1, max_size=12))
def test_properties_columns_follow_rocketmq_with_and_without_native(texts):
    from rmq_common.properties_column import scan_columns
    data = "".join(texts).encode("utf-8")
    lens = [len(t.encode("utf-8")) for t in texts]
    ends = np.cumsum(lens)
    starts = ends - np.array(lens)
    fast = scan_columns(data, starts, ends)
    with pytest.MonkeyPatch.context() as mp:
        use_python_kernels(mp)
        slow = scan_columns(data, starts, ends)
    for props, tags, keys in (fast, slow):
        want = [codec.string_to_properties(t) for t in texts]
        got = props.to_pylist()
        assert [dict(m) for m in got] == want
        assert all(len({k for k, _ in m}) == len(m) for m in got)  # Spark refuses duplicate map keys
        assert tags.to_pylist() == [w.get("TAGS") for w in want]
        assert keys.to_pylist() == [[k for k in w.get("KEYS", "").split(" ") if k] for w in want]


def test_hosts_above_127_format_like_get_message(tmp_path):
    with MessageStore(tmp_path / "s", StoreConfig(brokerIP1="192.168.7.200")) as s:
        s.put_batch("T", [b"a", b"b"], queue_id=0, born_host="203.0.113.9:65535")
        rows = rows_of(s, "T", 0)
        pulled = s.get_message("g", "T", 0, 0).messages
        assert [r["store_host"] for r in rows] == [m.store_host for m in pulled]
        assert rows[0]["store_host"].startswith("192.168.7.200:")
        assert [r["born_host"] for r in rows] == [m.born_host for m in pulled] == ["203.0.113.9:65535"] * 2
        assert [r["msg_id"] for r in rows] == [m.msg_id for m in pulled]


def test_corrupt_body_is_caught_on_the_filtered_path_and_where_bodies_are_read(tmp_path):
    from filters import MessageFilter
    path = tmp_path / "s"
    with MessageStore(path) as s:
        s.put_batch("T", [b"precious payload", b"other"], tags=["A", "B"], queue_id=0)
    with open(path / "commitlog" / "00000000000000000000", "r+b") as f:
        data = bytearray(f.read(400))
        f.seek(data.index(b"precious"))
        f.write(b"X")
    with MessageStore(path, read_only=True) as s:
        for f in (None, MessageFilter.by_tags("A"), MessageFilter.by_sql("TAGS = 'A'")):
            with pytest.raises(CorruptRecordError, match="CRC"):
                list(s.scan("T", 0, 0, message_filter=f))
        # the record the filter drops is never checked, and the other one is intact
        assert [b.num_rows for b in s.scan("T", 0, 0, message_filter=MessageFilter.by_tags("B"))] == [1]
        # a scan of some columns checks the CRC when it reads bodies; without them the header checks remain
        for columns in (["body"], ["tags", "body"]):
            with pytest.raises(CorruptRecordError, match="CRC"):
                list(s.scan("T", 0, 0, columns=columns))
        rows = [r for b in s.scan("T", 0, 0, columns=["queue_offset", "tags"]) for r in b.to_pylist()]
        assert rows == [{"queue_offset": 0, "tags": "A"}, {"queue_offset": 1, "tags": "B"}]


@needs_native
def test_batches_kept_by_the_caller_stay_intact_while_output_regions_are_reused(tmp_path, monkeypatch):
    # Every kernel output in a pooled region (a real scan pools only megabyte-sized ones): batches still held
    # must never share a region with later ones, and dropped batches' regions are reused without damage.
    monkeypatch.setattr(native, "_OWN_MAPPING", 1)
    monkeypatch.setattr(native, "_REGION_STEP", 4096)
    monkeypatch.setattr(native, "_pool", [])
    decode = native.decode_v4_records

    def compiled_only(*args, **kwargs):
        out = decode(*args, **kwargs)
        assert out is not None, "the compiled pass gave up (its outputs overlapped?)"
        return out

    monkeypatch.setattr(native, "decode_v4_records", compiled_only)
    n = 300
    with MessageStore(tmp_path / "s") as s:
        s.create_topic("T", 2)
        s.put_batch("T", [bytes([i % 251]) * (i % 97) for i in range(n)], tags=[f"t{i % 5}" for i in range(n)],
                    keys=[[f"k{i}"] for i in range(n)], properties=[{"p": str(i)} for i in range(n)],
                    queue_id=[i % 2 for i in range(n)])
        for q in range(2):
            with monkeypatch.context() as m:
                use_python_kernels(m)
                m.setattr(native, "decode_v4_records", decode)
                want = rows_of(s, "T", q)
            kept = []
            for i, b in enumerate(s.scan("T", q, 0, batch_rows=16)):
                kept.append(b)
                if i % 3 == 2:
                    del kept[-2]  # an earlier batch dropped: its regions go back to the pool
            assert native._pool, "dropped batches' regions are reused"
            by_offset = {r["queue_offset"]: r for r in want}
            kept_rows = [r for b in kept for r in b.to_pylist()]
            assert kept_rows and all(r == by_offset[r["queue_offset"]] for r in kept_rows)
            assert [r for b in s.scan("T", q, 0, batch_rows=16) for r in b.to_pylist()] == want


def test_a_filter_rejecting_every_record_of_a_batch_over_several_files_yields_nothing(tmp_path):
    from filters import MessageFilter
    with MessageStore(tmp_path / "s", StoreConfig(mappedFileSizeCommitLog=4096)) as s:
        s.create_topic("T", 1)
        s.put_batch("T", [b"x" * 50] * 60, queue_id=[0] * 60)  # no TAGS: the selector rejects all
        s.put_batch("T", [b"y"], tags=["A"], queue_id=[0])
        assert len({s.commit_log.path_of(o) for o in range(0, 60 * 150, 1000)}) > 1
        rows = rows_of(s, "T", 0, message_filter=MessageFilter.by_sql("TAGS IS NOT NULL"))
        assert [r["body"] for r in rows] == [b"y"]
