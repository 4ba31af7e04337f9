"""A SQL92 pull's matches are decided a few thousand units at a time and kept for the pulls that follow
(store/filter_matches.py): a consumer pulling 32 at a time still gets exactly the matching messages, in order,
including those appended after the kept range was decided, and a pull from an earlier offset decides again."""
import pyarrow as pa

from filters import MessageFilter
from rmq_common import message_codec as codec
from store import MessageStore
from store import filter_matches as fm


def _put(store, start, n):
    props = pa.array([f"a\x01{i % 10}\x02" for i in range(start, start + n)])
    store.put_batch("T", [b"m%d" % i for i in range(start, start + n)], properties=props, queue_id=0)


def _drain(store, flt, offset):
    got = []
    while True:
        result, body = store.get_message_records("T", 0, offset, 32, flt, by_properties=True)
        if body is not None:
            raw, pos = bytes(body), 0
            while pos < len(raw):
                msg = codec.decode_record(raw, pos)
                got.append(msg.queue_offset)
                pos += msg.store_size
        if result.next_begin_offset == offset:
            return got, offset
        offset = result.next_begin_offset


def test_pulls_get_exactly_the_matches_across_kept_ranges(tmp_path, monkeypatch):
    monkeypatch.setattr(fm, "CHUNK", 700)  # several kept ranges over a small queue
    flt = MessageFilter.by_sql("a = 3")
    with MessageStore(tmp_path / "s") as store:
        _put(store, 0, 5000)
        got, end = _drain(store, flt, 0)
        assert got == [i for i in range(5000) if i % 10 == 3] and end == 5000
        _put(store, 5000, 1234)  # appended after the range was decided up to the old end
        more, end = _drain(store, flt, end)
        assert more == [i for i in range(5000, 6234) if i % 10 == 3] and end == 6234
        again, _ = _drain(store, flt, 100)  # an earlier offset (a reset): decided again from there
        assert again == [i for i in range(100, 6234) if i % 10 == 3]
        other, _ = _drain(store, MessageFilter.by_sql("a = 4"), 0)  # each filter keeps its own
        assert other == [i for i in range(6234) if i % 10 == 4]
