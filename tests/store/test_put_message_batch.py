"""MessageStore.put_message_batch (store/put_message_batch.py: a client's MessageBatch body straight into records)
stores what put_batch stores for the same bodies, FLAGs and properties texts: the same record bytes (but the
store timestamp), the same consume-queue units and message ids; the unusual batch is left to put_batch (None),
and a body that does not decode is refused before anything is written."""
import struct

import numpy as np
import pyarrow as pa
import pytest

from rmq_common import message_codec as codec
from store import MessageStore, StoreConfig
from store.consume_queue import UNIT_DTYPE


def message_batch(messages) -> bytes:
    """(body, flag, properties text) per message, as MessageDecoder.encodeMessages lays them out."""
    out = bytearray()
    for body, flag, props in messages:
        raw = props.encode()
        out += struct.pack(">iiiii", 22 + len(body) + len(raw), 0, 0, flag, len(body)) + body
        out += struct.pack(">h", len(raw)) + raw
    return bytes(out)


JAVA = [(b"x" * 100, 0, f"TAGS\x01TagA\x02WAIT\x01true\x02UNIQ_KEY\x01{i:032X}\x02") for i in range(32)]
ODD = [
    (b"no properties", 5, ""),
    (b"unclosed", 0, "TAGS\x01A\x02KEYS\x01k1 k2"),  # Java's messageProperties2String leaves the last \x02 out
    (b"twice", -1, "TAGS\x01first\x02TAGS\x01second\x02UNIQ_KEY\x01U1\x02"),  # a later duplicate wins
    (b"", 0, "TAGS\x01\x02junk\x02\x01x\x02k\x01v"),  # an empty value, a pair with no \x01, an empty key
    (b"z" * 3000, 2**31 - 1, "UNIQ_KEY\x01U2\x02a\x01b\x01c\x02"),
]


def _same_ids(monkeypatch):
    """Both paths take their generated UNIQ_KEYs from one deterministic counter, so records compare whole."""
    def reserve(n, address):
        return codec.GeneratedIds(b"ABCDEF012345678901234567", 0, n)
    monkeypatch.setattr(codec, "reserve_uniq_keys", reserve)


def _records(store: MessageStore, offsets, sizes) -> list:
    out = []
    for offset, size in zip(offsets.tolist(), sizes.tolist()):
        view, start = store.commit_log.view_at(offset)
        raw = bytearray(view[offset - start:offset - start + size])
        at = codec.POS_BORNHOST + 8
        raw[at:at + 8] = bytes(8)  # STORETIMESTAMP: the clock's
        out.append(bytes(raw))
    return out


def _general(store, topic, messages, queue_id):
    """What the broker's general path hands put_batch for the same body."""
    bodies = pa.array([m[0] for m in messages], pa.binary())
    props = pa.array([m[2] for m in messages], pa.string())
    return store.put_batch(topic, bodies, properties=props, queue_id=queue_id, flag=[m[1] for m in messages],
                           born_timestamp=1700000000000, born_host="10.0.0.7:40000")


@pytest.mark.parametrize("messages", [JAVA, ODD, JAVA[:1]], ids=["java", "odd", "one"])
def test_message_batch_path_writes_what_put_batch_writes(tmp_path, monkeypatch, messages):
    _same_ids(monkeypatch)
    with MessageStore(tmp_path / "fast") as fast, MessageStore(tmp_path / "general") as general:
        for store in (fast, general):
            store.store_host = codec.parse_host("192.168.0.9:10911")
        for queue_id in (3, 3, 0):  # the second batch continues the queue's offsets
            got = fast.put_message_batch("T", message_batch(messages), queue_id, born_timestamp=1700000000000,
                                         born_host="10.0.0.7:40000")
            assert got is not None
            want = _general(general, "T", messages, queue_id)
            assert got.queue_offsets.tolist() == want.queue_offsets.tolist()
            assert got.commit_log_offsets.tolist() == want.commit_log_offsets.tolist()
            assert got.queue_ids.tolist() == [queue_id] * len(messages)
            units = [np.asarray(s.consume_queue("T", queue_id).units(int(got.queue_offsets[0]),
                                                                     int(got.queue_offsets[-1]) + 1),
                                dtype=UNIT_DTYPE) for s in (fast, general)]
            assert units[0].tolist() == units[1].tolist()
            assert _records(fast, got.commit_log_offsets, units[0]["size"]) == \
                _records(general, want.commit_log_offsets, units[1]["size"])
            assert [r.msg_id for r in got] == [r.msg_id for r in want]
        assert fast.commit_log_max_offset() == general.commit_log_max_offset()
    with MessageStore(tmp_path / "fast", read_only=True) as reopened:  # as a reader and recovery see them
        read, offset = [], 0
        while offset < 2 * len(messages):
            got = reopened.get_message("g", "T", 3, offset, 32)
            read += got.messages
            offset = got.next_begin_offset
        assert [m.body for m in read] == [m[0] for m in messages] * 2
        assert [m.flag for m in read] == [m[1] for m in messages] * 2


def test_unusual_batches_are_left_to_put_batch(tmp_path):
    with MessageStore(tmp_path / "s", StoreConfig(maxMessageSize=1000)) as store:
        for messages in ([(b"b", 0, "TAGS\x01ünï\x02")],                # not plain ASCII: put_batch checks UTF-8
                         [(b"b", 0, "TRAN_MSG\x01true\x02PGROUP\x01g\x02")],  # a transaction half
                         [(b"b", 0, ""), (b"y" * 1001, 0, "")],          # over maxMessageSize: put_batch words it
                         [(b"b", 0, "k\x01" + "v" * 32760)]):             # properties over 32767 with a UNIQ_KEY
            assert store.put_message_batch("T", message_batch(messages), 0, born_timestamp=1) is None
        assert store.put_message_batch("T", message_batch(JAVA[:2]), 99, born_timestamp=1) is None  # no queue 99
        with pytest.raises(ValueError, match="batch message 1: TOTALSIZE"):
            store.put_message_batch("T", message_batch(JAVA[:1]) + struct.pack(">iiiii", 999, 0, 0, 0, 0) + b"..",
                                    0, born_timestamp=1)
        assert store.commit_log_max_offset() == 0  # nothing written by any of them


def test_a_batch_that_must_roll_the_file_is_left_to_put_batch(tmp_path):
    config = StoreConfig(mappedFileSizeCommitLog=8192)
    with MessageStore(tmp_path / "s", config) as store:
        body = message_batch(JAVA)  # 32 records of ~250 bytes: the file holds one such batch
        assert store.put_message_batch("T", body, 0, born_timestamp=1) is not None
        assert store.put_message_batch("T", body, 0, born_timestamp=1) is None
        rolled = store.put_batch("T", [b"x"] * 32, queue_id=0)
        assert rolled.queue_offsets[0] == 32 and rolled.commit_log_offsets[0] == 8192


def test_batches_put_together_write_what_they_write_one_after_another(tmp_path, monkeypatch):
    """The broker's batches of one turn go in one write (put_message_batches): the same records (but the store
    timestamp), units and offsets as put_message_batch one after another; a body that does not decode is refused
    alone; an unusual batch makes it and every later one None (the caller puts them in order)."""
    _same_ids(monkeypatch)
    batches = [("T", message_batch(JAVA[:5]), 0), ("T", message_batch(ODD), 1), ("U", message_batch(JAVA), 0),
               ("T", message_batch(JAVA[5:9]), 0)]
    with MessageStore(tmp_path / "many") as many, MessageStore(tmp_path / "each") as each:
        for store in (many, each):
            store.store_host = codec.parse_host("192.168.0.9:10911")
        got = many.put_message_batches([(t, b, q, 1700000000000, "10.0.0.1:5") for t, b, q in batches])
        want = [each.put_message_batch(t, b, q, born_timestamp=1700000000000, born_host="10.0.0.1:5")
                for t, b, q in batches]
        for a, b in zip(got, want):
            assert a.queue_offsets.tolist() == b.queue_offsets.tolist()
            assert a.commit_log_offsets.tolist() == b.commit_log_offsets.tolist()
            sizes = np.diff(np.append(a.commit_log_offsets, a.commit_log_offsets[-1]))  # all but the last
            assert _records(many, a.commit_log_offsets[:-1], sizes[:-1]) == \
                _records(each, b.commit_log_offsets[:-1], sizes[:-1])
        assert got[3].queue_offsets.tolist() == [5, 6, 7, 8]  # after the first batch of T/0
        for q in (0, 1):
            cq_many, cq_each = many.consume_queue("T", q), each.consume_queue("T", q)
            assert cq_many.units(0, cq_many.max_offset()).tolist() == cq_each.units(0, cq_each.max_offset()).tolist()

        bad = message_batch(JAVA[:2])[:-3]
        unusual = message_batch([(b"x", 0, "TRAN_MSG\x01true\x02PGROUP\x01p\x02")])
        out = many.put_message_batches([("T", message_batch(JAVA[:2]), 0, 1, None), ("T", bad, 0, 1, None),
                                        ("T", unusual, 0, 1, None), ("T", message_batch(JAVA[:1]), 0, 1, None)])
        assert out[0].queue_offsets.tolist() == [9, 10]
        assert isinstance(out[1], ValueError)
        assert out[2:] == [None, None]
        assert many.max_offset("T", 0) == 11
