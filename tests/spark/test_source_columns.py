"""Reading some columns: a user-given schema (.schema(...)) returns exactly those columns in that order, and
includeProperties=false leaves out keys and properties; the values are the full read's, with and without tag
and SQL92 filters, for batch reads (of the store directory, and some through `rmq serve` of the same store) and
streams."""
import random

import pytest
from pyspark.errors import AnalysisException
from read_places import PLACES, places_of
from rmq_reads import read_rmq
from source_testkit import fill

from rmq_spark.schema import SCHEMA

FIELDS = {f.name: f.dataType.simpleString() for f in SCHEMA.fields}
FILTERS = {"none": {}, "tags": {"tags": "Aa || TagC"}, "sql": {"sql": "a >= 10 AND region = 'eu'"}}
SIX = ["topic", "queue_id", "queue_offset", "tags", "body", "store_timestamp"]
_shuffled = random.Random(21)
SINGLES = [[c] for c in FIELDS]
# Every column in several places of several orders (tests/store/test_scan_columns.py tries many more subsets and
# each column alone under each filter, at the store's scan).
MIXED = [SIX, list(reversed(FIELDS))] + [_shuffled.sample(list(FIELDS), k) for k in (2, 3, 5, 8, 12)]
FOUR = ["body", "tags", "queue_offset", "store_host"]  # read in both places
CASES = [(c, "none", "directory") for c in SINGLES] + \
    [(c, kind, "directory") for c in MIXED + [FOUR] for kind in sorted(FILTERS)] + \
    [(FOUR, kind, "cluster") for kind in sorted(FILTERS)]


def ddl(columns):
    return ", ".join(f"{c} {FIELDS[c]}" for c in columns)


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    return fill(tmp_path_factory.mktemp("columns") / "s", "T", n=60, queues=3)


def _read(spark, path, schema=None, **options):
    return read_rmq(spark, path=path, schema=schema, topic="T", **options)


@pytest.fixture(scope="module")
def at(path):
    """Where the store is read: at("directory"), or at("cluster"), the same store served by `rmq serve`."""
    with places_of(path) as where:
        yield where


@pytest.fixture(scope="module")
def full(spark, path):
    """The full read's rows, per filter (a scan's partitions come back in queue order, each in offset order)."""
    return {kind: [r.asDict() for r in _read(spark, path, **opts).collect()] for kind, opts in FILTERS.items()}


@pytest.mark.parametrize("columns,kind,place", CASES,
                         ids=[f"{'+'.join(c) if len(c) < 16 else 'all-' + c[0] + '-first'}-{k}"
                              f"{'-' + p if p != 'directory' else ''}" for c, k, p in CASES])
def test_a_schema_returns_exactly_its_columns_in_its_order(spark, at, full, columns, kind, place):
    df = read_rmq(spark, **at(place), schema=ddl(columns), topic="T", **FILTERS[kind])
    assert df.columns == columns
    got = [tuple(r) for r in df.collect()]
    assert got == [tuple(row[c] for c in columns) for row in full[kind]]
    assert got


def test_names_match_ignoring_case_and_keep_the_schemas_spelling(spark, path, full):
    df = _read(spark, path, "Body binary, QUEUE_OFFSET long")
    assert df.columns == ["Body", "QUEUE_OFFSET"]
    assert [tuple(r) for r in df.collect()] == [(r["body"], r["queue_offset"]) for r in full["none"]]


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("kind", sorted(FILTERS))
def test_include_properties_false_leaves_out_keys_and_properties(spark, at, full, kind, place):
    df = read_rmq(spark, **at(place), topic="T", includeProperties="false", **FILTERS[kind])
    rest = [c for c in FIELDS if c not in ("keys", "properties")]
    assert df.columns == rest  # known at .load(): Spark asked the source for its schema
    assert [r.asDict() for r in df.collect()] == [{c: row[c] for c in rest} for row in full[kind]]
    assert read_rmq(spark, **at(place), topic="T", includeProperties="true").columns == list(FIELDS)


@pytest.mark.parametrize("schema,message", [
    ("topic string, nope int", "schema field 'nope': not a column of the rmq source"),
    ("topic string, body string", "schema field 'body': the rmq source gives it as binary, not string"),
    ("queue_id long", "schema field 'queue_id': the rmq source gives it as int, not bigint"),
    ("keys array<int>", "schema field 'keys': the rmq source gives it as array<string>, not array<int>"),
    ("topic string, TOPIC string", "schema field 'TOPIC': given twice"),
    ("tags string NOT NULL", "schema field 'tags': null for messages without it"),
])
def test_a_bad_schema_fails_before_anything_is_read_naming_the_field_and_listing_the_columns(spark, path, schema,
                                                                                            message):
    # pyspark 4.3 makes a Python source only when a query with .schema(...) is planned, not at .load()
    df = _read(spark, path, schema)
    with pytest.raises(AnalysisException) as e:
        df.collect()
    text = str(e.value)
    assert f"RmqSchemaError: {message}" in text
    assert "The rmq source's columns (select any of them, in any order): topic string, queue_id int" in text


@pytest.mark.parametrize("value,message,at", [
    ("maybe", "option 'includeProperties': 'maybe' must be true or false", "load"),
    ("false", "option 'includeProperties': false leaves out keys and properties, and the schema selects 'keys'",
     "plan"),
])
def test_include_properties_errors_name_the_option(spark, path, value, message, at):
    if at == "load":
        with pytest.raises(AnalysisException, match=message):
            _read(spark, path, includeProperties=value)
        return
    with pytest.raises(AnalysisException, match=message):
        _read(spark, path, "topic string, keys array<string>", includeProperties=value).collect()


def test_a_stream_with_a_bad_schema_stops_before_any_batch(spark, path, tmp_path):
    q = (spark.readStream.format("rmq").option("topic", "T").option("startingOffsets", "earliest")
         .schema("topic string, body string").load(path)
         .writeStream.format("noop").option("checkpointLocation", str(tmp_path / "ck"))
         .trigger(availableNow=True).start())
    with pytest.raises(Exception) as e:
        q.awaitTermination()
    assert "RmqSchemaError: schema field 'body': the rmq source gives it as binary, not string" in str(e.value)
    assert q.recentProgress == []


@pytest.mark.parametrize("kind", sorted(FILTERS))
def test_a_stream_with_a_schema_restarts_from_its_checkpoint_exactly_once(spark, tmp_path, kind):
    path = fill(tmp_path / "s", "T", n=40, queues=2)
    out, ck = str(tmp_path / "out"), str(tmp_path / "ck")
    columns = ["topic", "queue_offset", "tags", "body"]

    def run():
        reader = spark.readStream.format("rmq").option("topic", "T").option("startingOffsets", "earliest")
        for k, v in {"maxMessagesPerTrigger": "7", **FILTERS[kind]}.items():
            reader = reader.option(k, v)
        q = (reader.schema(ddl(columns)).load(path).writeStream.format("parquet").option("path", out)
             .option("checkpointLocation", ck).trigger(availableNow=True).start())
        q.awaitTermination()
        return q

    first = run()
    assert len([p for p in first.recentProgress if p["numInputRows"]]) > 1  # several batches
    fill(path, "T", n=20, queues=2, start=40)
    run()
    got = spark.read.parquet(out)
    assert got.columns == columns
    want = [tuple(r[c] for c in columns) for r in _read(spark, path, **FILTERS[kind]).collect()]
    assert sorted((tuple(r) for r in got.collect()), key=repr) == sorted(want, key=repr)
    assert len(want) == got.count() and want
