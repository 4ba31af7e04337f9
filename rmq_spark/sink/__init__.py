"""The rmq sink: df.writeStream.format("rmq") / df.write.format("rmq"), exactly once per microbatch.

The data source delegates to make_writer / make_stream_writer; both check options and the input schema on
the driver before any task runs (they run again, cheaply, in the commit process), then take their writers from
the backend the options name (backend.sink_backend_for: a store directory or a cluster).
"""
from __future__ import annotations

from pyspark.sql.types import StructType

from ..backend import sink_backend_for
from ..errors import RmqOptionError
from .columns import check_input_schema
from .exactly_once import SINK_COMMIT_TOPIC
from .sink_options import parse_sink_options
from .staging import remove_abandoned_writes
from .writer import RmqBatchWriter, RmqStreamWriter


def make_stream_writer(options, schema: StructType, overwrite: bool):
    if overwrite:
        raise RmqOptionError("outputMode", "the rmq sink supports append output mode only (a message log cannot "
                                           "replace or update rows already appended); use outputMode(\"append\")")
    opts = parse_sink_options(options, stream=True)
    return sink_backend_for(opts).stream_writer(check_input_schema(schema, opts.topic))


def make_writer(options, schema: StructType, overwrite: bool):
    if overwrite:
        raise RmqOptionError("mode", "the rmq sink appends only; use mode(\"append\") (overwrite would delete "
                                     "messages other readers may not have consumed)")
    opts = parse_sink_options(options, stream=False)
    return sink_backend_for(opts).batch_writer(check_input_schema(schema, opts.topic))


__all__ = ["make_writer", "make_stream_writer", "remove_abandoned_writes", "SINK_COMMIT_TOPIC", "RmqStreamWriter",
           "RmqBatchWriter"]
