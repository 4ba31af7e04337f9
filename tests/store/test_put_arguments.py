"""put's integer arguments: only None means "choose"; anything else is an int in range, or an error naming the
argument, the message and the range, before anything is written."""
from __future__ import annotations

import pyarrow as pa
import pytest

from store import InvalidMessageError, MessageStore


@pytest.mark.parametrize("kwargs, message", [
    ({"queue_id": -1}, "message 0: queue_id -1 is negative: queue ids start at 0"),
    ({"queue_id": 1.5}, "message 0: queue_id must be an integer, got 1.5"),
    ({"queue_id": True}, "message 0: queue_id must be an integer, got True"),
    ({"queue_id": 9}, "message 0: queue_id 9 is outside topic 'T''s write queues 0..3"),
    ({"born_timestamp": 2 ** 70}, f"born_timestamp {2 ** 70} is outside -9223372036854775808..9223372036854775807"),
    ({"flag": 2 ** 40}, f"flag {2 ** 40} is outside -2147483648..2147483647"),
    ({"flag": "3"}, "flag must be an integer, got '3'"),
])
def test_bad_integer_arguments_are_refused_by_name(tmp_path, kwargs, message):
    with MessageStore(tmp_path) as s:
        s.create_topic("T", 4)
        with pytest.raises(InvalidMessageError, match=message.replace("(", r"\(").replace(")", r"\)")):
            s.put("T", b"x", **kwargs)
        assert s.max_offset("T", 0) == 0


def test_per_message_values_name_the_message(tmp_path):
    with MessageStore(tmp_path) as s:
        with pytest.raises(InvalidMessageError, match="message 2: queue_id must be an integer, got 0.5"):
            s.put_batch("T", [b"a", b"b", b"c"], queue_id=[0, 1, 0.5])
        with pytest.raises(InvalidMessageError, match="message 1: flag"):
            s.put_batch("T", [b"a", b"b"], flag=[0, 2 ** 33])


def test_none_chooses_in_lists_and_arrow_arrays(tmp_path):
    with MessageStore(tmp_path) as s:
        s.create_topic("T", 4)
        r = s.put_batch("T", [b"a", b"b"], queue_id=[3, None])
        assert r.queue_ids[0] == 3 and 0 <= r.queue_ids[1] < 4
        r = s.put_batch("T", [b"a", b"b"], queue_id=pa.array([None, 2]))
        assert r.queue_ids[1] == 2
