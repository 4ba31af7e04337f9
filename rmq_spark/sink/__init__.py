"""The rmq sink: df.writeStream.format("rmq") / df.write.format("rmq"), exactly once per microbatch.

The data source delegates to make_writer / make_stream_writer; both check options and the input schema on
the driver before any task runs (they run again, cheaply, in the commit process).
"""
from __future__ import annotations

from typing import Optional

from pyspark.sql.types import StructType

from ..errors import RmqOptionError
from .columns import check_input_schema
from .exactly_once import SINK_COMMIT_TOPIC
from .sink_options import batch_options, stream_options
from .writer import RmqBatchWriter, RmqStreamWriter


def _store_config(opts):
    """The store's settings (maxMessageSize, flushDiskType...): the storeConfig file, else the defaults."""
    from store.store_config import StoreConfig

    if opts.store_config is None:
        return StoreConfig()
    try:
        return StoreConfig.from_file(opts.store_config)
    except ValueError as e:
        raise RmqOptionError("storeConfig", f"{opts.store_config}: {e}") from None


def _prepare_store(path: str, config) -> None:
    """Create the store when missing (the sink may start a new one). An existing store is left to the commit,
    which opens it (and recovers it if needed) anyway: this runs for every microbatch, twice."""
    import os

    from store import MessageStore

    if not os.path.isdir(os.path.join(path, "commitlog")):
        with MessageStore(path, config):
            pass


def _wire_writer(options, schema: StructType, stream: bool):
    """The sink's one choice of backend: with namesrvAddr the brokers (wire_writer), else None (the store
    directory's writers below)."""
    if not any(k.lower() == "namesrvaddr" for k in dict(options)):
        return None
    from .wire_writer import make_wire_writer
    topic = next((v for k, v in dict(options).items() if k.lower() == "topic"), None)
    return make_wire_writer(options, check_input_schema(schema, topic), stream=stream)


def make_stream_writer(options, schema: StructType, overwrite: bool):
    if overwrite:
        raise RmqOptionError("outputMode", "the rmq sink supports append output mode only (a message log cannot "
                                           "replace or update rows already appended); use outputMode(\"append\")")
    wire = _wire_writer(options, schema, stream=True)
    if wire is not None:
        return wire
    opts = stream_options(options)
    columns = check_input_schema(schema, opts.topic)
    config = _store_config(opts)
    _prepare_store(opts.path, config)
    return RmqStreamWriter(opts, columns, config)


def make_writer(options, schema: StructType, overwrite: bool):
    if overwrite:
        raise RmqOptionError("mode", "the rmq sink appends only; use mode(\"append\") (overwrite would delete "
                                     "messages other readers may not have consumed)")
    wire = _wire_writer(options, schema, stream=False)
    if wire is not None:
        return wire
    fresh = "sinkid" not in {k.lower() for k in dict(options)}
    opts = batch_options(options)
    columns = check_input_schema(schema, opts.topic)
    config = _store_config(opts)
    _prepare_store(opts.path, config)
    if fresh:
        remove_abandoned_writes(opts.path)
    return RmqBatchWriter(opts, columns, config, fresh)


# A one-off write's directory (sink/write-<uuid>) untouched this long belongs to a job that died between its
# tasks and its commit or abort; a live job touches it with every staged file.
ABANDONED_WRITE_AGE_S = 24 * 3600


def remove_abandoned_writes(path: str, now: Optional[float] = None) -> list:
    """Delete the staging of one-off batch writes abandoned by a dead job; returns what went."""
    import logging
    import os
    import shutil
    import time

    root = os.path.join(path, "sink")
    now = time.time() if now is None else now
    gone = []
    for name in (os.listdir(root) if os.path.isdir(root) else []):
        d = os.path.join(root, name)
        if not name.startswith("write-") or not os.path.isdir(d):
            continue
        newest = max([os.path.getmtime(os.path.join(a, x)) for a, ds, fs in os.walk(d) for x in ds + fs]
                     + [os.path.getmtime(d)])
        if now - newest > ABANDONED_WRITE_AGE_S:
            shutil.rmtree(d, ignore_errors=True)
            logging.getLogger(__name__).warning("removed %s: the staging of a batch write abandoned %.0f h ago", d,
                                                (now - newest) / 3600)
            gone.append(d)
    return gone


__all__ = ["make_writer", "make_stream_writer", "remove_abandoned_writes", "SINK_COMMIT_TOPIC", "RmqStreamWriter",
           "RmqBatchWriter"]
