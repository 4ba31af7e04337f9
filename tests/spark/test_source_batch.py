"""spark.read.format("rmq"): equal to the store's own get_message, filters (on a store directory and through
`rmq serve` alike), offsets, pushdown."""
import time

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F
from read_places import PLACES, places_of
from rmq_reads import read_rmq
from source_testkit import expected_df, fill, get_message_rows, ordered, read_metrics

from filters import MessageFilter

PUSHDOWN = "spark.sql.python.filterPushdown.enabled"


@pytest.fixture(scope="module")
def store2(tmp_path_factory):
    path = tmp_path_factory.mktemp("batch") / "store"
    fill(path, "T", n=60, queues=3)
    fill(path, "U", n=10, queues=1)
    fill(path, "Other", n=5, queues=1)
    return str(path)


@pytest.fixture
def pushdown(spark):
    def set_(on: bool):
        spark.conf.set(PUSHDOWN, "true" if on else "false")
    yield set_
    spark.conf.unset(PUSHDOWN)


def _rows(path, topic, queues, **kw):
    return [r for q in queues for r in get_message_rows(path, topic, q, **kw)]


def test_batch_read_equals_get_message(spark, store2):
    df = spark.read.format("rmq").option("subscribe", "T,U").load(store2)
    expected = expected_df(spark, _rows(store2, "T", range(3)) + _rows(store2, "U", [0]))
    assert_df_equality(ordered(df), expected)
    assert df.rdd.getNumPartitions() == 4  # one per queue


@pytest.fixture(scope="module")
def store2_at(store2):
    """Where store2 is read: store2_at("directory"), or store2_at("cluster"), the same store served by `rmq serve`."""
    with places_of(store2) as where:
        yield where


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("option,selector,build", [
    ("tags", "Aa", MessageFilter.by_tags),              # "BB" has the same hash code and must not leak in
    ("tags", "BB || TagD", MessageFilter.by_tags),
    ("sql", "region = 'eu' AND a > 20", MessageFilter.by_sql),
])
def test_filtered_batch_equals_filtered_get_message(spark, store2, store2_at, option, selector, build, place):
    df = read_rmq(spark, **store2_at(place), topic="T", **{option: selector})
    expected = expected_df(spark, _rows(store2, "T", range(3), message_filter=build(selector)))
    assert_df_equality(ordered(df), expected)
    assert df.count() > 0


@pytest.mark.parametrize("place", PLACES)
def test_expression_type_and_both_selectors(spark, store2, store2_at, place):
    # a SQL92 selector on TAGS: two of the three queues end in messages it refuses (the read moves past them)
    via_rocketmq_names = read_rmq(spark, **store2_at(place), topic="T", expressionType="SQL92",
                                  subExpression="TAGS IN ('Aa', 'TagC')")
    both = read_rmq(spark, **store2_at(place), topic="T", tags="Aa || TagC", sql="region = 'us'")
    assert sorted(r.tags for r in via_rocketmq_names.collect()) == sorted(
        r[5] for r in _rows(store2, "T", range(3)) if r[5] in ("Aa", "TagC"))
    rows = both.collect()
    assert rows and all(r.tags in ("Aa", "TagC") and r.properties["region"] == "us" for r in rows)
    assert sorted((r.queue_id, r.queue_offset) for r in rows) == sorted(
        (r[1], r[2]) for r in _rows(store2, "T", range(3),
                                    message_filter=MessageFilter.by_sql("TAGS IN ('Aa', 'TagC') AND region = 'us'")))


def test_offsets_json_assign_and_min_partitions(spark, store2):
    df = (spark.read.format("rmq").option("assign", '{"T": [0, 2]}')
          .option("startingOffsets", '{"T": {"0": 5, "2": -2}}').option("endingOffsets", '{"T": {"0": 12, "2": -1}}')
          .option("minPartitions", "6").load(store2))
    expected = expected_df(spark, get_message_rows(store2, "T", 0, 5, 12) + get_message_rows(store2, "T", 2))
    assert_df_equality(ordered(df), expected)
    assert df.rdd.getNumPartitions() >= 6
    # each split partition keeps queue order
    for part in df.select("queue_id", "queue_offset").rdd.glom().collect():
        for q in {r.queue_id for r in part}:
            offs = [r.queue_offset for r in part if r.queue_id == q]
            assert offs == sorted(offs)


def test_subscribe_pattern_and_starting_timestamp(spark, tmp_path):
    path = fill(tmp_path / "s", "Orders", n=6, queues=1)
    time.sleep(0.05)
    cut = int(time.time() * 1000)
    time.sleep(0.05)
    fill(path, "Orders", n=4, queues=1, start=6)
    fill(path, "Ordinary", n=3, queues=1)
    fill(path, "Refunds", n=3, queues=1)
    df = spark.read.format("rmq").option("subscribePattern", "Ord.*").load(path)
    assert sorted(r.topic for r in df.select("topic").collect()) == ["Orders"] * 10 + ["Ordinary"] * 3
    late = (spark.read.format("rmq").option("topic", "Orders").option("startingTimestamp", str(cut))
            .load(path).select("queue_offset").collect())
    assert sorted(r.queue_offset for r in late) == [6, 7, 8, 9]


@pytest.mark.parametrize("on", [False, True])
def test_spark_filters_with_pushdown_on_and_off(spark, store2, pushdown, on):
    pushdown(on)
    df = (spark.read.format("rmq").option("subscribe", "T,U").load(store2)
          .filter("tags IN ('Aa', 'TagC') AND queue_id = 1 AND queue_offset >= 4 AND topic = 'T'"))
    expected = [r for r in _rows(store2, "T", [1], start=4) if r[5] in ("Aa", "TagC")]
    assert_df_equality(ordered(df), expected_df(spark, expected))


def test_pushdown_keeps_non_matching_tags_out_of_the_commitlog(spark, store2, pushdown, tmp_path):
    """The scan counters of the executors' reads: with pushdown the tag test runs on consume-queue codes, so
    only "Aa" and its hash twin "BB" are read from the commitlog; without it every unit is read."""
    def scan(on):
        pushdown(on)
        metrics = str(tmp_path / f"metrics-{on}")
        rows = (spark.read.format("rmq").option("topic", "T").option("metricsPath", metrics).load(store2)
                .filter("tags = 'Aa'").select("tags").collect())
        return rows, read_metrics(metrics)

    rows_on, m_on = scan(True)
    rows_off, m_off = scan(False)
    assert [r.tags for r in rows_on] == [r.tags for r in rows_off] == ["Aa"] * 12
    units_on = sum(m["consume_queue_units_scanned"] for m in m_on)
    read_on = sum(m["commit_log_records_read"] for m in m_on)
    assert units_on == 60
    assert read_on == 24  # 12 "Aa" + 12 "BB": the collision is settled on the record, never returned
    assert sum(m["commit_log_records_read"] for m in m_off) == 60
    assert all("TAGS" in m["filter"] for m in m_on)


def test_pushdown_narrows_queue_offset_ranges(spark, store2, pushdown, tmp_path):
    pushdown(True)
    metrics = str(tmp_path / "m")
    df = (spark.read.format("rmq").option("topic", "T").option("metricsPath", metrics).load(store2)
          .filter("queue_offset BETWEEN 3 AND 5"))
    assert df.count() == 9
    assert sum(m["consume_queue_units_scanned"] for m in read_metrics(metrics)) == 9


@pytest.mark.parametrize("on", [False, True])
def test_store_timestamp_and_msg_id_filters_stay_exact(spark, tmp_path, pushdown, on):
    """A store_timestamp range narrows the scan by offsets-by-time; msg_id sets are applied as a residual mask.
    Either way the rows are exactly Spark's answer."""
    import datetime as dt
    path = fill(tmp_path / "s", "T", n=8, queues=2)
    time.sleep(0.05)
    cut = int(time.time() * 1000)
    time.sleep(0.05)
    fill(path, "T", n=6, queues=2, start=8)
    pushdown(on)
    metrics = str(tmp_path / "m")
    since = dt.datetime.fromtimestamp(cut / 1000, tz=dt.timezone.utc)
    df = (spark.read.format("rmq").option("topic", "T").option("metricsPath", metrics).load(path)
          .filter(f"store_timestamp >= timestamp'{since.strftime('%Y-%m-%d %H:%M:%S.%f')}'"))
    assert sorted(r.queue_offset for r in df.collect()) == [4, 4, 5, 5, 6, 6]
    scanned = sum(m["consume_queue_units_scanned"] for m in read_metrics(metrics))
    assert scanned == (6 if on else 14)
    some = [r.msg_id for r in df.collect()][:2]
    by_id = spark.read.format("rmq").option("topic", "T").load(path).filter(F.col("msg_id").isin(some))
    assert sorted(r.msg_id for r in by_id.collect()) == sorted(some)


def test_with_the_shipped_settings_a_dataframe_queried_again_after_a_where_gives_all_its_rows(spark, store2):
    """conf/spark-defaults.conf leaves pushdown off: with it on, pyspark 4.3 hands the pushed scan to the next
    query of the same DataFrame (docs/reading.md, "How it runs")."""
    from test_conf import spark_defaults

    spark.conf.set(PUSHDOWN, spark_defaults()[PUSHDOWN])
    try:
        df = spark.read.format("rmq").option("topic", "T").load(store2)
        some = df.where(F.col("queue_id") == 1).count()
        assert (some, df.count()) == (20, 60)
    finally:
        spark.conf.unset(PUSHDOWN)
