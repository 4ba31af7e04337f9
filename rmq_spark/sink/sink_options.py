"""The sink's options, checked on the driver when the query starts (writer()/streamWriter()), before any task:
parse_sink_options reads them once into one rmq_log WriteOptions (SinkOptions) for the place they name
(rmq_log.places: which option names are known depends on it, so it is chosen first), and backend.sink_log opens
the MessageLog that writes with them.

Spark hands option names lower-cased; every error is an RmqOptionError naming the option at fault.
"""
from __future__ import annotations

from typing import Mapping, Optional

from rmq_common.message_codec import MAX_TOPIC_LENGTH
from rmq_log import places
from rmq_log.place import SinkBasics
from rmq_log.writes import WriteOptions as SinkOptions

from .. import option_keys as K
from ..errors import RmqOptionError, options_of_places
from ..options import canonical_options


def parse_sink_options(options: Mapping[str, str], stream: bool) -> SinkOptions:
    """The sink's options as given to df.writeStream (stream) or df.write. queryName: Spark hands a streaming
    query's .queryName(...) to its sink as an option; accepted and unused."""
    with options_of_places():
        place = places.for_writes(dict(options))
    opts = canonical_options(options, K.COMMON_SINK_OPTIONS + place.write_options + place.write_refuses,
                             f'writing format("rmq"){place.writes_how}')
    basics = SinkBasics(topic=topic_option(opts), sink_id=sink_id_option(opts),
                        checkpoint=opts.get(K.CHECKPOINT_LOCATION), stream=stream)
    with options_of_places():
        return place.writes(opts, basics)


def option_of_field(field: str) -> str:
    """The option a user sets the WriteOptions field a log's WriteOptionError names with."""
    return places.option_of(field) or field


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
