"""df.write / df.writeStream format("rmq"): what goes in comes back, column by column."""
import datetime as dt
import os

import pyspark.sql.functions as F
from chispa import assert_df_equality
from pyspark.sql.types import (
    ArrayType,
    IntegerType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)
from sink_testkit import counts, markers, stored
from source_testkit import fill


def _comparable(df):
    """Columns a user wrote, in a form Spark can sort (maps as sorted entry arrays, store-made keys dropped)."""
    props = F.map_filter("properties", lambda k, v: ~k.isin("TAGS", "KEYS"))  # mirrored columns
    return df.select("topic", "body", "tags", "keys", F.array_sort(F.map_entries(props)).alias("properties"))


def test_batch_round_trip_read_transform_write_read_back(spark, tmp_path):
    src = fill(tmp_path / "src", "T", n=60, queues=3)
    dst = str(tmp_path / "dst")
    df = spark.read.format("rmq").option("topic", "T").load(src)
    out = df.select(F.lit("OUT").alias("topic"), "body", "tags", "keys", "properties")
    out.write.format("rmq").mode("append").save(dst)
    back = spark.read.format("rmq").option("topic", "OUT").load(dst)
    assert_df_equality(_comparable(back), _comparable(out), ignore_row_order=True, ignore_nullable=True)
    # the batch write left nothing behind but its commit marker
    assert len(markers(dst)) == 1 and markers(dst)[0][2] == 60
    assert os.listdir(os.path.join(dst, "sink")) == []


def test_stream_round_trip_with_transform(spark, tmp_path):
    src = fill(tmp_path / "src", "T", n=90, queues=3)
    dst = str(tmp_path / "dst")
    stream = (spark.readStream.format("rmq").option("topic", "T").option("startingOffsets", "earliest")
              .option("maxMessagesPerTrigger", 40).load(src))
    transformed = stream.select(F.concat(F.col("body"), F.lit(b"!")).alias("value"), F.upper("tags").alias("tags"),
                                "keys", "properties")
    # queryName: Spark hands it to the sink as an option, which must be accepted
    q = (transformed.writeStream.format("rmq").queryName("roundtrip").option("topic", "UP")
         .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start(dst))
    q.awaitTermination()
    assert q.exception() is None
    back = spark.read.format("rmq").option("topic", "UP").load(dst)
    expected = (spark.read.format("rmq").option("topic", "T").load(src)
                .select(F.lit("UP").alias("topic"), F.concat(F.col("body"), F.lit(b"!")).alias("body"),
                        F.upper("tags").alias("tags"), "keys", "properties"))
    assert_df_equality(_comparable(back), _comparable(expected), ignore_row_order=True, ignore_nullable=True)
    sink_markers = markers(dst)
    assert len(sink_markers) >= 3 and sum(m[2] for m in sink_markers) == 90
    assert {m[0] for m in sink_markers} == {sink_markers[0][0]} and sink_markers[0][0].startswith("query-")


def test_every_accepted_column(spark, tmp_path):
    dst = str(tmp_path / "dst")
    schema = StructType([
        StructField("topic", StringType()), StructField("value", StringType()), StructField("tags", StringType()),
        StructField("keys", ArrayType(StringType())), StructField("properties", MapType(StringType(), StringType())),
        StructField("queue_id", IntegerType()), StructField("sharding_key", StringType()),
        StructField("born_timestamp", TimestampType()),
    ])
    born = dt.datetime(2024, 5, 1, 12, 30, 0, 123000)
    rows = [("A", f"text-{i}", "TagA" if i % 2 else None, [f"k{i}", "shared"], {"p": str(i), "UNIQ_KEY": f"U{i}"},
             (0 if i < 4 else None), ("s1" if i >= 4 else None), born) for i in range(10)]
    rows.append(("B", "other", None, None, None, None, None, None))
    spark.createDataFrame(rows, schema).coalesce(2).write.format("rmq").mode("append").save(dst)
    a = stored(dst, "A").to_pylist()
    assert sorted(r["body"] for r in a) == sorted(f"text-{i}".encode() for i in range(10))
    by_body = {r["body"]: r for r in a}
    r3 = by_body[b"text-3"]
    assert r3["tags"] == "TagA" and r3["keys"] == ["k3", "shared"] and r3["queue_id"] == 0
    assert dict(r3["properties"])["UNIQ_KEY"] == "U3" and dict(r3["properties"])["p"] == "3"
    assert r3["born_timestamp"] == born
    # one sharding key: one queue, in row order
    sharded = [r for r in a if r["body"] >= b"text-4"]
    assert len({r["queue_id"] for r in sharded}) == 1
    assert [r["body"] for r in sorted(sharded, key=lambda r: r["queue_offset"])] == \
        [f"text-{i}".encode() for i in range(4, 10)]
    b = stored(dst, "B").to_pylist()
    assert len(b) == 1 and b[0]["body"] == b"other" and "UNIQ_KEY" in dict(b[0]["properties"])


def test_keys_built_with_array_of_non_null_strings(spark, tmp_path):
    """F.array of non-null columns is array<string> whose elements Spark knows are never null (Arrow's
    list<string not null>): the keys still land as given."""
    dst = str(tmp_path / "dst")
    df = spark.range(3).select(F.format_string("b-%d", "id").alias("body"),
                               F.array(F.format_string("k%d", "id"), F.lit("all")).alias("keys"))
    assert not df.schema["keys"].dataType.containsNull
    df.write.format("rmq").option("topic", "K").mode("append").save(dst)
    assert sorted((r["body"], r["keys"]) for r in stored(dst, "K").to_pylist()) == \
        [(b"b-%d" % i, [f"k{i}", "all"]) for i in range(3)]


def test_idempotent_batch_write_with_sink_id_and_batch_id(spark, tmp_path):
    dst = str(tmp_path / "dst")
    df = spark.range(20).select(F.col("id").cast("string").alias("body"))
    for _ in range(2):
        (df.write.format("rmq").mode("append").option("topic", "I").option("sinkId", "nightly")
         .option("batchId", "7").save(dst))
    assert counts(dst, "I", [str(i).encode() for i in range(20)]) == (20, 20, 0, 0)
    df.write.format("rmq").mode("append").option("topic", "I").option("sinkId", "nightly").option(
        "batchId", "8").save(dst)
    assert counts(dst, "I", [str(i).encode() for i in range(20)])[0] == 40
    assert sorted(m[1] for m in markers(dst, "nightly")) == [7, 8]
