"""The sink's column conversion and row checks, run in the tasks (no Spark needed): Arrow batches as Spark hands
them, including slices of bigger batches, whose map columns share their parent's entries."""
import pyarrow as pa
import pytest

from rmq_common.message_codec import MAX_PROPERTIES_LENGTH, properties_to_string
from rmq_log.store_commit import _append
from rmq_spark.sink.columns import MAP_TYPE, STAGED_SCHEMA, RowError, to_staged, validate_staged, with_uniq_keys
from store import MessageStore

ADDRESS = b"\x7f\x00\x00\x01"


def _stage(batch, first_row=10):
    columns = {name: i for i, name in enumerate(batch.schema.names)}
    rows = to_staged(batch, columns, "T", ADDRESS, first_row)
    validate_staged(rows, 1 << 20, first_row)
    return rows


def test_a_bad_property_is_found_in_the_rows_of_a_sliced_batch_only():
    props = pa.array([[("a", "")], [("b", "1")], [("c", "2"), ("d", "")], [("e", "3")], [("f", None)]], MAP_TYPE)
    batch = pa.RecordBatch.from_arrays([pa.array([b"x"] * 5), props], names=["body", "properties"])
    assert _stage(batch.slice(1, 1)).num_rows == 1  # row 0's empty value lies outside the slice
    assert _stage(batch.slice(3, 1)).num_rows == 1
    for part, row, key in ((batch, 10, "a"), (batch.slice(1, 2), 11, "d"), (batch.slice(3, 2), 11, "f")):
        with pytest.raises(RowError, match=f"row {row}: property '{key}' has a null or empty value"):
            _stage(part)


def test_uniq_keys_are_kept_where_given_and_added_where_missing():
    given = [None, [], [("k", "v")], [("UNIQ_KEY", "given-3"), ("é", "ünï")], [("a", "1"), ("UNIQ_KEY", "given-4"),
                                                                             ("b", "2")], [("x", "ÿ" * 3)]]
    for props in (pa.array(given, MAP_TYPE), pa.array([[("z", "0")]] + given + [[("z", "9")]], MAP_TYPE).slice(1, 6)):
        merged, uniq = with_uniq_keys(props, len(props), ADDRESS)
        rows, keys = merged.to_pylist(), uniq.to_pylist()
        assert keys[3:5] == ["given-3", "given-4"]
        new = [keys[i] for i in (0, 1, 2, 5)]
        assert len(set(new)) == 4 and all(len(k) == 32 for k in new)
        for i, (before, after) in enumerate(zip(given, rows)):
            # the row's own entries, in order, then the new UNIQ_KEY when it had none
            expected = list(before or []) + ([] if i in (3, 4) else [("UNIQ_KEY", keys[i])])
            assert after == expected, i


@pytest.mark.parametrize("extra, fails", [(0, False), (1, True)])
def test_properties_length_counts_bytes_of_entries_tags_and_keys(extra, fails, tmp_path):
    # multi-byte values: the limit is on the UTF-8 text (key \x01 value \x02 per entry, TAGS and KEYS included)
    tags, keys = "tägs", "k1 k2"
    fixed = {"TAGS": tags, "KEYS": keys, "UNIQ_KEY": "U" * 32, "p": ""}
    # the commit's atomic append adds nothing to the properties: the whole limit is the user's
    limit = MAX_PROPERTIES_LENGTH
    room = limit - len(properties_to_string(fixed).encode()) + extra
    value = "é" * (room // 2) + "v" * (room % 2)
    batch = pa.RecordBatch.from_pylist(
        [{"body": b"ok", "tags": None, "keys": None, "properties": None},
         {"body": b"big", "tags": tags, "keys": keys, "properties": [("p", value), ("UNIQ_KEY", "U" * 32)]}],
        schema=pa.schema([("body", pa.binary()), ("tags", pa.string()), ("keys", pa.string()),
                          ("properties", MAP_TYPE)]))
    if fails:
        with pytest.raises(RowError, match=f"row 11: properties are {limit + 1} bytes, more than {limit}$"):
            _stage(batch)
    else:
        rows = _stage(batch)
        assert rows.schema == STAGED_SCHEMA and rows.num_rows == 2
        # what the task accepts, the commit's atomic append accepts too (the limit is exact, not just safe)
        with MessageStore(str(tmp_path / "store")) as store:
            _append(store, pa.Table.from_batches([rows]))
            assert sum(store.max_offset("T", q) for q in store.queues("T")) == 2
