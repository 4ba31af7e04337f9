"""Message filters with Apache RocketMQ's semantics: tag selectors and SQL92
selectors, checked cheaply on consume-queue tag codes and exactly on each
message's properties, one record at a time or vectorised over Arrow."""

from .errors import FilterParseError
from .message_filter import MessageFilter
from .message_properties import parse_properties, properties_to_map, property_column
from .tag_hash import tags_hash_code

__all__ = [
    "FilterParseError",
    "MessageFilter",
    "parse_properties",
    "properties_to_map",
    "property_column",
    "tags_hash_code",
]
