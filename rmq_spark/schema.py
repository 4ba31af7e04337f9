"""The source's Spark schema, the columns a query selects from it, and the one conversion from the store's scan
batches to what Spark accepts."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

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

from . import option_keys as K
from .errors import RmqOptionError, RmqSchemaError

if TYPE_CHECKING:
    import pyarrow as pa

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

COLUMNS = [f.name for f in SCHEMA.fields]

# includeProperties=false leaves these out: the nested columns, which cost Spark the most to take in.
PROPERTY_COLUMNS = ("keys", "properties")
# Columns that hold nulls (a message without a TAGS property): a schema may not declare them NOT NULL.
NULLABLE_COLUMNS = ("tags",)


def default_schema(include_properties: bool) -> StructType:
    """The schema of a read without .schema(...): every column, or all but keys and properties."""
    if include_properties:
        return SCHEMA
    return StructType([f for f in SCHEMA.fields if f.name not in PROPERTY_COLUMNS])


@dataclass(frozen=True)
class Selection:
    """The columns a query reads, in its schema's order: `columns` as the store's scan names them, and the Arrow
    schema Spark checks each returned batch against (the query's own field names and nullability)."""
    columns: tuple[str, ...]
    arrow_schema: pa.Schema

    def scan_columns(self, *needed: str) -> list[str]:
        """What to ask the store's scan for: the selected columns and those the reader needs itself."""
        return list(dict.fromkeys((*self.columns, *needed)))

    def to_spark_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """A store scan batch as Spark takes it: the selected columns only, each cast only where the types differ
        (timestamps ms -> us UTC, the list's field name), all vectorised."""
        import pyarrow as pa

        arrays = []
        for name, field in zip(self.columns, self.arrow_schema):
            col = batch.column(name)
            if not col.type.equals(field.type):
                col = col.cast(field.type)
            arrays.append(col)
        return pa.RecordBatch.from_arrays(arrays, schema=self.arrow_schema)


def _arrow_schema(schema: StructType) -> pa.Schema:
    """What Spark checks a returned RecordBatch against: exactly this (timestamp[us, tz=UTC], list field
    "element", ...). Arrow is imported here, when a reader is made: the planners that only name the source or ask
    its schema do without it."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


def __getattr__(name: str) -> Any:
    """ARROW_SCHEMA (every column's Arrow schema) and FULL (their Selection), made on first use."""
    if name == "ARROW_SCHEMA":
        value: Any = _arrow_schema(SCHEMA)
    elif name == "FULL":
        value = Selection(tuple(COLUMNS), __getattr__("ARROW_SCHEMA"))
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def select(schema: StructType, include_properties: bool = True) -> Selection:
    """The Selection a read's schema asks for (Spark passes the user's .schema(...), or default_schema()). Every
    field must be a column of SCHEMA with its type (names match as Spark matches them, ignoring case); anything
    else is an RmqSchemaError naming the field and listing the columns."""
    by_name = {f.name.lower(): f for f in SCHEMA.fields}
    if not schema.fields:
        _refuse("", "the schema selects no column")
    seen = set()
    for f in schema.fields:
        ours = by_name.get(f.name.lower())
        if ours is None:
            _refuse(f.name, "not a column of the rmq source")
        if ours.name in seen:
            _refuse(f.name, "given twice")
        seen.add(ours.name)
        if f.dataType != ours.dataType:
            _refuse(f.name, f"the rmq source gives it as {ours.dataType.simpleString()}, not "
                            f"{f.dataType.simpleString()}")
        if not f.nullable and ours.name in NULLABLE_COLUMNS:
            _refuse(f.name, "null for messages without it, so it cannot be NOT NULL")
        if not include_properties and ours.name in PROPERTY_COLUMNS:
            raise RmqOptionError(K.INCLUDE_PROPERTIES, f"false leaves out {' and '.join(PROPERTY_COLUMNS)}, and the "
                                                       f"schema selects '{f.name}'")
    columns = tuple(by_name[f.name.lower()].name for f in schema.fields)
    return Selection(columns, _arrow_schema(schema))


def _refuse(field: str, why: str) -> NoReturn:
    columns = ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in SCHEMA.fields)
    raise RmqSchemaError(field, f"{why}. The rmq source's columns (select any of them, in any order): {columns}")


def to_spark_batch(batch: pa.RecordBatch) -> pa.RecordBatch:
    """A store scan batch (SCAN_SCHEMA) as ARROW_SCHEMA (all columns; body_crc dropped)."""
    return __getattr__("FULL").to_spark_batch(batch)
