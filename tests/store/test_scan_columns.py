"""A scan of some columns gives exactly those columns of the full scan, with filters and without the compiled
module too."""
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from python_kernels import use_python_kernels

from filters import MessageFilter
from store import SCAN_SCHEMA, MessageStore, StoreConfig

ALL = SCAN_SCHEMA.names
FILTERS = {"none": None, "tags": "Aa || TagC", "sql": "a >= 10 AND region = 'eu'"}


def _filter(kind):
    text = FILTERS[kind]
    if text is None:
        return None
    return MessageFilter.by_tags(text) if kind == "tags" else MessageFilter.by_sql(text)


@pytest.fixture(scope="module")
def store_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("cols") / "s"
    n = 300
    tags = ["Aa", "BB", "TagC", None, "TagD"]  # "Aa" and "BB" share a tags hash code: the filter must look
    with MessageStore(path, StoreConfig(mappedFileSizeCommitLog=8192)) as s:  # several files per queue
        s.create_topic("T", 2)
        s.put_batch("T", [b"body-%d" % i * (i % 7) for i in range(n)], tags=[tags[i % 5] for i in range(n)],
                    keys=[[f"k{i}", f"x{i % 3}"] for i in range(n)],
                    properties=[{"a": str(i), "region": "eu" if i % 2 else "us"} for i in range(n)],
                    queue_id=[i % 2 for i in range(n)])
        s.put_batch("T", [b"v6"], queue_id=0, born_host="[2001:db8::1]:10911")  # the general decoder's records
    return path


def _scan(path, columns, kind, batch_rows=64):
    with MessageStore(path, read_only=True) as s:
        out = []
        for q in (0, 1):
            for b in s.scan("T", q, 0, message_filter=_filter(kind), batch_rows=batch_rows, columns=columns):
                want = ALL if columns is None else columns
                assert b.schema == pa.schema([SCAN_SCHEMA.field(c) for c in want])
                out += b.to_pylist()
    return out


@pytest.fixture(scope="module")
def full(store_path):
    return {kind: _scan(store_path, None, kind) for kind in FILTERS}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(columns=st.lists(st.sampled_from(ALL), min_size=1, max_size=len(ALL), unique=True),
       kind=st.sampled_from(sorted(FILTERS)), compiled=st.booleans())
def test_any_columns_in_any_order_equal_the_full_scans(store_path, full, columns, kind, compiled):
    with pytest.MonkeyPatch.context() as mp:
        if not compiled:
            use_python_kernels(mp)
        got = _scan(store_path, columns, kind)
    assert got == [{c: row[c] for c in columns} for row in full[kind]]
    assert got  # every filter keeps some rows


@pytest.mark.parametrize("column", ALL)
def test_each_column_alone(store_path, full, column):
    for kind in FILTERS:
        assert _scan(store_path, [column], kind) == [{column: row[column]} for row in full[kind]]


@pytest.mark.parametrize("columns", [["nope"], ["body", "body"], []])
def test_unknown_or_repeated_columns_are_refused(store_path, columns):
    with MessageStore(store_path, read_only=True) as s:
        with pytest.raises(ValueError, match="scan columns"):
            list(s.scan("T", 0, 0, columns=columns))

