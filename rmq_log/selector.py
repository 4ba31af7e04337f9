"""A consume's tag and SQL92 selectors, parsed as the store's filter (filters.MessageFilter): a bad one is a usage
error naming its option, found before anything is read, whichever log reads."""
from __future__ import annotations

from typing import Optional

from .errors import UsageError


def message_filter(tags: Optional[str], sql: Optional[str]):
    """The store's filter of a tag and/or SQL92 selector (None: every message)."""
    if tags is None and sql is None:
        return None
    from filters import FilterParseError, MessageFilter
    try:
        tag_filter = MessageFilter.by_tags(tags) if tags is not None else None
    except FilterParseError as e:
        raise UsageError(f"--tags: {e}") from None
    try:
        sql_filter = MessageFilter.by_sql(sql) if sql is not None else None
    except FilterParseError as e:
        raise UsageError(f"--sql: {e}") from None
    return MessageFilter.both(tag_filter, sql_filter)
