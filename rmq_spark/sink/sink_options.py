"""The sink's options, checked on the driver when the query starts (writer()/streamWriter()), before any task:
parse_sink_options reads them once into one rmq_log WriteOptions (SinkOptions), a store directory's (option path)
or a cluster's (option namesrvAddr), and backend.sink_log opens the MessageLog that writes with them.

Spark hands option names lower-cased; every error is an RmqOptionError naming the option at fault.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import uuid
from typing import Mapping, Optional

from rmq_common.message_codec import MAX_TOPIC_LENGTH
from rmq_log.writes import WriteOptions as SinkOptions
from rmq_log.writes import local_checkpoint

from .. import option_keys as K
from ..errors import RmqOptionError
from ..options import canonical_options, credentials_option, int_option, namesrv_addr_option

# queryName: Spark hands a streaming query's .queryName(...) to its sink as an option; accepted and unused.
OPTION_NAMES = K.SINK_OPTIONS
# Through brokers: the directory's own options are known too, to be refused naming namesrvAddr.
WIRE_OPTION_NAMES = K.WIRE_SINK_OPTIONS + (K.PATH, K.BATCH_ID, K.STORE_CONFIG)

EXACTLY_ONCE, AT_LEAST_ONCE = "exactly_once", "at_least_once"


# The WriteOptions field a log's WriteOptionError names -> the option a user sets it with.
OPTION_OF_FIELD = {"store_config": K.STORE_CONFIG, "namesrv_addr": K.NAMESRV_ADDR, "path": K.PATH}


def parse_sink_options(options: Mapping[str, str], stream: bool) -> SinkOptions:
    """The sink's options as given to df.writeStream (stream) or df.write: with namesrvAddr through brokers, else
    into a store directory. Which of the two decides which option names are known, so it is read first."""
    if any(k.lower() == K.NAMESRV_ADDR.lower() for k in dict(options)):
        return wire_options(options, stream)
    return stream_options(options) if stream else batch_options(options)


def _known(options: Mapping[str, str]) -> dict:
    return canonical_options(options, OPTION_NAMES, 'writing format("rmq")')


def _path(opts: dict) -> str:
    path = opts.get(K.PATH)
    if path is None or not str(path).strip():
        raise RmqOptionError(K.PATH, "the store directory is required: .option(\"path\", dir) or .save(dir)")
    path = os.path.abspath(os.path.expanduser(str(path)))
    if os.path.isdir(os.path.join(path, "commitlog")) and os.listdir(os.path.join(path, "commitlog")) and \
            not os.path.exists(os.path.join(path, ".rmq-spark")):
        # A broker's store: a live broker may own it, and its recovery knows nothing of our sink records.
        raise RmqOptionError(K.PATH, f"{path} holds a store that rmq-spark did not create (no .rmq-spark marker); "
                                     "the sink appends only to stores it owns (read a broker's store instead)")
    if os.path.exists(path) and not os.path.isdir(path):
        raise RmqOptionError(K.PATH, f"{path} exists and is not a directory")
    return path


def topic_option(opts: dict) -> Optional[str]:
    topic = opts.get(K.TOPIC)
    if topic is None:
        return None
    from rmq_common.message_codec import check_topic
    try:
        check_topic(topic)
    except ValueError as e:
        raise RmqOptionError(K.TOPIC, f"{e} (topics are 1..{MAX_TOPIC_LENGTH} characters of [A-Za-z0-9_%|-])") \
            from None
    return topic


def sink_id_option(opts: dict) -> Optional[str]:
    sink_id = opts.get(K.SINK_ID)
    if sink_id is not None and (not sink_id.strip() or len(sink_id) > 255 or any(c in sink_id for c in "\x01\x02")):
        raise RmqOptionError(K.SINK_ID, f"{sink_id!r} must be 1..255 characters without \\x01/\\x02")
    return sink_id


def stream_options(options: Mapping[str, str]) -> SinkOptions:
    """df.writeStream: sinkId defaults to the query id kept in the checkpoint (stable across restarts from it,
    new when the checkpoint is deleted), else a hash of the checkpoint path."""
    opts = _known(options)
    if K.BATCH_ID in opts:
        raise RmqOptionError(K.BATCH_ID, "only for batch writes (df.write); a stream's batch ids come from Spark")
    path, topic = _path(opts), topic_option(opts)
    checkpoint = opts.get(K.CHECKPOINT_LOCATION)
    sink_id = sink_id_option(opts)
    if sink_id is None:
        if not checkpoint:
            raise RmqOptionError(K.SINK_ID, "required for a stream whose checkpoint location the sink is not told "
                                           "(set option(\"checkpointLocation\", ...) on the query, or option "
                                           "(\"sinkId\", ...) naming this sink uniquely and stably)")
        sink_id = default_stream_sink_id(checkpoint)
    return SinkOptions(path=path, topic=topic, sink_id=sink_id, batch_id=None, checkpoint=checkpoint,
                       store_config=_config_path(opts), stream=True)


def default_stream_sink_id(checkpoint: str) -> str:
    local = checkpoint[len("file:"):] if checkpoint.startswith("file:") else checkpoint
    local = re.sub(r"^/+", "/", local) if local.startswith("//") else local
    try:
        with open(os.path.join(local, "metadata"), encoding="utf-8") as f:
            query_id = json.loads(f.readline())["id"]
        return f"query-{query_id}"
    except (OSError, ValueError, KeyError, TypeError):
        digest = hashlib.sha1(os.path.abspath(local).encode("utf-8")).hexdigest()[:16]
        return f"checkpoint-{digest}"


def batch_options(options: Mapping[str, str]) -> SinkOptions:
    """df.write: a fresh sink id per job unless both sinkId and batchId are given (then the same pair written
    again is a no-op: an idempotent batch write)."""
    opts = _known(options)
    path, topic = _path(opts), topic_option(opts)
    sink_id = sink_id_option(opts)
    raw_batch = opts.get(K.BATCH_ID)
    if (sink_id is None) != (raw_batch is None):
        missing = K.BATCH_ID if raw_batch is None else K.SINK_ID
        raise RmqOptionError(missing, "give sinkId and batchId together for an idempotent batch write "
                                      "(or neither: every df.write then appends once)")
    batch_id = None
    if raw_batch is not None:
        try:
            batch_id = int(raw_batch)
        except ValueError:
            raise RmqOptionError(K.BATCH_ID, f"{raw_batch!r} is not an integer") from None
        if batch_id < 0:
            raise RmqOptionError(K.BATCH_ID, f"{batch_id} must be >= 0")
    fresh = sink_id is None
    if sink_id is None:
        sink_id, batch_id = f"write-{uuid.uuid4().hex}", 0
    return SinkOptions(path=path, topic=topic, sink_id=sink_id, batch_id=batch_id,
                       checkpoint=opts.get(K.CHECKPOINT_LOCATION), store_config=_config_path(opts), fresh=fresh)


def wire_options(options: Mapping[str, str], stream: bool) -> SinkOptions:
    """Through brokers (namesrvAddr): the directory's options are refused, deliveryGuarantee picks transactional
    halves or plain sends, and an exactly-once stream keeps its decisions in its (local) checkpoint."""
    opts = canonical_options(options, WIRE_OPTION_NAMES, 'writing format("rmq") through brokers')
    for name in (K.PATH, K.BATCH_ID, K.STORE_CONFIG):
        if opts.get(name) not in (None, ""):
            raise RmqOptionError(name, f"not with namesrvAddr (the sink writes through brokers, not into a store "
                                       f"directory); give one of path and {K.NAMESRV_ADDR}")
    namesrv = namesrv_addr_option(opts)
    assert namesrv is not None  # parse_sink_options comes here only with namesrvAddr
    topic = topic_option(opts)
    guarantee = (opts.get(K.DELIVERY_GUARANTEE) or EXACTLY_ONCE).strip().lower().replace("-", "_")
    if guarantee not in (EXACTLY_ONCE, AT_LEAST_ONCE):
        raise RmqOptionError(K.DELIVERY_GUARANTEE, f"{opts[K.DELIVERY_GUARANTEE]!r}: give {EXACTLY_ONCE} "
                                                   f"(transactional messages) or {AT_LEAST_ONCE} (plain sends)")
    checkpoint = opts.get(K.CHECKPOINT_LOCATION)
    sink_id = sink_id_option(opts)
    if stream and guarantee == EXACTLY_ONCE:
        if not checkpoint:
            raise RmqOptionError(K.CHECKPOINT_LOCATION, "the wire sink keeps its commit decisions in the query's "
                                                        "checkpoint: set option(\"checkpointLocation\", ...) on the "
                                                        "query (or deliveryGuarantee=at_least_once)")
        try:
            local_checkpoint(checkpoint)
        except ValueError as e:
            raise RmqOptionError(K.CHECKPOINT_LOCATION, str(e)) from None
    if sink_id is None:
        sink_id = default_stream_sink_id(checkpoint) if checkpoint else "write"
    group = opts.get(K.PRODUCER_GROUP) or "rmq-sink-" + hashlib.sha1(sink_id.encode()).hexdigest()[:12]
    return SinkOptions(path="", topic=topic, sink_id=sink_id, batch_id=None, checkpoint=checkpoint,
                       namesrv_addr=namesrv, producer_group=group, exactly_once=guarantee == EXACTLY_ONCE,
                       broker_timeout_ms=int_option(opts, K.BROKER_TIMEOUT_MS, K.DEFAULT_BROKER_TIMEOUT_MS, minimum=0),
                       credentials=credentials_option(opts), stream=stream)


def _config_path(opts: dict) -> Optional[str]:
    value = opts.get(K.STORE_CONFIG)
    if value is None:
        return None
    value = os.path.abspath(os.path.expanduser(value))
    if not os.path.isfile(value):
        raise RmqOptionError(K.STORE_CONFIG, f"{value}: no such file (a broker.conf-style key=value file)")
    return value
