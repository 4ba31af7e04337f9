"""The source's Spark schema, and the one conversion from the store's scan batches to what Spark accepts."""
from __future__ import annotations

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

SCHEMA = StructType([
    StructField("topic", StringType()),
    StructField("queue_id", IntegerType()),
    StructField("queue_offset", LongType()),
    StructField("commit_log_offset", LongType()),
    StructField("msg_id", StringType()),
    StructField("tags", StringType()),
    StructField("keys", ArrayType(StringType())),
    StructField("properties", MapType(StringType(), StringType())),
    StructField("body", BinaryType()),
    StructField("born_timestamp", TimestampType()),
    StructField("store_timestamp", TimestampType()),
    StructField("born_host", StringType()),
    StructField("store_host", StringType()),
    StructField("sys_flag", IntegerType()),
    StructField("flag", IntegerType()),
    StructField("reconsume_times", IntegerType()),
])

# Spark checks a returned RecordBatch against exactly this (timestamp[us, tz=UTC], list field "element", ...).
ARROW_SCHEMA = to_arrow_schema(SCHEMA, timezone="UTC")
COLUMNS = [f.name for f in SCHEMA.fields]


def to_spark_batch(batch: pa.RecordBatch) -> pa.RecordBatch:
    """A store scan batch (SCAN_SCHEMA) as ARROW_SCHEMA: body_crc dropped, every column cast only where the
    types differ (timestamps ms -> us UTC, the list's field name), all vectorised."""
    arrays = []
    for field in ARROW_SCHEMA:
        col = batch.column(field.name)
        if not col.type.equals(field.type):
            col = col.cast(field.type)
        arrays.append(col)
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)
