"""The "rmq" Python data source: options checked when the query starts, then a batch or stream reader.

Spark imports this module in every Python process of a query: its lookup and create planners only name the source
and ask its schema, so the readers (and the store, Arrow and the clients under them) are imported when a reader
is made; `tests/spark/test_worker_first_read.py` checks what naming the source imports."""
from __future__ import annotations

import sys

from pyspark.sql.datasource import DataSource, DataSourceStreamReader
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from . import option_keys as K
from .errors import RmqOptionError
from .options import parse_options
from .schema import default_schema, select

# pyspark's planner module that calls pushFilters; the only process where a reader may override it (see
# batch_reader).
_PUSHDOWN_PLANNER = "pyspark.sql.worker.data_source_pushdown_filters"


class RmqDataSource(DataSource):
    """format("rmq"): a RocketMQ-format store directory as a stream or a table."""

    @classmethod
    def name(cls) -> str:
        return "rmq"

    # The same class serves df.write / writeStream (the sink), whose options differ, and Spark does not say
    # at construction whether it reads or writes. Spark asks schema() only of a read without .schema(...) (a
    # write has its DataFrame's), at .load(): the read options are checked there, so a bad one stops .load()
    # instead of failing the stream at .start(); they are checked again, with the store, when a reader is made.
    # A read with .schema(...) runs no Python at .load() (pyspark 4.3 makes the source when the query is
    # planned: a batch DataFrame's first action, a stream's first trigger), so its schema and options are
    # checked there, in reader() / streamReader(), before anything is read.

    def schema(self):
        return default_schema(parse_options(self.options).include_properties)

    def _read_config(self, schema: StructType):
        from .backend import backend_for
        from .offsets import check_against_store

        config = parse_options(self.options)
        selection = select(schema, config.include_properties)
        backend = backend_for(config)
        with backend.open() as store:
            check_against_store(config, store)
        return config, _build_filter(config), selection

    def reader(self, schema: StructType):
        from .batch_reader import RmqBatchReader, RmqPushdownBatchReader

        config, message_filter, selection = self._read_config(schema)
        if _called_by_pushdown_planner():
            return RmqPushdownBatchReader(config, message_filter, selection)
        return RmqBatchReader(config, message_filter, selection)

    def streamReader(self, schema: StructType):
        from .stream_reader import RmqStreamReader

        try:
            config, message_filter, selection = self._read_config(schema)
            for ending in (K.ENDING_OFFSETS, K.ENDING_TIMESTAMP, K.ENDING_OFFSETS_BY_TIMESTAMP):
                if ending in config.raw:
                    raise RmqOptionError(ending, "only for batch reads (spark.read); a stream has no end")
        except Exception as e:
            # pyspark 4.3's streaming source runner calls stop() on the reader it failed to make, in a `finally`
            # where that reader is unbound: its UnboundLocalError would be the error's last line. A reader that
            # raises the error from its first call leaves it the last line.
            return RefusedStreamReader(e)
        return RmqStreamReader(config, message_filter, selection)

    # The sink (rmq_spark/sink): df.write / df.writeStream.
    def writer(self, schema: StructType, overwrite: bool):
        from .sink import make_writer
        return make_writer(self.options, schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool):
        from .sink import make_stream_writer
        return make_stream_writer(self.options, schema, overwrite)


class RefusedStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """A stream whose options or schema were refused: every call Spark makes raises that error."""

    def __init__(self, error: Exception):
        self.error = error

    def _refuse(self):
        raise self.error

    def initialOffset(self) -> dict:
        self._refuse()
        return {}

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        self._refuse()
        return {}

    def getDefaultReadLimit(self) -> ReadLimit:
        self._refuse()
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._refuse()

    def partitions(self, start: dict, end: dict):
        self._refuse()
        return []

    def read(self, partition):
        self._refuse()
        return iter(())

    def commit(self, end: dict) -> None:
        self._refuse()

    def stop(self) -> None:
        pass


def _build_filter(config):
    from filters import MessageFilter

    tag_filter = MessageFilter.by_tags(config.tags) if config.tags is not None else None
    sql_filter = MessageFilter.by_sql(config.sql) if config.sql is not None else None
    combined = MessageFilter.both(tag_filter, sql_filter)
    return None if combined is None or combined.matches_everything else combined


def _called_by_pushdown_planner() -> bool:
    """True in pyspark's filter-pushdown planner (it will call pushFilters on the reader); the plain planner
    (pushdown off, or no filters) must get a reader that does not override pushFilters. The worker receives no
    session conf, but each of Spark's planner daemons runs one worker module, and only the pushdown planner's
    process imports its module."""
    return _PUSHDOWN_PLANNER in sys.modules
