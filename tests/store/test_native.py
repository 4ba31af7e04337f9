"""The compiled record-bytes loops (rmq_common/_native.c) and their numpy/zlib fallbacks give the same answers."""
import re
import struct
import zlib

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from python_kernels import use_python_kernels

from rmq_common import message_codec as codec
from rmq_common import native
from rmq_common.message_properties import properties_to_map
from rmq_common.properties_column import parse_properties, text_without_keys

pytestmark = pytest.mark.skipif(not native.available(), reason="rmq_common._native is not built here")

texts = st.lists(st.text(alphabet=st.sampled_from(["a", "b", "é", "\x01", "\x02", "k", "v", "😀"]), max_size=30),
                 min_size=1, max_size=20)


@pytest.fixture
def without_native(monkeypatch):
    def run(fn, *args):
        kernels = {getattr(native, name): name for name in native.FALLBACKS}
        use_python_kernels(monkeypatch)
        if fn in kernels:  # a kernel of native named before the rebinding: its pure-Python form
            fn = getattr(native, kernels[fn])
        try:
            return fn(*args)
        finally:
            monkeypatch.undo()
    return run


@settings(max_examples=60, deadline=None)
@given(texts)
def test_properties_parse_like_rocketmq_with_and_without_native(values):
    arr = pa.array(values, pa.string())
    want = [codec.string_to_properties(v) for v in values]
    assert [dict(m) for m in parse_properties(arr).to_pylist()] == want
    assert [dict(m) for m in properties_to_map(arr).to_pylist()] == want
    # one entry per key on the compiled path (Spark refuses duplicate map keys)
    for m in parse_properties(arr).to_pylist():
        assert len({k for k, _ in m}) == len(m)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=300), min_size=1, max_size=30))
def test_crc_and_gather_match_zlib_and_slices(bodies):
    data = b"".join(bodies)
    lens = np.array([len(b) for b in bodies])
    ends = np.cumsum(lens)
    starts = ends - lens
    crcs = native.crc32_spans(data, starts, ends)
    assert crcs.tolist() == [zlib.crc32(b) & 0x7FFFFFFF for b in bodies]
    assert native.gather_spans(data, starts[::-1].copy(), ends[::-1].copy()).to_pylist() == bodies[::-1]


def test_fallbacks_agree(without_native):
    values = ["a\x011\x02a\x012\x02b\x01x", "", "\x01\x02k\x01v"]
    arr = pa.array(values)
    data = b"hello world, many spans"
    starts, ends = np.array([0, 6, 3]), np.array([5, 11, 3])
    assert without_native(native.crc32_spans, data, starts, ends).tolist() == native.crc32_spans(
        data, starts, ends).tolist()
    assert without_native(native.gather_spans, data, starts, ends).to_pylist() == [b"hello", b"world", b""]
    assert without_native(native.property_pairs, data, starts, ends) is None
    assert [dict(m) for m in without_native(parse_properties, arr).to_pylist()] == [
        codec.string_to_properties(v) for v in values]


def test_spans_outside_the_buffer_are_refused():
    with pytest.raises(ValueError, match="outside the buffer"):
        native.crc32_spans(b"abc", np.array([0]), np.array([5]))
    with pytest.raises(ValueError, match="outside the buffer"):
        native.gather_spans(b"abc", np.array([2]), np.array([1]))


# Keys that share first bytes, a prefix of another, longer than a machine word, multibyte, and names no stored key
# can equal (empty, holding a separator).
VALUE_NAMES = ["a", "ab", "b", "key_longer_than_8", "key_longer_than_9", "é", "😀k", "", "a\x01", "\x02"]
value_texts = st.lists(
    st.lists(st.sampled_from(["a", "ab", "b", "key_longer_than_8", "é", "😀k", "v", "\x01", "\x02"]),
             max_size=16).map("".join),
    min_size=1, max_size=12)


def _columns(data: bytes, starts, ends, names, whole_characters=True):
    columns = native.property_columns(data, starts, ends, names)
    assert len(columns) == len(names)
    for col in columns:
        col.validate(full=whole_characters)  # full: also that each value is valid UTF-8
        assert col.type == pa.string() and len(col) == len(starts)
    return [(col if whole_characters else col.view(pa.binary())).to_pylist() for col in columns]


def _without_native(fn, *args):
    with pytest.MonkeyPatch.context() as mp:
        use_python_kernels(mp)
        return fn(*args)


@settings(max_examples=150, deadline=None)
@given(value_texts, st.lists(st.sampled_from(VALUE_NAMES), unique=True, max_size=6), st.randoms())
def test_property_columns_with_and_without_native(values, names, rnd):
    without_native = _without_native
    encoded = [v.encode() for v in values]
    data = b"".join(encoded)  # the last text ends at the buffer's end (no whole word to read there)
    ends = np.cumsum([len(v) for v in encoded])
    starts = ends - [len(v) for v in encoded]
    want = [[codec.string_to_properties(v).get(name) for v in values] for name in names]
    assert _columns(data, starts, ends, names) == want
    assert without_native(_columns, data, starts, ends, names) == want
    # rows in any order, repeated, or cut short inside the buffer (the bytes after a row's end are not its own)
    order = [rnd.randrange(len(values)) for _ in range(len(values) + 2)]
    cut = np.array([rnd.randint(int(starts[i]), int(ends[i])) for i in order], dtype=np.int64)
    texts = [data[starts[i]:c] for i, c in zip(order, cut)]
    spans = native._property_values_numpy(data, starts[order], cut, [name.encode() for name in names])
    got = _columns(data, starts[order], cut, names, False)
    assert without_native(_columns, data, starts[order], cut, names, False) == got
    for j, name in enumerate(names):
        assert [data[s:e] if s >= 0 else None for s, e in zip(*(x[j] for x in spans))] == got[j]
        for r, text in enumerate(texts):
            try:
                want = codec.string_to_properties(text.decode()).get(name)
            except UnicodeDecodeError:  # a cut inside a character: compared through the spans only
                continue
            assert got[j][r] == (None if want is None else want.encode())


def test_property_columns_edge_cases(without_native):
    texts = ["a\x011\x02a\x012", "a\x011\x02a\x01\x02", "\x01a\x02b\x01\x01\x02", "a\x01x\x01y", "", "ab\x01", "a"]
    data = "".join(texts).encode()
    ends = np.cumsum([len(t.encode()) for t in texts])
    starts = ends - [len(t.encode()) for t in texts]
    names = ["a", "b", "ab", "", "a\x01"]
    want = [["2", "1", None, "x\x01y", None, None, None], [None, None, "\x01", None, None, None, None],
            [None] * 7, [None] * 7, [None] * 7]
    assert _columns(data, starts, ends, names) == want
    assert without_native(_columns, data, starts, ends, names) == want
    assert native.property_columns(data, starts, ends, []) == []
    assert without_native(_columns, data, starts[:0], ends[:0], ["a"]) == [[]]
    assert _columns(data, starts[:0], ends[:0], ["a"]) == [[]]
    for run in (lambda f, *a: f(*a), without_native):
        with pytest.raises(ValueError, match="outside the buffer"):
            run(native.property_columns, data, np.array([0]), np.array([len(data) + 1]), ["a"])


def test_property_columns_grow_past_their_first_guess():
    # values far longer than the first allocation (8 bytes a row), a later duplicate replacing a long value
    texts = ["k\x01" + "x" * 5000 + "\x02k\x01short", "k\x01" + "é" * 3000, "j\x01v"] * 3
    data = "".join(texts).encode()
    ends = np.cumsum([len(t.encode()) for t in texts])
    starts = ends - [len(t.encode()) for t in texts]
    assert _columns(data, starts, ends, ["k", "j"]) == [["short", "é" * 3000, None] * 3, [None, None, "v"] * 3]


def test_properties_text_columns_with_and_without_native(without_native):
    from rmq_common.message_properties import PropertiesText
    texts = pa.array(["a\x011\x02b\x01x", None, "b\x01y\x02a\x01é\x02a\x01😀", "a\x01\x02"]).slice(1)
    want = {"a": [None, "😀", None], "b": [None, "y", None], "zz": [None, None, None]}

    def columns():
        text = PropertiesText(texts, ["a"])
        sub = text.subset(np.array([1, 2]), ["b"])  # "b" not read on all rows yet: read on the subset's rows
        return ({name: sub.column(name).to_pylist() for name in want},
                {name: text.column(name).to_pylist() for name in want})
    expected = ({name: column[1:] for name, column in want.items()}, want)
    assert columns() == expected
    assert without_native(columns) == expected


words = st.lists(st.sampled_from(["", "a", "ab", "é", "TagA", "TagB", "TagAB", "12345678", "123456789", "😀x"]),
                 max_size=3).map("".join)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(st.none(), words), max_size=40), st.lists(words, max_size=4), st.integers(0, 5))
def test_strings_in_with_and_without_native(strings, literals, cut):
    arr = pa.array(strings, pa.string())
    arr = arr.slice(min(cut, len(arr)))  # columns may be slices
    want = [s is not None and s in literals for s in arr.to_pylist()]
    assert native.strings_in(arr, literals).tolist() == want
    assert _without_native(native.strings_in, arr, literals).tolist() == want
    assert native.strings_in(arr.cast(pa.large_string()), literals).tolist() == want


def test_string_kernels_refuse_offsets_outside_the_data():
    with pytest.raises(ValueError, match="outside the data"):
        native._native.strings_in(np.array([0, 5], np.int32), b"abc", b"abc", np.array([3], np.int64),
                                  np.zeros(1, np.uint8))
    with pytest.raises(ValueError, match="outside the data"):
        native._native.decimal_longs(np.array([2, 1], np.int32), b"123", np.zeros(1, np.int64), np.zeros(1, np.uint8))


numbers = st.one_of(st.integers(-10**19, 10**19).map(str), st.sampled_from(
    ["", "-", "+5", "-0", "007", "1.5", " 1", "1 ", "0x1F", "١٢", "999999999999999999", "-999999999999999999",
     "1000000000000000000", "12a"]))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(st.none(), numbers), max_size=30), st.integers(0, 5))
def test_decimal_longs_with_and_without_native(strings, cut):
    arr = pa.array(strings, pa.string())
    arr = arr.slice(min(cut, len(arr)))
    plain = [s is not None and re.fullmatch("-?[0-9]{1,18}", s) is not None for s in arr.to_pylist()]
    want_values = [int(s) if ok else 0 for s, ok in zip(arr.to_pylist(), plain)]
    for run in (lambda f, *a: f(*a), _without_native):
        values, ok = run(native.decimal_longs, arr)
        assert ok.tolist() == plain and values.tolist() == want_values


def test_property_columns_fallback_over_many_slices():
    # past a megabyte of text the numpy fallback works slice by slice; rows straddle the cuts
    texts = [f"k\x01{'v' * (i % 700)}\x02j\x01{i}\x02k\x01{i}" if i % 3 else f"j\x01{'é' * (i % 500)}"
             for i in range(4000)]
    data = "".join(texts).encode()
    ends = np.cumsum([len(t.encode()) for t in texts])
    starts = ends - [len(t.encode()) for t in texts]
    want = [[codec.string_to_properties(t).get(name) for t in texts] for name in ["k", "j"]]
    assert _columns(data, starts, ends, ["k", "j"]) == want
    assert _without_native(_columns, data, starts, ends, ["k", "j"]) == want


def test_gather_records_copies_whole_records_and_names_the_first_that_does_not_match(without_native):
    from rmq_common.message_codec import MAGIC_V1, MAGIC_V2

    def record(size, magic=MAGIC_V2):
        return struct.pack(">iI", size, magic) + bytes(range(size - 8))
    data = b"pad" + record(20) + record(12, MAGIC_V1) + record(30) + record(16)
    starts = np.array([3, 23, 35, 65])
    sizes = np.array([20, 12, 30, 16])
    for gather in (native.gather_records, lambda *a: without_native(native.gather_records, *a)):
        out = np.zeros(78, dtype=np.uint8)
        assert gather(data, starts, sizes, out) == -1
        assert out.tobytes() == data[3:81]
        assert gather(data, starts, np.array([20, 12, 31, 16]), np.zeros(79, dtype=np.uint8)) == 2  # TOTALSIZE
        bad_magic = data[:35] + record(30, 0x12345678) + data[65:]
        assert gather(bad_magic, starts, sizes, np.zeros(78, dtype=np.uint8)) == 2
        with pytest.raises(ValueError, match="outside"):
            gather(data, np.array([70]), np.array([16]), np.zeros(16, dtype=np.uint8))


def test_message_batch_spans_walks_a_batch_and_names_the_message_that_does_not_fit(without_native):
    def message(body: bytes, props: bytes) -> bytes:
        return struct.pack(">iiiii", 22 + len(body) + len(props), 0, 0, 0, len(body)) + body + \
            struct.pack(">h", len(props)) + props
    batch = message(b"one", b"TAGS\x01a\x02") + message(b"", b"") + message(b"three!", b"K\x01v\x02")
    for spans in (native.message_batch_spans, lambda b: without_native(native.message_batch_spans, b)):
        bs, bl, ps, pl = spans(batch)
        assert [batch[s:s + n] for s, n in zip(bs, bl)] == [b"one", b"", b"three!"]
        assert [batch[s:s + n] for s, n in zip(ps, pl)] == [b"TAGS\x01a\x02", b"", b"K\x01v\x02"]
        assert [len(x) for x in spans(b"")] == [0, 0, 0, 0]
        with pytest.raises(ValueError, match="batch message 2: TOTALSIZE 99 runs past the body"):
            spans(batch[:-len(message(b"three!", b"K\x01v\x02"))] + struct.pack(">iiiii", 99, 0, 0, 0, 1) + b"xx")
        with pytest.raises(ValueError, match="batch message 0: BODY length 50 runs past its TOTALSIZE 25"):
            spans(struct.pack(">iiiii", 25, 0, 0, 0, 50) + b"abcde")
        with pytest.raises(ValueError, match="batch message 1: 5 bytes left"):
            spans(message(b"a", b"") + b"12345")


def test_message_ids_text_is_create_message_id_of_each_offset():
    offsets = [0, 1, 2**40 + 7, 123456789]
    for host in ((bytes([10, 0, 0, 7]), 10911), (bytes(range(16)), 443)):
        assert codec.message_ids_text(host[0], host[1], offsets).split(",") == [
            codec.create_message_id(host[0], host[1], o) for o in offsets]
    assert codec.message_ids_text(bytes(4), 1, []) == ""


@settings(max_examples=80, deadline=None)
@given(texts, st.lists(st.sampled_from(["a", "k", "ab", "é", "kv"]), max_size=3, unique=True), st.integers(0, 3))
def test_texts_without_keys_read_as_the_maps_without_them(values, drop, skip):
    """A rewritten text reads (RocketMQ's rules) as the original's map minus the dropped keys, compiled or not;
    the compiled kernel keeps every other byte and closes the last pair."""
    arr = pa.array([None] + values, pa.string()).slice(min(skip, len(values)))
    want = [{k: v for k, v in codec.string_to_properties(t or "").items() if k not in drop} for t in arr.to_pylist()]
    with pytest.MonkeyPatch.context() as mp:
        use_python_kernels(mp)
        fallback = text_without_keys(arr, drop)
    for out in (text_without_keys(arr, drop), fallback):
        assert [codec.string_to_properties(t) for t in out.to_pylist()] == want
    if not drop:
        assert text_without_keys(arr, drop).to_pylist() == [
            t + "\x02" if t and not t.endswith("\x02") else (t or "") for t in arr.to_pylist()]


def test_text_without_keys_keeps_the_other_pairs_bytes():
    arr = pa.array(["a\x01b\x02REAL_TOPIC\x01T\x02c\x01d\x02", "REAL_QID\x011", "x\x01y",
                    "\x02\x02k\x01v\x02TRAN_BATCH\x01z"])
    assert text_without_keys(arr, ["REAL_TOPIC", "REAL_QID", "TRAN_BATCH"]).to_pylist() == [
        "a\x01b\x02c\x01d\x02", "", "x\x01y\x02", "\x02\x02k\x01v\x02"]


@pytest.mark.skipif(not native.available(), reason="rmq_common._native is not built here")
def test_the_output_pool_keeps_the_regions_a_reader_uses_now_over_those_another_read_left(monkeypatch):
    # A worker that read through brokers (many small outputs) and then reads a store directory (big ones): the big
    # regions must be reused batch after batch, not mapped afresh (a page fault per written page) while the small
    # ones of the earlier read fill the pool.
    import gc

    monkeypatch.setattr(native, "_POOL_BYTES", 8 << 20)
    monkeypatch.setattr(native, "_pool", [])
    small = [native._out(1 << 20, np.uint8) for _ in range(6)]  # the earlier read's six 1 MiB outputs
    del small
    gc.collect()
    assert sum(len(m) for m in native._pool) == 6 << 20
    big = native._out(4 << 20, np.uint8)
    region = big.base.obj if isinstance(big.base, memoryview) else big.base
    del big
    gc.collect()
    assert any(m is region for m in native._pool), "the region just used was dropped from the pool"
    again = native._out(4 << 20, np.uint8)
    assert (again.base.obj if isinstance(again.base, memoryview) else again.base) is region
    assert sum(len(m) for m in native._pool) <= 8 << 20
