"""RocketMQ's stored properties text, per message and vectorised: the dict,
the Arrow map and the per-property columns must all say the same."""

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from filters import MessageFilter, parse_properties, properties_to_map, property_column
from rmq_common.message_properties import PropertiesText

CASES = [
    ("TAGS\x01TagA\x02KEYS\x01k1 k2\x02", {"TAGS": "TagA", "KEYS": "k1 k2"}),
    ("a\x011\x02b\x012", {"a": "1", "b": "2"}),  # last pair without \x02
    ("a\x011\x02a\x012\x02", {"a": "2"}),  # a later duplicate wins
    ("a\x011\x02a\x01\x02", {"a": "1"}),  # ...but an empty value is dropped, not a winner
    ("\x01v\x02k\x01\x02x\x02", {}),  # empty key, empty value, no separator: all dropped
    ("k\x01v\x01w\x02", {"k": "v\x01w"}),  # the key ends at the first \x01
    ("\x02\x02k\x01v\x02\x02", {"k": "v"}),
    ("ключ\x01значение\x02", {"ключ": "значение"}),
    ("", {}),
    (None, {}),
]


@pytest.mark.parametrize("text, expected", CASES)
def test_parse_properties(text, expected):
    assert parse_properties(text) == expected


def test_vectorised_forms_agree_with_the_dict():
    texts = [t for t, _ in CASES]
    expected = [e for _, e in CASES]
    as_map = properties_to_map(texts)
    assert as_map.type == pa.map_(pa.string(), pa.string())
    assert [dict(row) for row in as_map.to_pylist()] == expected
    text = PropertiesText(pa.array(texts, pa.string()))
    for name in ["TAGS", "KEYS", "a", "b", "k", "ключ", "x", ""]:
        want = [e.get(name) for e in expected]
        assert property_column(as_map, name).to_pylist() == want, name
        assert text.column(name).to_pylist() == want, name


TEXTS = st.lists(
    st.one_of(st.none(),
              st.lists(st.sampled_from(["a", "b", "ab", "\x01", "\x02", "é", "TAGS"]), max_size=14).map("".join)),
    max_size=12,
)


@settings(max_examples=200, deadline=None)
@given(texts=TEXTS, cut=st.integers(0, 3))
def test_random_texts(texts, cut):
    arr = pa.array(texts, pa.string())
    arr = arr.slice(min(cut, len(arr)))  # the store may hand over slices
    expected = [parse_properties(t) for t in arr.to_pylist()]
    as_map = properties_to_map(arr)
    assert [dict(row) for row in as_map.to_pylist()] == expected
    text = PropertiesText(arr)
    for name in ["a", "b", "ab", "TAGS"]:
        want = [e.get(name) for e in expected]
        assert property_column(as_map, name).to_pylist() == want
        assert text.column(name).to_pylist() == want


def test_large_string_and_chunked_inputs():
    texts = ["a\x011\x02", None, "a\x012\x02b\x01x\x02"]
    expected = [{"a": "1"}, {}, {"a": "2", "b": "x"}]
    for arr in [pa.array(texts, pa.large_string()), pa.chunked_array([texts[:1], texts[1:]]),
                pa.array(texts, pa.binary())]:
        assert [dict(r) for r in properties_to_map(arr).to_pylist()] == expected
        assert PropertiesText(arr).column("a").to_pylist() == ["1", None, "2"]


def test_filter_on_texts_and_on_maps_agree():
    f = MessageFilter.by_sql("a = '2' OR b IS NOT NULL")
    texts = ["a\x011\x02", None, "a\x012\x02", "a\x011\x02b\x01\x02", "b\x01y"]
    expected = [f.is_matched_by_commit_log(parse_properties(t)) for t in texts]
    assert expected == [False, False, True, False, True]
    assert f.properties_text_mask(texts).to_pylist() == expected
    batch = pa.RecordBatch.from_arrays([properties_to_map(texts)], names=["properties"])
    assert f.commit_log_mask(batch).to_pylist() == expected
    assert f.commit_log_mask(batch.slice(2, 2)).to_pylist() == expected[2:4]


def test_map_column_with_null_rows_and_duplicates():
    props = pa.array([[("a", "1"), ("a", "2")], None, [("b", "x")], []], type=pa.map_(pa.string(), pa.string()))
    assert property_column(props, "a").to_pylist() == ["2", None, None, None]
    f = MessageFilter.by_sql("a = 2 OR a IS NULL")
    batch = pa.RecordBatch.from_arrays([props], names=["properties"])
    assert f.commit_log_mask(batch).to_pylist() == [True, True, True, True]
    assert f.commit_log_mask(batch.slice(0, 0)).to_pylist() == []


def test_boolean_columns_to_numpy_at_any_offset():
    from filters.arrow_evaluator import _to_bool_numpy
    values = [True, None, False, True, True, None, False, False, True, True, False]
    arr = pa.array(values, pa.bool_())
    for start in range(len(values)):
        for length in (0, 1, len(values) - start):
            want = [bool(v) for v in values[start : start + length]]  # null counts as False
            assert _to_bool_numpy(arr.slice(start, length)).tolist() == want
    assert _to_bool_numpy(pa.chunked_array([values[:3], values[3:]], pa.bool_())).tolist() == [bool(v) for v in values]


def test_big_batches_narrowed_to_open_rows_agree_with_per_record():
    # past SUBSET_MIN_ROWS the right side of AND / OR runs on only the rows the left left open
    texts = [f"a\x01{i % 7 - 1}\x02b\x01{'x' if i % 3 else 'y'}" + ("\x02c\x01z" if i % 5 else "") for i in range(5000)]
    for selector in ["a OR a > 0", "b = 'y' AND a > 2", "c IS NULL OR a BETWEEN 1 AND 3", "NOT (b = 'x') AND c = 'z'"]:
        f = MessageFilter.by_sql(selector)
        expected = [f.is_matched_by_commit_log(parse_properties(t)) for t in texts]
        assert f.properties_text_mask(texts).to_pylist() == expected, selector
