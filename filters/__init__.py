"""Message filters with Apache RocketMQ's semantics: tag selectors and SQL92
selectors, checked cheaply on consume-queue tag codes and exactly on each
message's properties, one record at a time or vectorised over Arrow.

Building::

    MessageFilter.by_tags("TagA || TagB")      # "*", "" or None: everything
    MessageFilter.by_sql("a between 0 and 3")  # FilterParseError if RocketMQ would refuse it
    MessageFilter.all()
    MessageFilter.both(tag_filter, sql_filter)  # or tag_filter & sql_filter; None is no filter

What the store calls (None means no filter)::

    f.is_matched_by_consume_queue(tags_code) -> bool         # cheap, may let collisions through
    f.consume_queue_mask(tags_codes: int64 ndarray) -> bool ndarray
    f.is_matched_by_commit_log(properties: dict) -> bool    # exact; never raises
    f.commit_log_mask(batch) -> pyarrow.BooleanArray        # exact, from the `properties` map column
    f.properties_text_mask(texts) -> pyarrow.BooleanArray   # exact, from stored k\x01v\x02 texts

Also: tags_hash_code (store.tag_hash), parse_properties / properties_to_map /
property_column (rmq_common.message_properties).  A MessageFilter pickles; str()
is its normalised selector text.
"""

from rmq_common.message_properties import parse_properties, properties_to_map, property_column
from store.tag_hash import tags_hash_code

from .errors import FilterParseError
from .message_filter import MessageFilter

__all__ = [
    "FilterParseError",
    "MessageFilter",
    "parse_properties",
    "properties_to_map",
    "property_column",
    "tags_hash_code",
]
