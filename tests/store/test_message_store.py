"""The store's public behaviour: put/put_batch, get_message statuses, rolling, recovery of consume queues."""
import os
import shutil
import struct

import numpy as np
import pytest

from rmq_common import message_codec as codec
from store import (
    CorruptRecordError,
    GetMessageStatus,
    InvalidMessageError,
    MessageStore,
    StoreConfig,
    UnknownTopicError,
)
from store.tag_hash import tags_hash_code

SMALL = dict(mappedFileSizeCommitLog=4096, mappedFileSizeConsumeQueue=20 * 16)


class TagIn:
    """A test double for the message-filter protocol (the store is real)."""

    def __init__(self, *tags):
        self.tags = set(tags)
        self.codes = {tags_hash_code(t) for t in tags}

    def is_matched_by_consume_queue(self, code):
        return code in self.codes

    def is_matched_by_commit_log(self, props):
        return props.get("TAGS") in self.tags


@pytest.fixture
def store(tmp_path):
    with MessageStore(tmp_path / "s", StoreConfig(**SMALL)) as s:
        yield s


def test_put_and_get_round_trip(store):
    r = store.put("TopicA", b"hello", tags="TagA", keys=["k1", "k2"], properties={"a": "1"}, queue_id=2)
    assert (r.topic, r.queue_id, r.queue_offset, r.commit_log_offset) == ("TopicA", 2, 0, 0)
    assert r.status == "PUT_OK"
    res = store.get_message("g", "TopicA", 2, 0)
    assert res.status == GetMessageStatus.FOUND and res.next_begin_offset == 1
    (m,) = res.messages
    assert (m.body, m.tags, m.keys, m.properties["a"]) == (b"hello", "TagA", ["k1", "k2"], "1")
    assert m.msg_id == r.msg_id and m.properties["UNIQ_KEY"] == r.uniq_key and len(r.uniq_key) == 32
    assert (res.min_offset, res.max_offset) == (0, 1)


def test_topic_created_on_first_write_in_rocketmq_shape(store):
    store.put("TopicB", b"x")
    import json
    data = json.load(open(os.path.join(store.path, "config", "topics.json")))
    cfg = data["topicConfigTable"]["TopicB"]
    assert cfg["readQueueNums"] == cfg["writeQueueNums"] == 8 and cfg["perm"] == 6
    assert cfg["topicName"] == "TopicB" and "dataVersion" in data
    store.create_topic("Small", 2)
    assert store.queues("Small") == [0, 1]


def test_round_robin_and_sharding_key(store):
    store.create_topic("RR", 4)
    res = store.put_batch("RR", [b"m"] * 8)
    assert sorted(np.bincount(res.queue_ids, minlength=4).tolist()) == [2, 2, 2, 2]
    res = store.put_batch("RR", [b"o%d" % i for i in range(20)], sharding_key=["order-1", "order-2"] * 10)
    q1 = {res[i].queue_id for i in range(0, 20, 2)}
    q2 = {res[i].queue_id for i in range(1, 20, 2)}
    assert len(q1) == 1 and len(q2) == 1
    # within one key's queue, its messages are in order
    (q,) = q1
    bodies = [m.body for m in store.get_message("g", "RR", q, 0, max_msgs=100).messages]
    mine = [b for b in bodies if b.startswith(b"o") and int(b[1:]) % 2 == 0]
    assert mine == [b"o%d" % i for i in range(0, 20, 2)]


def test_queue_offsets_dense_per_queue_and_commitlog_rolls(store):
    res = store.put_batch("TopicA", [os.urandom(100) for _ in range(300)], queue_id=[i % 3 for i in range(300)])
    assert len(os.listdir(os.path.join(store.path, "commitlog"))) > 5
    for q in range(3):
        assert store.max_offset("TopicA", q) == 100
        offs = res.queue_offsets[res.queue_ids == q]
        assert offs.tolist() == list(range(100))
    # every file but the last ends with an end-of-file blank record
    files = sorted(os.listdir(os.path.join(store.path, "commitlog")))
    for name in files[:-1]:
        assert int(name) % 4096 == 0


def test_end_of_file_blank_written_when_record_plus_8_does_not_fit(tmp_path):
    with MessageStore(tmp_path / "s", StoreConfig(mappedFileSizeCommitLog=1000)) as s:
        r1 = s.put("T", b"a" * 600, queue_id=0)
        r2 = s.put("T", b"b" * 300, queue_id=0)
        assert r1.commit_log_offset == 0 and r2.commit_log_offset == 1000
        first = open(os.path.join(s.path, "commitlog", "00000000000000000000"), "rb").read()
        size1 = r1.commit_log_offset + struct.unpack(">i", first[:4])[0]
        assert struct.unpack(">iI", first[size1:size1 + 8]) == (1000 - size1, 0xCBD43194)
        assert [m.body[:1] for m in s.get_message("g", "T", 0, 0).messages] == [b"a", b"b"]


def test_record_that_never_fits_is_refused(tmp_path):
    with MessageStore(tmp_path / "s", StoreConfig(mappedFileSizeCommitLog=512)) as s:
        with pytest.raises(ValueError, match="mappedFileSizeCommitLog"):
            s.put("T", b"x" * 600)


def test_get_message_statuses(store):
    assert store.get_message("g", "Nope", 0, 0).status == GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
    store.create_topic("T", 2)
    r = store.get_message("g", "T", 0, 5)
    assert r.status == GetMessageStatus.NO_MESSAGE_IN_QUEUE and r.next_begin_offset == 0
    store.put_batch("T", [b"a", b"b", b"c"], queue_id=0)
    r = store.get_message("g", "T", 0, 3)
    assert r.status == GetMessageStatus.OFFSET_OVERFLOW_ONE and r.next_begin_offset == 3
    r = store.get_message("g", "T", 0, 10)
    assert r.status == GetMessageStatus.OFFSET_OVERFLOW_BADLY and r.next_begin_offset == 0  # min is 0
    r = store.get_message("g", "T", 0, 1, max_msgs=1)
    assert r.status == GetMessageStatus.FOUND and [m.body for m in r.messages] == [b"b"]
    assert r.next_begin_offset == 2
    r = store.get_message("g", "T", 0, 0, message_filter=TagIn("Other"))
    assert r.status == GetMessageStatus.NO_MATCHED_MESSAGE and r.next_begin_offset == 3


def test_get_message_moves_past_long_non_matching_stretches(tmp_path):
    with MessageStore(tmp_path / "s") as s:
        s.put_batch("T", [b"x"] * 2000, tags="Skip", queue_id=0)
        s.put("T", b"wanted", tags="Want", queue_id=0)
        s.stats.update(consume_queue_units_scanned=0, commit_log_records_read=0)
        offset, calls, got = 0, 0, []
        while offset < 2001:
            r = s.get_message("g", "T", 0, offset, max_msgs=32, message_filter=TagIn("Want"))
            calls += 1
            got += r.messages
            assert r.next_begin_offset > offset
            offset = r.next_begin_offset
        assert [m.body for m in got] == [b"wanted"]
        assert calls == 3  # 16000 bytes of consume queue (800 units) per call
        assert s.stats["commit_log_records_read"] == 1  # tag codes pruned the rest at the consume queue


def test_tag_hash_collision_is_caught_on_the_record(store):
    assert tags_hash_code("Aa") == tags_hash_code("BB")
    store.put_batch("T", [b"aa", b"bb"], tags=["Aa", "BB"], queue_id=0)
    units = store.consume_queue("T", 0).units(0, 2)
    assert units["tags_code"][0] == units["tags_code"][1] == tags_hash_code("Aa") == 2112
    r = store.get_message("g", "T", 0, 0, message_filter=TagIn("Aa"))
    assert [m.body for m in r.messages] == [b"aa"]
    assert [b.column("body").to_pylist() for b in store.scan("T", 0, 0, message_filter=TagIn("Aa"))] == [[b"aa"]]


def test_transactions_prepared_and_rollback_are_not_dispatched(store):
    store.put_batch("T", [b"none", b"prep", b"commit", b"rollback"], queue_id=0,
                    sys_flag=[0, codec.TRANSACTION_PREPARED_TYPE, codec.TRANSACTION_COMMIT_TYPE,
                              codec.TRANSACTION_ROLLBACK_TYPE])
    assert store.max_offset("T", 0) == 2
    assert [m.body for m in store.get_message("g", "T", 0, 0).messages] == [b"none", b"commit"]


def test_bad_input_is_refused_before_anything_is_written(store):
    before = store.commit_log_max_offset()
    cases = [
        (dict(topic="bad topic", bodies=[b"x"]), "topic"),
        (dict(topic="../../etc", bodies=[b"x"]), "topic"),
        (dict(topic="T" * 128, bodies=[b"x"]), "127"),
        (dict(topic="T", bodies=[b"x", b"y" * (4 * 1024 * 1024 + 1)]),
         r"message 1: body is 4194305 bytes, more than maxMessageSize \(4194304\)"),
        (dict(topic="T", bodies=[b"x"], properties=[{"k\x01": "v"}]), "separator"),
        (dict(topic="T", bodies=[b"x"], properties=[{"k": "v\x02"}]), "separator"),
        (dict(topic="T", bodies=[b"x", b"y"], tags=["ok", "b\x01d"]), "message 1: tags"),
        # k\x01 v.. \x02 and the generated UNIQ_KEY\x01 <32 digits> \x02
        (dict(topic="T", bodies=[b"x"], properties=[{"k": "v" * 40000}]), "message 0: properties are 40045 bytes"),
        (dict(topic="T", bodies=[b"x"], queue_id=[99]), "queue_id 99"),
        (dict(topic="T", bodies=[b"x", b"y"], tags=["a"]), "tags: got 1 values for 2"),
    ]
    for kwargs, message in cases:
        topic = kwargs.pop("topic")
        bodies = kwargs.pop("bodies")
        with pytest.raises((InvalidMessageError, ValueError), match=message):
            store.put_batch(topic, bodies, **kwargs)
    assert store.commit_log_max_offset() == before
    assert "T" not in store.topics() or all(store.max_offset("T", q) == 0 for q in store.queues("T"))


def test_unknown_topic_or_queue(store):
    with pytest.raises(UnknownTopicError, match="unknown topic 'Nope'"):
        list(store.scan("Nope", 0, 0))
    store.create_topic("T", 2)
    with pytest.raises(UnknownTopicError, match="queue 5 does not exist"):
        list(store.scan("T", 5, 0))
    assert store.get_message("g", "T", 5, 0).status == GetMessageStatus.NO_MATCHED_LOGIC_QUEUE


def test_reopen_continues_offsets_and_keeps_data(tmp_path):
    path = tmp_path / "s"
    with MessageStore(path, StoreConfig(**SMALL)) as s:
        s.put_batch("T", [b"a"] * 50, queue_id=0)
    assert not os.path.exists(path / "abort")
    with MessageStore(path) as s:  # file sizes are taken from the files on disk
        assert s.config.mappedFileSizeCommitLog == 4096
        r = s.put("T", b"b", queue_id=0)
        assert r.queue_offset == 50
        assert s.get_message("g", "T", 0, 50).messages[0].body == b"b"


def test_consume_queue_rebuilt_from_commitlog_equals_the_written_one(tmp_path):
    path = tmp_path / "s"
    with MessageStore(path, StoreConfig(**SMALL)) as s:
        s.put_batch("A", [os.urandom(20) for _ in range(120)], tags=["x", "y", None] * 40)
        s.put_batch("B", [b"b"] * 30, tags="TagB", queue_id=1)
    cq_dir = path / "consumequeue"
    before = {os.path.relpath(os.path.join(d, f), cq_dir): open(os.path.join(d, f), "rb").read()
              for d, _, fs in os.walk(cq_dir) for f in fs}
    shutil.rmtree(cq_dir)
    with MessageStore(path, StoreConfig(**SMALL)) as s:  # the unit file size is not recorded anywhere else
        assert s.max_offset("B", 1) == 30
    after = {os.path.relpath(os.path.join(d, f), cq_dir): open(os.path.join(d, f), "rb").read()
             for d, _, fs in os.walk(cq_dir) for f in fs}
    assert after == before


def test_corrupt_record_is_never_returned(tmp_path):
    path = tmp_path / "s"
    with MessageStore(path) as s:
        s.put("T", b"precious payload", queue_id=0)
    with open(path / "commitlog" / "00000000000000000000", "r+b") as f:
        data = bytearray(f.read(200))
        i = data.index(b"precious")
        f.seek(i)
        f.write(b"X")
    with MessageStore(path, read_only=True) as s:
        with pytest.raises(CorruptRecordError, match=r"00000000000000000000 at offset 0: body CRC"):
            s.get_message("g", "T", 0, 0)
        with pytest.raises(CorruptRecordError, match="CRC"):
            list(s.scan("T", 0, 0))


def test_consume_queue_unit_pointing_at_the_wrong_place_is_corruption(tmp_path):
    path = tmp_path / "s"
    with MessageStore(path) as s:
        s.put_batch("T", [b"a", b"b"], queue_id=0)
    cq = path / "consumequeue" / "T" / "0" / ("0" * 20)
    with open(cq, "r+b") as f:
        f.seek(20)
        f.write(struct.pack(">q", 3))  # unit 1 now points into the middle of record 0
    with MessageStore(path, read_only=True) as s:
        with pytest.raises(CorruptRecordError):
            s.get_message("g", "T", 0, 0)
        with pytest.raises(CorruptRecordError):
            list(s.scan("T", 0, 0))


def test_store_without_config_dir_discovers_topics(tmp_path):
    path = tmp_path / "s"
    with MessageStore(path) as s:
        s.put_batch("Orders", [b"o"] * 5, queue_id=3)
    shutil.rmtree(path / "config")
    with MessageStore(path, read_only=True) as s:
        assert s.topics() == ["Orders"]
        assert s.queues("Orders") == list(range(8))  # created with 8 queues: each has its directory
        assert s.max_offset("Orders", 3) == 5
        assert [m.body for m in s.get_message("g", "Orders", 3, 0).messages] == [b"o"] * 5


def test_read_only_store_refuses_writes(tmp_path):
    path = tmp_path / "s"
    with MessageStore(path) as s:
        s.put("T", b"x")
    with MessageStore(path, read_only=True) as s:
        with pytest.raises(Exception, match="read-only"):
            s.put("T", b"y")


def test_store_config_from_conf_file(tmp_path):
    conf = tmp_path / "store.conf"
    conf.write_text("# comment\nmappedFileSizeCommitLog=8192\nflushDiskType = SYNC_FLUSH\n")
    cfg = StoreConfig.from_file(conf)
    assert cfg.mappedFileSizeCommitLog == 8192 and cfg.flushDiskType == "SYNC_FLUSH"
    conf.write_text("mappedFileSizeCommitlog=8192\n")
    with pytest.raises(ValueError, match="unknown config key 'mappedFileSizeCommitlog'.*did you mean"):
        StoreConfig.from_file(conf)
    with pytest.raises(ValueError, match="flushDiskType"):
        StoreConfig(flushDiskType="SOMETIMES")
