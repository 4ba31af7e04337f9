"""Delayed messages' consume-queue units keep the time they are due, as RocketMQ's dispatch writes them: a stock
broker opening the store delivers each when due (a tag hash there would have it deliver all at once)."""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conftest_durability import run_python  # noqa: E402

from store import MessageStore, StoreConfig  # noqa: E402
from store.delay_levels import SCHEDULE_TOPIC  # noqa: E402
from store.store_check import check_store  # noqa: E402

LEVELS = "1s 7s 1m"
CFG = dict(mappedFileSizeCommitLog=4096, mappedFileSizeConsumeQueue=320, messageDelayLevel=LEVELS)


def _units_of(s, topic, qid):
    cq = s.consume_queue(topic, qid)
    return cq.units(0, cq.max_offset())


def _units(s, qid):
    return _units_of(s, SCHEDULE_TOPIC, qid)


def test_a_delayed_unit_holds_its_deliver_time(tmp_path):
    with MessageStore(tmp_path, StoreConfig(**CFG)) as s:
        s.create_topic(SCHEDULE_TOPIC, 3)
        s.put("plain", b"p", tags="t")
        for qid, level in ((1, "2"), (2, "3"), (2, "3")):
            s.put(SCHEDULE_TOPIC, b"d", tags="t", queue_id=qid,
                  properties={"DELAY": level, "REAL_TOPIC": "plain", "REAL_QID": "0"})
        for qid, delay in ((1, 7_000), (2, 60_000)):
            got = s.get_message("g", SCHEDULE_TOPIC, qid, 0, 8).messages
            assert _units(s, qid)["tags_code"].tolist() == [m.store_timestamp + delay for m in got]
        plain = [q for q in s.queues("plain") if s.max_offset("plain", q)][0]
        assert _units_of(s, "plain", plain)["tags_code"].tolist() == [116]  # Java's "t".hashCode()
    assert check_store(tmp_path, StoreConfig(**CFG)).ok


def test_a_level_past_the_last_is_dated_with_the_last(tmp_path):
    with MessageStore(tmp_path, StoreConfig(**CFG)) as s:
        s.create_topic(SCHEDULE_TOPIC, 8)
        s.put(SCHEDULE_TOPIC, b"d", queue_id=7, properties={"DELAY": "8", "REAL_TOPIC": "x", "REAL_QID": "0"})
        m = s.get_message("g", SCHEDULE_TOPIC, 7, 0).messages[0]
        assert _units(s, 7)["tags_code"].tolist() == [m.store_timestamp + 60_000]


DIE_BEFORE_UNITS = """
    import os, sys
    from store import MessageStore, StoreConfig
    import store.consume_queue
    s = MessageStore(sys.argv[1], StoreConfig(mappedFileSizeCommitLog=4096, mappedFileSizeConsumeQueue=320,
                                              messageDelayLevel="1s 7s 1m", flushDiskType="SYNC_FLUSH"))
    s.create_topic("SCHEDULE_TOPIC_XXXX", 3)
    def dying(writes, units):
        os._exit(9)
    store.consume_queue.write_units = dying
    s.put_batch("SCHEDULE_TOPIC_XXXX", [b"a", b"b"], queue_id=2,
                properties={"DELAY": "3", "REAL_TOPIC": "x", "REAL_QID": "0"})
"""


def test_delayed_records_dispatched_by_recovery_are_dated_too(tmp_path):
    out = run_python(DIE_BEFORE_UNITS, tmp_path, check=False)
    assert out.returncode == 9, out.stderr
    with MessageStore(tmp_path, StoreConfig(**CFG)) as s:
        got = s.get_message("g", SCHEDULE_TOPIC, 2, 0, 8).messages
        assert [m.body for m in got] == [b"a", b"b"]
        assert _units(s, 2)["tags_code"].tolist() == [m.store_timestamp + 60_000 for m in got]


def test_a_bad_message_delay_level_is_refused_by_name():
    with pytest.raises(ValueError, match="messageDelayLevel"):
        StoreConfig(messageDelayLevel="1s 5x")
