"""MessageStore.put's one-record path (store/put_one.py) stores what put_batch stores for the same message: the
same record bytes (but the store timestamp), the same consume-queue unit, and a file roll still goes through the
batch path with consecutive queue offsets."""
import numpy as np
import pytest

from store import MessageStore, StoreConfig
from store import message_codec as codec
from store.consume_queue import UNIT_DTYPE

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


def test_one_record_path_writes_what_put_batch_writes(tmp_path):
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
