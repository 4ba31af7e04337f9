"""The compiled record-bytes loops (store/_native.c) and their numpy/zlib fallbacks give the same answers."""
import zlib

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from filters.message_properties import properties_to_map
from store import message_codec as codec
from store import native
from store.properties_column import parse_properties

pytestmark = pytest.mark.skipif(not native.available(), reason="store._native is not built here")

texts = st.lists(st.text(alphabet=st.sampled_from(["a", "b", "é", "\x01", "\x02", "k", "v", "😀"]), max_size=30),
                 min_size=1, max_size=20)


@pytest.fixture
def without_native(monkeypatch):
    def run(fn, *args):
        monkeypatch.setattr(native, "_native", None)
        try:
            return fn(*args)
        finally:
            monkeypatch.undo()
    return run


@settings(max_examples=60, deadline=None)
@given(texts)
def test_properties_parse_like_rocketmq_with_and_without_native(values):
    arr = pa.array(values, pa.string())
    want = [codec.string_to_properties(v) for v in values]
    assert [dict(m) for m in parse_properties(arr).to_pylist()] == want
    assert [dict(m) for m in properties_to_map(arr).to_pylist()] == want
    # one entry per key on the compiled path (Spark refuses duplicate map keys)
    for m in parse_properties(arr).to_pylist():
        assert len({k for k, _ in m}) == len(m)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=300), min_size=1, max_size=30))
def test_crc_and_gather_match_zlib_and_slices(bodies):
    data = b"".join(bodies)
    lens = np.array([len(b) for b in bodies])
    ends = np.cumsum(lens)
    starts = ends - lens
    crcs = native.crc32_spans(data, starts, ends)
    assert crcs.tolist() == [zlib.crc32(b) & 0x7FFFFFFF for b in bodies]
    assert native.gather_spans(data, starts[::-1].copy(), ends[::-1].copy()).to_pylist() == bodies[::-1]


def test_fallbacks_agree(without_native):
    values = ["a\x011\x02a\x012\x02b\x01x", "", "\x01\x02k\x01v"]
    arr = pa.array(values)
    data = b"hello world, many spans"
    starts, ends = np.array([0, 6, 3]), np.array([5, 11, 3])
    assert without_native(native.crc32_spans, data, starts, ends).tolist() == native.crc32_spans(
        data, starts, ends).tolist()
    assert without_native(native.gather_spans, data, starts, ends).to_pylist() == [b"hello", b"world", b""]
    assert without_native(native.property_pairs, data, starts, ends) is None
    assert [dict(m) for m in without_native(parse_properties, arr).to_pylist()] == [
        codec.string_to_properties(v) for v in values]


def test_spans_outside_the_buffer_are_refused():
    with pytest.raises(ValueError, match="outside the buffer"):
        native.crc32_spans(b"abc", np.array([0]), np.array([5]))
    with pytest.raises(ValueError, match="outside the buffer"):
        native.gather_spans(b"abc", np.array([2]), np.array([1]))
