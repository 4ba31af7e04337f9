"""The rmq sink: df.writeStream.format("rmq") / df.write.format("rmq"), exactly once per microbatch.

The data source delegates to make_writer / make_stream_writer; both check options and the input schema on
the driver before any task runs (they run again, cheaply, in the commit process), then write through the log the
options name (backend.sink_log: a store directory or a cluster) with one stream writer and one batch writer.
"""
from __future__ import annotations

from pyspark.sql.types import StructType

from ..errors import RmqOptionError
from .columns import check_input_schema
from .sink_options import parse_sink_options
from .writer import RmqBatchWriter, RmqStreamWriter, open_writes


def make_stream_writer(options, schema: StructType, overwrite: bool):
    if overwrite:
        raise RmqOptionError("outputMode", "the rmq sink supports append output mode only (a message log cannot "
                                           "replace or update rows already appended); use outputMode(\"append\")")
    opts = parse_sink_options(options, stream=True)
    columns = check_input_schema(schema, opts.topic)
    return RmqStreamWriter(opts, columns, open_writes(opts, columns))


def make_writer(options, schema: StructType, overwrite: bool):
    if overwrite:
        raise RmqOptionError("mode", "the rmq sink appends only; use mode(\"append\") (overwrite would delete "
                                     "messages other readers may not have consumed)")
    opts = parse_sink_options(options, stream=False)
    columns = check_input_schema(schema, opts.topic)
    return RmqBatchWriter(opts, columns, open_writes(opts, columns))


__all__ = ["make_writer", "make_stream_writer", "RmqStreamWriter", "RmqBatchWriter"]
