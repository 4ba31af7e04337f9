"""The store directory as a place (place.Place): the Spark option `path` and the `rmq` flag --store (with
--config, $RMQ_STORE its default), the options only a directory takes (readOnly, metricsPath, maxBytesPerTrigger,
logOrder for reads; batchId and storeConfig for writes), and its StoreLog. The default place: `.load(dir)` sets path."""
from __future__ import annotations

import argparse
import os
import uuid
from typing import TYPE_CHECKING, Any, Mapping, Optional

from .place import (
    CHECKPOINT_LOCATION,
    SINK_ID,
    OptionError,
    Place,
    ReadPlace,
    SinkBasics,
    bool_option,
    default_stream_sink_id,
    int_option,
)

if TYPE_CHECKING:
    from .message_log import MessageLog
    from .writes import WriteOptions

PATH = "path"
READ_ONLY = "readOnly"
METRICS_PATH = "metricsPath"
LOG_ORDER = "logOrder"  # false: one partition per queue range instead of windows of the log across queues
MAX_BYTES_PER_TRIGGER = "maxBytesPerTrigger"
BATCH_ID = "batchId"
STORE_CONFIG = "storeConfig"


class StorePlace(Place):
    name = "store"
    setting = "store"
    address_option = PATH
    cli_flag = "--store"
    what = "a store directory"
    read_options = (READ_ONLY, METRICS_PATH, MAX_BYTES_PER_TRIGGER, LOG_ORDER)
    write_options = (PATH, BATCH_ID, STORE_CONFIG)
    cli_refuses = {"cluster": "--cluster is for --namesrv; a store is one broker's"}
    option_of = {"path": PATH, "store_config": STORE_CONFIG}

    def named_in(self, opts: Mapping[str, Any]) -> bool:
        return opts.get(PATH) not in (None, "")

    def foreign_read_option(self, name: str, chosen: Place) -> str:
        text = f"only for a store directory (path), not with {chosen.address_option}"
        return text + " (use maxMessagesPerTrigger)" if name == MAX_BYTES_PER_TRIGGER else text

    def reads(self, opts: Mapping[str, str]) -> ReadPlace:
        path = _source_path(opts)
        read_only = bool_option(opts, READ_ONLY, not os.path.exists(os.path.join(path, ".rmq-spark")))
        tuning = {"metrics_path": opts.get(METRICS_PATH), "log_order": bool_option(opts, LOG_ORDER, True)}
        return ReadPlace(log_settings={self.setting: path}, tuning=tuning,
                         identity=path, read_only=read_only)

    def writes(self, opts: Mapping[str, str], basics: SinkBasics) -> WriteOptions:
        """A stream's sinkId defaults to the query id kept in its checkpoint; a batch write has a fresh sink id
        per job unless both sinkId and batchId are given (then the same pair written again is a no-op: an
        idempotent batch write)."""
        from .writes import WriteOptions

        if basics.stream and BATCH_ID in opts:
            raise OptionError(BATCH_ID, "only for batch writes (df.write); a stream's batch ids come from Spark")
        path = _sink_path(opts)
        batch_id, fresh = None, False
        if basics.stream:
            if basics.sink_id is None and not basics.checkpoint:
                raise OptionError(SINK_ID, "required for a stream whose checkpoint location the sink is not told "
                                           f"(set option(\"{CHECKPOINT_LOCATION}\", ...) on the query, or option "
                                           "(\"sinkId\", ...) naming this sink uniquely and stably)")
            sink_id = basics.sink_id or default_stream_sink_id(basics.checkpoint or "")
        else:
            batch_id = _batch_id(opts, basics.sink_id)
            fresh = basics.sink_id is None
            sink_id = basics.sink_id or f"write-{uuid.uuid4().hex}"
            batch_id = 0 if fresh else batch_id
        config = _config_path(opts)
        return WriteOptions(path=path, topic=basics.topic, sink_id=sink_id, batch_id=batch_id,
                            checkpoint=basics.checkpoint, store_config=config, fresh=fresh, stream=basics.stream,
                            log_settings={self.setting: path, "config": config})

    def open(self, settings: Mapping[str, Any]) -> MessageLog:
        from .store_log import StoreLog
        return StoreLog(settings.get(self.setting), settings.get("config"))

    def add_arguments(self, parser: Any, common: Any) -> None:
        common.add_argument("-s", self.cli_flag, default=argparse.SUPPRESS, metavar="PATH",
                            help="the store directory (default: $RMQ_STORE)")
        common.add_argument("--config", default=argparse.SUPPRESS, metavar="FILE",
                            help="a broker.conf-style store config (e.g. conf/store.conf); an existing store keeps "
                                 "the file sizes it was written with")
        parser.add_argument("-s", self.cli_flag, default=os.environ.get("RMQ_STORE"), metavar="PATH",
                            help="the store directory (default: $RMQ_STORE)")
        parser.add_argument("--config", default=None, metavar="FILE",
                            help="a broker.conf-style store config (e.g. conf/store.conf)")


def _source_path(opts: Mapping[str, str]) -> str:
    path = opts.get(PATH)
    if path is None or not str(path).strip():
        raise OptionError(PATH, "the store directory is required: .option(\"path\", dir) or .load(dir)")
    path = os.path.abspath(os.path.expanduser(str(path)))
    if not os.path.isdir(path):
        raise OptionError(PATH, f"store directory {path} does not exist")
    if not (os.path.isdir(os.path.join(path, "commitlog")) or os.path.isdir(os.path.join(path, "consumequeue"))):
        raise OptionError(PATH, f"{path} is not a message store (it has neither commitlog/ nor consumequeue/)")
    return path


def _sink_path(opts: Mapping[str, str]) -> str:
    path = opts.get(PATH)
    if path is None or not str(path).strip():
        raise OptionError(PATH, "the store directory is required: .option(\"path\", dir) or .save(dir)")
    path = os.path.abspath(os.path.expanduser(str(path)))
    if os.path.isdir(os.path.join(path, "commitlog")) and os.listdir(os.path.join(path, "commitlog")) and \
            not os.path.exists(os.path.join(path, ".rmq-spark")):
        # A broker's store: a live broker may own it, and its recovery knows nothing of our sink records.
        raise OptionError(PATH, f"{path} holds a store that rmq-spark did not create (no .rmq-spark marker); "
                                "the sink appends only to stores it owns (read a broker's store instead)")
    if os.path.exists(path) and not os.path.isdir(path):
        raise OptionError(PATH, f"{path} exists and is not a directory")
    return path


def _batch_id(opts: Mapping[str, str], sink_id: Optional[str]) -> Optional[int]:
    raw = opts.get(BATCH_ID)
    if (sink_id is None) != (raw is None):
        missing = BATCH_ID if raw is None else SINK_ID
        raise OptionError(missing, "give sinkId and batchId together for an idempotent batch write "
                                   "(or neither: every df.write then appends once)")
    return int_option(opts, BATCH_ID, None, minimum=0)


def _config_path(opts: Mapping[str, str]) -> Optional[str]:
    value = opts.get(STORE_CONFIG)
    if value is None:
        return None
    value = os.path.abspath(os.path.expanduser(value))
    if not os.path.isfile(value):
        raise OptionError(STORE_CONFIG, f"{value}: no such file (a broker.conf-style key=value file)")
    return value


STORE = StorePlace()
