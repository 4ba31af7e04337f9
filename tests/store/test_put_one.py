"""MessageStore.put's one-record path (store/put_one.py) stores what put_batch stores for the same message: the
same record bytes (but the store timestamp), the same consume-queue unit, and a file roll still goes through the
batch path with consecutive queue offsets."""
import os
import sys

import numpy as np
import pytest

from rmq_common import message_codec as codec
from store import MessageStore, StoreConfig, record_encoder
from store.consume_queue import UNIT_DTYPE
from store.put_one import OneRecords

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conftest_durability import run_python  # noqa: E402

V6_HOST = "[2001:db8::1]:10911"
CASES = [
    dict(topic="T", body=b"plain", properties={"UNIQ_KEY": "U1"}),
    dict(topic="T", body=b"", tags="TagA", properties={"a": "1", "UNIQ_KEY": "U2"}, flag=7, reconsume_times=2),
    dict(topic="T", body="tëxt", properties={"TAGS": "ünï", "k": "v", "UNIQ_KEY": "U3"}, queue_id=3,
         born_timestamp=1234567890123, born_host="10.1.2.3:4567"),
    dict(topic="T", body=b"\x78\x9c" + b"z" * 40, sys_flag=codec.COMPRESSED_FLAG | codec.TRANSACTION_COMMIT_TYPE,
         properties={"UNIQ_KEY": "U4"}, born_host=V6_HOST),
    dict(topic="L" * 127, body=b"longest topic", properties={"UNIQ_KEY": "U5"}, queue_id=0),
]


def _record(store: MessageStore, offset: int, size: int) -> bytearray:
    view, start = store.commit_log.view_at(offset)
    raw = bytearray(view[offset - start:offset - start + size])
    sys_flag = int.from_bytes(raw[codec.POS_SYSFLAG:codec.POS_SYSFLAG + 4], "big")
    born_len, _ = codec.host_lengths(sys_flag)
    at = codec.POS_BORNHOST + born_len
    raw[at:at + 8] = bytes(8)  # STORETIMESTAMP: the clock's
    return raw


def _unit(store: MessageStore, topic: str, queue_id: int, queue_offset: int) -> tuple:
    unit = store.consume_queue(topic, queue_id).units(queue_offset, queue_offset + 1)
    return tuple(np.asarray(unit, dtype=UNIT_DTYPE)[0].tolist())


@pytest.mark.parametrize("batch_encoder", ["compiled", "numpy"])
def test_one_record_path_writes_what_put_batch_writes(tmp_path, monkeypatch, batch_encoder):
    """put_batch's encoder either way: rmq_common/_encode.c, or message_codec.encode_records, the other Python
    encoding of the record layout build_one writes with struct packs."""
    if batch_encoder == "numpy":
        monkeypatch.setattr(record_encoder, "KERNELS", record_encoder.NumpyKernels())
        monkeypatch.setattr(codec, "_id_chars", codec._id_chars_python)
    elif not record_encoder.available():
        pytest.skip("rmq_common._encode is not built here")
    with MessageStore(tmp_path / "one") as one, MessageStore(tmp_path / "batch") as batch:
        for store in (one, batch):
            store.store_host = codec.parse_host("192.168.0.9:10911")
        results = []
        for case in CASES:
            args = dict(case)
            topic, body = args.pop("topic"), args.pop("body")
            args.setdefault("born_timestamp", 1700000000000)
            got = one.put(topic, body, **args)
            results.append(got)
            listed = {k: ([v] if k in ("tags", "properties", "queue_id", "born_timestamp") else v)
                      for k, v in args.items()}
            listed["queue_id"] = [got.queue_id]  # round robin starts at random in each store
            want = batch.put_batch(topic, [body], **listed)[0]
            assert (got.queue_id, got.queue_offset, got.commit_log_offset, got.uniq_key) == \
                (want.queue_id, want.queue_offset, want.commit_log_offset, want.uniq_key)
            size = _unit(one, topic, got.queue_id, got.queue_offset)[1]
            assert _record(one, got.commit_log_offset, size) == _record(batch, want.commit_log_offset, size)
            assert _unit(one, topic, got.queue_id, got.queue_offset) == \
                _unit(batch, topic, want.queue_id, want.queue_offset)
            assert got.msg_id == want.msg_id
        third = results[2]
        msg = one.get_message("g", "T", 3, third.queue_offset, 1).messages[0]
        assert (msg.body, msg.tags, msg.properties["k"], msg.born_timestamp) == \
            ("tëxt".encode(), "ünï", "v", 1234567890123)


def test_a_new_unique_key_and_a_roll_through_the_batch_path(tmp_path):
    config = StoreConfig(mappedFileSizeCommitLog=4096)
    with MessageStore(tmp_path / "s", config) as store:
        results = [store.put("R", b"x" * 100, queue_id=1) for _ in range(100)]  # about 250 bytes each: rolls
        assert [r.queue_offset for r in results] == list(range(100))
        assert len({r.commit_log_offset // 4096 for r in results}) > 5
        assert all(len(r.uniq_key) == 32 for r in results) and len({r.uniq_key for r in results}) == 100
        got: list = []
        while len(got) < 100:  # a pull is capped at maxTransferCountOnMessageInMemory
            got += store.get_message("g", "R", 1, len(got), 100).messages
        assert [m.properties["UNIQ_KEY"] for m in got] == [r.uniq_key for r in results]
        assert [m.commit_log_offset for m in got] == [r.commit_log_offset for r in results]


@pytest.mark.parametrize("bad, named", [
    (dict(queue_id=8), "queue_id 8"),
    (dict(properties={"a": "x\x01y"}), "separator"),
    (dict(tags="a\x02b"), "separator"),
    (dict(sys_flag=codec.ATOMIC_BATCH_FLAG), "reserves"),
    (dict(reconsume_times=-1), "reconsume_times"),
])
def test_refusals_are_the_batch_paths(tmp_path, bad, named):
    with MessageStore(tmp_path / "s") as store:
        store.create_topic("Q", 8)
        with pytest.raises(ValueError, match=named):
            store.put("Q", b"x", **bad)
        assert store.max_offset("Q", 0) == 0 and store.commit_log_max_offset() == 0


def test_put_many_writes_what_puts_one_after_another_write(tmp_path):
    """The broker's single sends of one turn of its loop go in one write (put_many): the same records (but the
    store timestamp), units, queue offsets in the order given, and the index; one that cannot go with the others
    sends them all one by one, and a refused one is refused alone."""
    cases = [dict(c, topic=c.get("topic", "T")) for c in CASES] + \
        [dict(topic="T", body=b"again %d" % i, properties={"UNIQ_KEY": f"R{i}"}, queue_id=i % 2) for i in range(6)]
    for c in cases:
        c.setdefault("born_timestamp", 1700000000000)
        c.setdefault("queue_id", 1)  # round robin starts at random
    with MessageStore(tmp_path / "many") as many, MessageStore(tmp_path / "each") as each:
        for store in (many, each):
            store.store_host = codec.parse_host("192.168.0.9:10911")
        together = []
        real = many._append
        many._append = lambda records, *rest: (isinstance(records, OneRecords) and together.append(
            len(records.ones))) or real(records, *rest)
        got = many.put_many([dict(c) for c in cases])
        assert together == [len(cases)]  # in one write
        want = [each.put(**dict(c)) for c in cases]
        assert [(r.queue_id, r.queue_offset, r.commit_log_offset, r.msg_id, r.uniq_key) for r in got] == \
            [(r.queue_id, r.queue_offset, r.commit_log_offset, r.msg_id, r.uniq_key) for r in want]
        assert len({r.commit_log_offset for r in got}) == len(cases)
        for a, b in zip(got, want):
            size = int(many.consume_queue(a.topic, a.queue_id).units(a.queue_offset, a.queue_offset + 1)["size"][0])
            assert _record(many, a.commit_log_offset, size) == _record(each, b.commit_log_offset, size)
            assert _unit(many, a.topic, a.queue_id, a.queue_offset) == _unit(each, b.topic, b.queue_id, b.queue_offset)
        assert many.query_message_by_unique_key("T", "R3").queue_offset == \
            each.query_message_by_unique_key("T", "R3").queue_offset

        # a message with KEYS is not put_one's: all of them go one by one, in order; a bad queue is refused alone
        mixed = [dict(topic="T", body=b"k", keys="K1", queue_id=0), dict(topic="T", body=b"bad", queue_id=99),
                 dict(topic="T", body=b"after", queue_id=0)]
        out = many.put_many(mixed)
        assert together == [len(cases), 1, 1]  # put's own one-record appends (the first takes put_batch)
        assert isinstance(out[1], ValueError) and "99" in str(out[1])
        assert [r.queue_offset for r in (out[0], out[2])] == [many.max_offset("T", 0) - 2, many.max_offset("T", 0) - 1]


def test_put_many_calls_on_written_once_the_commitlog_holds_the_records_before_their_units(tmp_path):
    """The broker answers a send from on_written (RocketMQ answers once the commitlog holds the record and
    dispatches after): there the records are in the commitlog at the offsets the results name, and no unit,
    index entry or queue end shows them yet; after put_many they are all there."""
    seen = []
    with MessageStore(tmp_path / "s") as store:
        store.create_topic("T", 2)

        def written(results):
            for r in results:
                raw = _record(store, r.commit_log_offset, 200)
                assert b"body %d" % r.queue_offset in raw
                assert store.max_offset("T", r.queue_id) <= r.queue_offset  # no unit yet
            assert store.query_message_by_unique_key("T", "K1") is None
            seen.append([(r.queue_id, r.queue_offset) for r in results])

        sent = [dict(topic="T", body=b"body %d" % i, properties={"UNIQ_KEY": f"K{i}"}, queue_id=0) for i in range(3)]
        got = store.put_many(sent, on_written=written)
        assert seen == [[(0, 0), (0, 1), (0, 2)]]
        assert [(r.queue_id, r.queue_offset) for r in got] == seen[0]
        assert store.max_offset("T", 0) == 3
        assert store.query_message_by_unique_key("T", "K1").queue_offset == 1


def test_messages_answered_from_on_written_survive_a_kill_before_their_dispatch(tmp_path):
    """A writer SIGKILLed inside on_written (answers sent, units and index not written): the store opened again
    serves every message, in its queue and by its key."""
    path = tmp_path / "killed"
    proc = run_python("""
        import os, signal, sys
        from store import MessageStore
        with MessageStore(sys.argv[1]) as s:
            s.create_topic("T", 1)
            s.put_many([dict(topic="T", body=b"first", properties={"UNIQ_KEY": "F"}, queue_id=0)])
            s.put_many([dict(topic="T", body=b"answered %d" % i, properties={"UNIQ_KEY": "A%d" % i}, queue_id=0)
                        for i in range(4)], on_written=lambda results: os.kill(os.getpid(), signal.SIGKILL))
    """, path, check=False)
    assert proc.returncode == -9, proc.stderr
    with MessageStore(path) as store:
        assert store.max_offset("T", 0) == 5
        got = store.get_message("g", "T", 0, 0, 10)
        assert [m.body for m in got.messages] == [b"first"] + [b"answered %d" % i for i in range(4)]
        assert store.query_message_by_unique_key("T", "A3").queue_offset == 4


@pytest.mark.parametrize("text, canonical", [
    ("UNIQ_KEY\x01U1\x02WAIT\x01true\x02", True),
    ("UNIQ_KEY\x01U1\x02WAIT\x01true", False),  # the last pair not ended
    ("UNIQ_KEY\x01U1\x02UNIQ_KEY\x01U2\x02", False),  # a key twice: the parse keeps one
    ("UNIQ_KEY\x01U1\x02\x01x\x02", False),  # an empty key: dropped by the parse
    ("UNIQ_KEY\x01U1\x01more\x02", False),  # a separator inside a value
    ("WAIT\x02UNIQ_KEY\x01U1\x02", False),  # a pair without a value
])
def test_a_canonical_properties_text_is_stored_as_sent_and_any_other_as_its_parse_writes_it(tmp_path, text, canonical):
    from rmq_common.message_properties import parse_properties
    from store.put_one import canonical_text

    props = parse_properties(text)
    assert (canonical_text(text, props) == text) is canonical
    with MessageStore(tmp_path / "a") as a, MessageStore(tmp_path / "b") as b:
        got = a.put_many([dict(topic="T", body=b"x", properties=props, properties_text=canonical_text(text, props),
                               queue_id=0, born_timestamp=1)])[0]
        want = b.put_many([dict(topic="T", body=b"x", properties=dict(props), queue_id=0, born_timestamp=1)])[0]
        assert isinstance(got, type(want))
        if isinstance(want, Exception):
            return
        size = int(a.consume_queue("T", 0).units(0, 1)["size"][0])
        assert _record(a, got.commit_log_offset, size) == _record(b, want.commit_log_offset, size)
        assert a.query_message_by_unique_key("T", props["UNIQ_KEY"]) is not None


PLAIN_CASES = [
    dict(body=b"plain", text="UNIQ_KEY\x01U1\x02"),
    dict(body=b"", text="TAGS\x01TagA\x02a\x011\x02UNIQ_KEY\x01U2\x02", flag=-7, reconsume_times=2),
    dict(body="tëxt".encode(), text="TAGS\x01ünï \U0001F600\x02k\x01v\x02UNIQ_KEY\x01U3\x02KEYS\x01k1 k2\x02",
         born_host=V6_HOST, born_timestamp=-5),
    dict(body=b"z" * 300, text="UNIQ_KEY\x01U4\x02", sys_flag=codec.TRANSACTION_COMMIT_TYPE | codec.MULTI_TAGS_FLAG,
         topic="L" * 127),
    # the Java client's text since 4.9 (messageProperties2String): the last pair not ended; stored ended, as the
    # general put stores it
    dict(body=b"x" * 100, text="UNIQ_KEY\x01C0A8000100002A9F0000000000000000\x02WAIT\x01true\x02TAGS\x01TagA"),
]


@pytest.mark.parametrize("case", PLAIN_CASES)
def test_the_compiled_plain_record_is_put_ones_record(tmp_path, case):
    """put_one.build_plain (the broker's lane: one compiled call) builds build_one's record, tags code and unique
    key for the same message, and put_many stores it as it stores build_one's."""
    from rmq_common.message_properties import parse_properties
    from store.put_one import build_one, build_plain, canonical_text

    topic, text = case.get("topic", "T"), case["text"]
    born_host, born_ts = case.get("born_host", "10.1.2.3:4567"), case.get("born_timestamp", 1700000000000)
    flag, sys_flag, reconsume = case.get("flag", 0), case.get("sys_flag", 0), case.get("reconsume_times", 0)
    with MessageStore(tmp_path / "s") as store:
        store.store_host = codec.parse_host("192.168.0.9:10911")
        props = parse_properties(text)
        want = build_one(store, topic, case["body"], None, None, props, None, None, flag, born_ts, sys_flag, born_host,
                         reconsume, canonical_text(text, props))  # as the broker's general way calls it
        got = build_plain(store, topic, case["body"], text, flag, sys_flag, born_ts, codec.parse_host(born_host),
                          reconsume, ("DELAY", "TRAN_MSG"))
        assert got is not None and want is not None
        assert (got.record, got.tags_code, got.uniq_key, got.topic) == \
            (want.record, want.tags_code, want.uniq_key, want.topic)
        result = store.put_many([dict(topic=topic, body=case["body"], properties=props, queue_id=0)], ones=[got])[0]
        stored = store.look_message_by_offset(result.commit_log_offset)[0]
        assert (stored.body, stored.properties, stored.flag, stored.queue_offset) == (case["body"], props, flag, 0)
        assert got.record.endswith(b"\x02")  # the properties text stored ended


@pytest.mark.parametrize("text, why", [
    ("UNIQ_KEY\x01U\x02DELAY\x013\x02", "a refused key"),
    ("TAGS\x01a\x02", "no UNIQ_KEY"),
    ("UNIQ_KEY\x01U\x02UNIQ_KEY\x01V\x02", "a key twice"),
    ("UNIQ_KEY\x01U\x02\x02", "an empty pair"),
    ("UNIQ_KEY\x01U\x02k\x01", "the last pair unended with no value"),
    ("UNIQ_KEY\x01U\x02\x01x\x02", "an empty key"),
    ("UNIQ_KEY\x01U\x02k\x01\x02", "an empty value"),
    ("UNIQ_KEY\x01U\x01V\x02", "a separator inside a value"),
    ("", "no properties"),
    ("UNIQ_KEY\x01U\x02" + "k\x01" + "v" * 33000 + "\x02", "properties over 32767 bytes"),
])
def test_the_compiled_plain_record_leaves_anything_unusual_to_the_general_put(tmp_path, text, why):
    from store.put_one import build_plain

    with MessageStore(tmp_path / "s") as store:
        args = ("T", b"x", text, 0, 0, 1, (bytes(4), 1), 0, ("DELAY", "TRAN_MSG"))
        assert build_plain(store, *args) is None, why
    with MessageStore(tmp_path / "t", StoreConfig(maxMessageSize=4)) as store:
        ok = "UNIQ_KEY\x01U\x02"
        assert build_plain(store, "T", b"12345", ok, 0, 0, 1, (bytes(4), 1), 0, ()) is None  # over maxMessageSize
        assert build_plain(store, "bad topic", b"1", ok, 0, 0, 1, (bytes(4), 1), 0, ()) is None
        assert build_plain(store, "T", b"1", ok, 2**31, 0, 1, (bytes(4), 1), 0, ()) is None  # flag past int32
        assert build_plain(store, "T", b"1", ok, 0, codec.ATOMIC_BATCH_FLAG, 1, (bytes(4), 1), 0, ()) is None
        assert build_plain(store, "T", b"1", ok, 0, 0, 1, (bytes(4), 1), -1, ()) is None  # reconsumeTimes < 0
        assert build_plain(store, "T", b"1", ok, 0, 0, 1, (bytes(4), 1), 0, ()) is not None
