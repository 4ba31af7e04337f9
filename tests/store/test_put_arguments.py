"""put's integer arguments: only None means "choose"; anything else is an int in range, or an error naming the
argument, the message and the range, before anything is written."""
from __future__ import annotations

from unittest import mock

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


def test_properties_given_as_rocketmq_texts_are_stored_as_sent(tmp_path):
    """A string column of properties texts (as clients send them) is written byte for byte, a Java-style last
    pair without its \\x02 closed; TAGS and UNIQ_KEY in the texts are the messages' tags and ids; a null is no
    properties; both the compiled and the fallback encoders agree."""
    from store import record_encoder
    from store.tag_hash import tags_hash_code

    texts = pa.array(["TAGS\x01A\x02color\x01red\x02UNIQ_KEY\x01u-0\x02", "TAGS\x01B\x02a\x011\x02a\x012",
                      None, "k\x01v\x02\x02"], pa.string())
    with MessageStore(tmp_path) as s:
        s.create_topic("T", 1)
        r = s.put_batch("T", [b"m0", b"m1", b"m2", b"m3"], properties=texts, queue_id=0)
        assert r.uniq_keys[0].as_py() == "u-0"
        (rb,) = s.scan("T", 0, 0, columns=("properties_text", "tags", "properties"))
        stored = rb.column(0).to_pylist()
        assert stored[0] == texts[0].as_py()
        assert stored[1].startswith("TAGS\x01B\x02a\x011\x02a\x012\x02UNIQ_KEY\x01")  # closed, then the store's id
        assert stored[2].startswith("UNIQ_KEY\x01") and stored[3].startswith("k\x01v\x02\x02UNIQ_KEY\x01")
        assert rb.column(1).to_pylist() == ["A", "B", None, None]
        assert [dict(m)["a"] for m in rb.column(2).to_pylist()[1:2]] == ["2"]  # the later duplicate wins
        codes = s.find_consume_queue("T", 0).units(0, 4)["tags_code"].tolist()  # what tag filters match
        assert codes[:2] == [tags_hash_code("A"), tags_hash_code("B")]
        with pytest.raises(InvalidMessageError, match="properties: got 1 values for 2 messages"):
            s.put_batch("T", [b"a", b"b"], properties=texts.slice(0, 1))
        with pytest.raises(InvalidMessageError, match=r"message 0: properties are 400\d\d bytes, more than 32767"):
            s.put_batch("T", [b"a"], properties=pa.array(["k\x01" + "v" * 39996 + "\x02"]))
    with mock.patch.object(record_encoder, "KERNELS", record_encoder.NumpyKernels()):
        with MessageStore(tmp_path / "fallback") as s:
            s.create_topic("T", 1)
            s.put_batch("T", [b"m0"], properties=texts.slice(1, 1), queue_id=0)
            (rb,) = s.scan("T", 0, 0, columns=("properties_text",))
            assert rb.column(0)[0].as_py().startswith("TAGS\x01B\x02a\x011\x02a\x012\x02UNIQ_KEY\x01")
