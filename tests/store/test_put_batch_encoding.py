"""put_batch's compiled encoder (rmq_common/_encode.c) and its numpy/Arrow fallback write the same bytes: records,
end-of-file blanks and consume-queue units, over varied batches (empty and long bodies, several topics, a
version-2 topic, IPv6 hosts, properties pieces with nulls and multibyte text, file roll-overs and write chunks)."""
import os
import time
import zlib
from unittest import mock

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmq_common import message_codec as codec
from store import (
    DiskFullError,
    MessageStore,
    StoreConfig,
    append,
    commit_log,
    consume_queue,
    record_encoder,
)
from store.record_encoder import PropertyPart
from store.tag_hash import tags_hash_code

pytestmark = pytest.mark.skipif(not record_encoder.available(), reason="rmq_common._encode is not built here")

V4, V6 = (bytes([10, 0, 0, 1]), 5555), (bytes.fromhex("20010db8000000000000000000000001"), 10911)


def with_fallback(fn, *args, **kw):
    """fn run with the numpy/Arrow fallback encoder (and the numpy loops message_codec would use)."""
    with mock.patch.object(record_encoder, "KERNELS", record_encoder.NumpyKernels()), \
            mock.patch.object(codec, "_id_chars", codec._id_chars_python):
        return fn(*args, **kw)


@pytest.fixture
def numpy_encoder():
    return with_fallback


def _batch(bodies, topics, topic_index, parts, born, store, sys_flags, one_value=False):
    """one_value: flags, born timestamps, reconsume times and prepared offsets as one value for all messages."""
    n = len(bodies)
    if len(born[0]) == 16:
        sys_flags = sys_flags | codec.BORNHOST_V6_FLAG
    if len(store[0]) == 16:
        sys_flags = sys_flags | codec.STOREHOSTADDRESS_V6_FLAG
    m = 1 if one_value else n
    batch = codec.EncodedBatch(
        topics=topics, topic_index=np.asarray(topic_index, np.int32), bodies=pa.array(bodies, pa.binary()),
        property_parts=parts, queue_ids=np.arange(n, dtype=np.int32) % 3, flags=np.arange(m, dtype=np.int32) * 7 + 3,
        sys_flags=np.asarray(sys_flags, np.int32), born_timestamps=1_700_000_000_000 + np.arange(m),
        born_host=born, store_host=store, reconsume_times=np.arange(m, dtype=np.int32) % 2 + 1,
        prepared_offsets=np.arange(m, dtype=np.int64) * 1000 + 5)
    batch.sizes, total, too_long, too_big, separator = record_encoder.record_sizes(batch)
    assert too_long == too_big == -1 and separator is None and total == int(batch.sizes.sum())
    return batch


def _encode_both(batch, numpy_encoder):
    n = len(batch)
    queue_offsets = np.arange(n, dtype=np.int64) + 40
    positions = np.concatenate([[4096], 4096 + np.cumsum(batch.sizes)[:-1]]).astype(np.int64)
    native = bytes(record_encoder.encode(batch, queue_offsets, positions, 1_700_000_000_999))
    fallback = bytes(numpy_encoder(record_encoder.encode, batch, queue_offsets, positions, 1_700_000_000_999))
    return native, fallback, positions


texts = st.one_of(st.none(), st.text(alphabet=st.sampled_from(["a", "Z", " ", "é", "日", "😀", "-"]), max_size=12))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.binary(max_size=300), st.integers(0, 2), texts, texts), min_size=1, max_size=25),
       st.sampled_from([(V4, V4), (V6, V4), (V4, V6), (V6, V6)]), st.booleans(), st.booleans(),
       st.integers(0, 2**32 - 1))
def test_native_and_fallback_records_are_byte_identical(rows, hosts, atomic, one_value, id_counter):
    # Bodies of every length around the CRC's 16/64-byte steps, three topics (one past 127 bytes: version 2),
    # properties from the user's text, TAGS and KEYS columns with nulls and empty values, a broadcast piece,
    # generated UNIQ_KEYs (their counter wrapping at 2**32), fixed fields per message or one for all.
    bodies = [r[0] for r in rows]
    tags = pa.array([r[2] for r in rows], pa.string())
    keys = pa.array([r[3] for r in rows], pa.string())
    user = pa.array([codec.properties_to_string({"k": t}) if t else "" for t in (r[3] for r in rows)], pa.string())
    parts = [PropertyPart(None, user), record_encoder.part(codec.PROPERTY_TAGS, tags),
             record_encoder.part(codec.PROPERTY_KEYS, keys)]
    if atomic:  # a broadcast piece of the user's, one text for every message
        parts.append(PropertyPart("P", "0" * 20 + "-" + "1" * 20))
    ids = codec.GeneratedIds(b"0A000001ABCD1234" + b"%08X" % (id_counter // 7), id_counter, len(rows))
    parts.append(PropertyPart(codec.PROPERTY_UNIQ_KEY, ids))
    topics = ["TopicA", "T" * 200, "b%|_-9"]
    sys_flags = np.array([[0, codec.TRANSACTION_PREPARED_TYPE, codec.TRANSACTION_COMMIT_TYPE][r[1]] for r in rows])
    if one_value:  # the usual batch: one topic (the encoder's loop made for it), one sys_flag
        rows = [(b, 1, tag, key) for b, _, tag, key in rows]
        sys_flags = sys_flags[:1]
        topic_index = [1]
    else:
        topic_index = [r[1] for r in rows]
    batch = _batch(bodies, topics, topic_index, parts, hosts[0], hosts[1], sys_flags, one_value)
    native, fallback, positions = _encode_both(batch, with_fallback)
    assert native == fallback
    assert len(native) == int(batch.sizes.sum())
    pos = 0
    for i, (body, t, tag, key) in enumerate(rows):
        m = codec.decode_record(native, pos)
        assert (m.body, m.topic, m.commit_log_offset, m.queue_offset) == (body, topics[t], positions[i], 40 + i)
        assert m.tags == (tag or None) and m.properties.get("KEYS") == (key or None)
        assert m.properties["UNIQ_KEY"] == ids.head.decode() + f"{(id_counter + i) & 0xFFFFFFFF:08X}"
        j = 0 if one_value else i
        assert (m.flag, m.born_timestamp, m.reconsume_times, m.prepared_transaction_offset) == (
            7 * j + 3, 1_700_000_000_000 + j, j % 2 + 1, 1000 * j + 5)
        assert m.body_crc == zlib.crc32(body) & 0x7FFFFFFF
        pos += m.store_size


def test_crc_fast_path_and_tables_match_zlib():
    bodies = [os.urandom(n) for n in list(range(0, 300)) + [1023, 1024, 4097, 65536 + 5]]
    offsets = np.zeros(len(bodies) + 1, np.int32)
    np.cumsum([len(b) for b in bodies], out=offsets[1:])
    data = b"".join(bodies)
    want = [zlib.crc32(b) & 0x7FFFFFFF for b in bodies]
    was = record_encoder._encode.set_clmul(True)
    try:
        for fast in (True, False):
            record_encoder._encode.set_clmul(fast)
            out = np.empty(len(bodies), np.int32)
            record_encoder._encode.body_crcs(offsets, data, out)
            assert out.tolist() == want, fast
    finally:
        record_encoder._encode.set_clmul(was)


def test_helpers_match_their_fallbacks(numpy_encoder):
    values = ["TagA", "", None, "Aa", "BB", "héllo", "😀x", "日本語", "order-12345é", "abcdefgh😀", "a\x02b"]
    arr = pa.array(values, pa.string())
    want = [tags_hash_code(v) for v in values]
    assert record_encoder.java_hash_codes(arr, len(arr)).tolist() == want
    assert numpy_encoder(record_encoder.java_hash_codes, arr, len(arr)).tolist() == want
    assert record_encoder.first_separator(arr) == numpy_encoder(record_encoder.first_separator, arr) == 10
    assert record_encoder.first_separator(arr.slice(0, 10)) == numpy_encoder(
        record_encoder.first_separator, arr.slice(0, 10)) == -1
    head = b"0A000001ABCD12345678ABCD"
    a = codec.GeneratedIds(head, 0xFFFFFFFE, 3).column()
    b = numpy_encoder(lambda: codec.GeneratedIds(head, 0xFFFFFFFE, 3).column())
    assert [k[24:] for k in a.to_pylist()] == [k[24:] for k in b.to_pylist()] == ["FFFFFFFE", "FFFFFFFF", "00000000"]
    a, b = codec.new_uniq_keys(3, b"\x0a\x00\x00\x01"), numpy_encoder(codec.new_uniq_keys, 3, b"\x0a\x00\x00\x01")
    assert all(k[:12] == "0A000001" + f"{os.getpid() & 0x7FFF:04X}" for k in a.to_pylist() + b.to_pylist())
    assert len(set(a.to_pylist() + b.to_pylist())) == 6


def _assign_both(numpy_encoder, *args):
    native = record_encoder.assign_offsets(*args)
    fallback = numpy_encoder(record_encoder.assign_offsets, *args)
    for a, b in zip(native, fallback):
        if isinstance(a, np.ndarray):
            assert a.tobytes() == b.tobytes()
        else:
            assert a == b
    return native


def test_assign_offsets_by_keys_matches_its_fallback(numpy_encoder):
    keys = np.array([3, -1, 0, 3, 3, 1, -1, 0], np.int32)
    ends = np.array([7, 0, 0, 2**40, 0], np.int64)
    positions = np.arange(8, dtype=np.int64) * 300 + 2**33
    sizes = np.arange(8, dtype=np.int64) + 200
    tags = pa.array(["a", None, "Aa", "BB", "日本😀", "", "TagA", "x"])
    codes = np.array([tags_hash_code(t) for t in tags.to_pylist()])
    queue_ids, offsets, pos, units, counts, end = _assign_both(numpy_encoder, sizes, keys, 0, ends, None,
                                                               positions, tags, 6)
    assert queue_ids is None and end is None and pos.tolist() == positions.tolist()
    assert offsets.tolist() == [2**40, 0, 7, 2**40 + 1, 2**40 + 2, 0, 0, 8]
    assert counts.tolist() == [2, 1, 0, 3, 0]
    # grouped by queue, in batch order: queue 0 (messages 2, 7), 1 (5), 3 (0, 3, 4)
    assert units["offset"].tolist() == positions[[2, 7, 5, 0, 3, 4]].tolist()
    assert units["size"].tolist() == sizes[[2, 7, 5, 0, 3, 4]].tolist()
    assert units["tags_code"].tolist() == codes[[2, 7, 5, 0, 3, 4]].tolist()
    # positions from a write position instead: record after record
    _, _, pos, units, _, end = _assign_both(numpy_encoder, sizes, keys, 0, ends, 4096, None, tags, 6)
    assert pos.tolist() == (4096 + np.concatenate([[0], np.cumsum(sizes)[:-1]])).tolist()
    assert end == 4096 + int(sizes.sum())
    assert units["offset"].tolist() == pos[[2, 7, 5, 0, 3, 4]].tolist()
    for bad in (5, 7):  # fewer or more units than dispatched messages
        with pytest.raises(ValueError, match="dispatched messages"):
            record_encoder.assign_offsets(sizes, keys, 0, ends, None, positions, tags, bad)
    with pytest.raises(ValueError, match="key 3 of message 0"):
        record_encoder.assign_offsets(sizes, keys, 0, ends[:3], None, positions, tags, 6)


@pytest.mark.parametrize("n, start", [(10, 3), (3, 6), (16, 0), (1, 7)])
def test_assign_offsets_round_robin_matches_its_fallback(numpy_encoder, n, start):
    ends = np.arange(8, dtype=np.int64) * 1000
    sizes = np.arange(n, dtype=np.int64) + 100
    tags = pa.array([f"Tag{i}" for i in range(n)]) if n % 2 == 0 else None
    codes = np.array([tags_hash_code(f"Tag{i}") if n % 2 == 0 else 0 for i in range(n)])
    queue_ids, offsets, pos, units, counts, end = _assign_both(numpy_encoder, sizes, None, start, ends, 0, None,
                                                               tags, n)
    assert queue_ids.tolist() == [(start + i) % 8 for i in range(n)]
    assert offsets.tolist() == [ends[q] + i // 8 for i, q in enumerate(queue_ids.tolist())]
    assert counts.tolist() == np.bincount(queue_ids, minlength=8).tolist()
    order = np.argsort(queue_ids, kind="stable")
    assert units["offset"].tolist() == pos[order].tolist() and units["tags_code"].tolist() == codes[order].tolist()
    assert end == int(sizes.sum())


def test_record_sizes_finds_separators_in_named_pieces_only(numpy_encoder):
    """The first message with \x01 or \x02 in a TAGS/KEYS-like value (a column or one value for all), and which
    piece; the user's own properties text is made of separators and is not looked at."""
    user = pa.array(["a\x01b\x02", "c\x01d\x02", ""])
    for parts, want in (
            ([PropertyPart(None, user), PropertyPart("TAGS", pa.array(["x", "", "y"]))], None),
            ([PropertyPart(None, user), PropertyPart("KEYS", pa.array(["x", "", "y\x02"]))], (2, 1)),
            ([PropertyPart("TAGS", pa.array(["x", "y\x01z", "w\x02"])), PropertyPart("KEYS", "k")], (1, 0)),
            ([PropertyPart("TAGS", pa.array(["x", "y", "z"])), PropertyPart("KEYS", "k\x01")], (0, 1)),
            ([PropertyPart("UNIQ_KEY", codec.GeneratedIds(b"0" * 24, 7, 3))], None)):
        batch = codec.EncodedBatch(
            topics=["T"], topic_index=np.zeros(1, np.int32), bodies=pa.array([b"a", b"b", b"c"]),
            property_parts=parts, queue_ids=np.zeros(1, np.int32), flags=np.zeros(1, np.int32),
            sys_flags=np.zeros(1, np.int32), born_timestamps=np.zeros(1, np.int64), born_host=V4, store_host=V4,
            reconsume_times=np.zeros(1, np.int32), prepared_offsets=np.zeros(1, np.int64))
        assert record_encoder.record_sizes(batch).separator == want
        batch.kernel_columns = None
        assert numpy_encoder(record_encoder.record_sizes, batch).separator == want


@pytest.mark.parametrize("topics, topic_index", [(["T"], [0]), (["T", "V" * 200], [1, 0, 1])])
def test_record_sizes_names_the_first_message_too_long_or_too_big(numpy_encoder, topics, topic_index):
    keys = pa.array(["k", "x" * 32760, "y" * 40000])  # 32760 + KEYS\x01 .. \x02 + the UNIQ_KEY piece: too long
    batch = codec.EncodedBatch(
        topics=topics, topic_index=np.array(topic_index, np.int32), bodies=pa.array([b"a" * 10, b"b", b"c" * 30]),
        property_parts=[PropertyPart("KEYS", keys), PropertyPart("UNIQ_KEY", codec.GeneratedIds(b"0" * 24, 0, 3))],
        queue_ids=np.zeros(1, np.int32), flags=np.zeros(1, np.int32), sys_flags=np.zeros(1, np.int32),
        born_timestamps=np.zeros(1, np.int64), born_host=V4, store_host=V4, reconsume_times=np.zeros(1, np.int32),
        prepared_offsets=np.zeros(1, np.int64))
    native = record_encoder.record_sizes(batch, 20)
    batch.kernel_columns = None
    fallback = numpy_encoder(record_encoder.record_sizes, batch, 20)
    assert (native.too_long, native.too_big) == (fallback.too_long, fallback.too_big) == (1, 2)
    assert native.sizes.tolist() == fallback.sizes.tolist() and native.total == fallback.total == sum(native.sizes)


def test_a_size_that_disagrees_with_the_record_is_refused():
    batch = _batch([b"abc", b"de"], ["T"], [0, 0], [], V4, V4, np.zeros(2))
    batch.sizes = batch.sizes + np.array([0, 1])
    with pytest.raises(ValueError, match="message 1: a record's size differs"):
        record_encoder.encode(batch, np.zeros(2, np.int64), np.zeros(2, np.int64), 0)


def test_columns_whose_offsets_leave_their_data_are_refused():
    """The kernel reads Arrow buffers directly: offsets that decrease or run past the data, or a topic index past
    the topics, are an error naming the message, before anything is read through them."""
    kernel = record_encoder._encode

    def sizes(body_offsets, topic_index=(0, 0, 0), key_offsets=(0, 1, 2, 3)):
        parts = [(b"KEYS\x01", np.array(key_offsets, np.int32), b"abc", 0, 0)]
        return kernel.record_sizes(np.empty(3, np.int64), 8, 100, np.array(body_offsets, np.int32), b"abcdef",
                                   b"T", np.array([0, 1], np.int64), np.array(topic_index, np.int32), parts)

    # three records of 90 fixed bytes (IPv4 hosts) and topic "T" (2), bodies 3 + 2 + 1, KEYS\x01 + 1 + \x02 each
    assert sizes([0, 3, 5, 6]) == (-1, -1, -1, -1, 3 * (90 + 2) + 6 + 3 * 7)
    for offsets, row in (([0, 3, 2, 6], 1), ([0, 3, 5, 7], 2), ([-1, 3, 5, 6], 0)):
        with pytest.raises(ValueError, match=f"message {row}: body offsets"):
            sizes(offsets)
    with pytest.raises(ValueError, match="message 1: properties offsets"):
        sizes([0, 3, 5, 6], key_offsets=(0, 2, 1, 3))
    with pytest.raises(ValueError, match="message 2: body offsets or topic index"):
        sizes([0, 3, 5, 6], topic_index=(0, 0, 1))


@pytest.mark.parametrize("threaded", [True, False])
def test_a_failed_write_raises_oserror(tmp_path, threaded):
    batch = _batch([b"x" * 100] * 50, ["T"], [0] * 50, [], V4, V4, np.zeros(50))
    enc = record_encoder.RecordEncoder(batch, np.zeros(50, np.int64), np.zeros(50, np.int64), 0)
    fd = os.open(tmp_path / "ro", os.O_RDONLY | os.O_CREAT)
    try:
        with pytest.raises(OSError):
            enc.write([(fd, 0, 0, 50, 0)], 512, threaded)  # several chunks (threaded: the writer thread's error)
    finally:
        os.close(fd)


def _fill(path, monkeypatch, n_batches=8, threaded=True):
    """A store written with deterministic inputs (clock, host, uniq keys, queues), file sizes that roll often
    and write chunks smaller than a batch (by a writer thread or not). Not tests/store_fill.py's one patterned
    batch: the encoders are compared over many batches of mixed topics, sizes and columns."""
    monkeypatch.setattr(time, "time", lambda: 1_700_000_000.5)
    monkeypatch.setattr(commit_log.CommitLog, "WRITE_CHUNK", 700)
    monkeypatch.setattr(commit_log.CommitLog, "WRITE_THREAD", threaded)
    monkeypatch.setattr(codec, "_uniq_counter", [0xFFFFFFF0])  # generated UNIQ_KEYs' counter, far behind the clock
    monkeypatch.setattr(codec, "_uniq_prefix", {})
    monkeypatch.setattr(codec.os, "urandom", lambda k: b"\x5a" * k)
    monkeypatch.setattr(append.random, "randrange", lambda n: n - 1)  # round robin's first queue
    config = StoreConfig(mappedFileSizeCommitLog=4096, mappedFileSizeConsumeQueue=20 * 7, brokerIP1="10.0.0.2")
    rng = np.random.default_rng(5)
    with MessageStore(path, config) as s:
        for b in range(n_batches):
            n = int(rng.integers(1, 40))
            sizes = rng.choice([0, 1, 15, 16, 63, 64, 65, 100, 400, 1500], n)
            bodies = [bytes(rng.integers(0, 256, int(k), dtype=np.uint8)) for k in sizes]
            if b % 3 == 1:  # the usual batch: one topic, one value for all, ids and queues chosen by the store
                s.put_batch("TopicA", bodies, tags=pa.array([f"Tag{i % 3}" for i in range(n)]), flag=5)
                continue
            s.put_batch(rng.choice(["TopicA", "TopicB"], n).tolist(), bodies,
                        tags=[None if i % 4 == 0 else f"Tag{i % 3}" for i in range(n)],
                        keys=[[f"k{b}-{i}", "日本"] for i in range(n)],
                        properties=[{"UNIQ_KEY": f"U{b}-{i}", "x": "é" * (i % 3 + 1)} for i in range(n)],
                        queue_id=[i % 3 for i in range(n)], born_timestamp=[1_700_000_000_000 + i for i in range(n)],
                        born_host="[2001:db8::1]:1234" if b % 2 else "10.0.0.9:1", atomic=b == 3)


def _files(path):
    out = {}
    for root, _, names in os.walk(path):
        for name in names:
            if name.isdigit():
                with open(os.path.join(root, name), "rb") as f:
                    out[os.path.relpath(os.path.join(root, name), path)] = f.read()
    return out


@pytest.mark.parametrize("threaded", [True, False])
def test_stores_written_natively_and_by_the_fallback_are_identical(tmp_path, monkeypatch, numpy_encoder, threaded):
    _fill(tmp_path / "native", monkeypatch, threaded=threaded)
    numpy_encoder(_fill, tmp_path / "numpy", monkeypatch)
    native, fallback = _files(tmp_path / "native"), _files(tmp_path / "numpy")
    assert sum(1 for k in native if k.startswith("commitlog")) > 5  # rolled over many files (blanks written)
    assert native.keys() == fallback.keys()
    for name in native:
        assert native[name] == fallback[name], name
    with MessageStore(tmp_path / "native", read_only=True) as s:
        got = [dict(p)["UNIQ_KEY"] for t in ("TopicA", "TopicB") for q in s.queues(t)
               for b in s.scan(t, q, 0) for p in b.column("properties").to_pylist()]
        flags = [f for q in s.queues("TopicA") for b in s.scan("TopicA", q, 0) for f in b.column("flag").to_pylist()]
    assert len(got) == len(set(got)) > 80
    # generated ids never wrap their low 32 bits within a batch (reserve_uniq_keys); the encoders' wrap is
    # compared on GeneratedIds directly (test_helpers_match_their_fallbacks)
    assert flags.count(5) > 10


@pytest.mark.parametrize("native", [True, False], ids=["compiled", "fallback"])
def test_a_reader_never_sees_a_queue_end_past_an_unwritten_unit(tmp_path, monkeypatch, native):
    """Runs of units that cross consume-queue files: after every write, a reader in its own store object finds
    every unit below max_offset written (a run's first size is held back per file). The fallback is watched
    after each pwrite; the compiled writer, which writes all of a batch's runs in one call, after each run."""
    if native and not consume_queue._encode:
        pytest.skip("rmq_common._encode is not built")
    config = StoreConfig(mappedFileSizeConsumeQueue=20 * 5)
    path = tmp_path / "s"
    with MessageStore(path, config) as writer:
        writer.put("T", b"first", queue_id=0)
        with MessageStore(path, read_only=True) as reader:
            cq = reader.consume_queue("T", 0)
            seen = []

            def look():
                end = cq.max_offset()
                seen.append(end)
                assert (cq.units(0, end)["size"] > 0).all(), end

            if native:
                real = consume_queue.write_units

                def run_by_run(writes, units):
                    for w in writes:
                        real([w], units)
                        look()
                monkeypatch.setattr(consume_queue, "write_units", run_by_run)
            else:
                real = consume_queue.pwrite_all

                def write_then_look(fd, data, position):
                    real(fd, data, position)
                    look()
                monkeypatch.setattr(consume_queue, "write_units", consume_queue.write_units_in_python)
                monkeypatch.setattr(consume_queue, "pwrite_all", write_then_look)
            for n in (3, 9, 2, 11):
                writer.put_batch("T", [b"m"] * n, queue_id=0)
            assert cq.max_offset() == 26 and max(seen) == 26


@pytest.mark.parametrize("native", [True, False], ids=["compiled", "fallback"])
def test_write_units_writes_every_run_and_hands_the_units_back(tmp_path, monkeypatch, native):
    if native and not consume_queue._encode:
        pytest.skip("rmq_common._encode is not built")
    if not native:
        monkeypatch.setattr(consume_queue, "write_units", consume_queue.write_units_in_python)
    units = np.zeros(7, dtype=consume_queue.UNIT_DTYPE)
    units["offset"] = np.arange(7) * 1000
    units["size"] = np.arange(7) + 100
    units["tags_code"] = -np.arange(7)
    before = units.copy()
    path = tmp_path / "units"
    path.write_bytes(bytes(400))
    fd = os.open(path, os.O_RDWR)
    try:
        consume_queue.write_units([(fd, 40, 0, 3), (fd, 200, 3, 4)], units)
    finally:
        os.close(fd)
    assert (units == before).all()
    raw = path.read_bytes()
    assert raw[40:100] == before[:3].tobytes() and raw[200:280] == before[3:].tobytes()
    assert raw[:40] == bytes(40) and raw[100:200] == bytes(100) and raw[280:] == bytes(120)
    with pytest.raises((ValueError, OSError)):
        consume_queue.write_units([(-1, 0, 0, 1)] if not native else [(0, 0, 5, 9)], units)


def test_disk_blocks_are_allocated_ahead_of_the_write_position(tmp_path, monkeypatch):
    """The commitlog reserves its disk blocks before writing (a full disk fails before a batch's first byte)."""
    monkeypatch.setattr(commit_log.CommitLog, "ALLOCATE_AHEAD", 1 << 20)
    with MessageStore(tmp_path / "s") as s:
        s.put_batch("T", [b"x" * 100] * 100)
        end = s.commit_log_max_offset()
        name = sorted(os.listdir(tmp_path / "s" / "commitlog"))[0]
        st = os.stat(tmp_path / "s" / "commitlog" / name)
    assert st.st_size == StoreConfig().mappedFileSizeCommitLog  # full size, sparse beyond the reservation
    assert 2 * end <= st.st_blocks * 512 < st.st_size  # reserved as far ahead as written
    with MessageStore(tmp_path / "s") as s:
        s.put_batch("T", [b"x" * 100] * 20000)
        end = s.commit_log_max_offset()
    st = os.stat(tmp_path / "s" / "commitlog" / name)
    assert end + (1 << 20) <= st.st_blocks * 512 <= end + (1 << 20) + (1 << 16)  # at most ALLOCATE_AHEAD


def test_a_full_disk_fails_the_append_before_any_byte_is_written(tmp_path, monkeypatch):
    monkeypatch.setattr(commit_log.CommitLog, "ALLOCATE_AHEAD", 1 << 20)
    with MessageStore(tmp_path / "s") as s:
        s.put("T", b"before", queue_id=0)
        end = s.commit_log_max_offset()

        def no_space(fd, offset, length):
            raise OSError(28, "No space left on device")
        with monkeypatch.context() as m:
            m.setattr(os, "posix_fallocate", no_space)
            with pytest.raises(DiskFullError, match="no space left on the device writing the commitlog"):
                s.put_batch("T", [b"y" * 100] * 20000, queue_id=0)
        assert s.commit_log_max_offset() == end
        name = sorted(os.listdir(tmp_path / "s" / "commitlog"))[0]
        with open(tmp_path / "s" / "commitlog" / name, "rb") as f:
            f.seek(end)
            assert f.read(1 << 22) == bytes(1 << 22)  # nothing of the refused batch
        assert [m.body for m in s.get_message("g", "T", 0, 0, max_msgs=100).messages] == [b"before"]
        assert s.put("T", b"after", queue_id=0).queue_offset == 1
