"""Names a log's requests carry, checked as RocketMQ allows them before anything is asked."""
from __future__ import annotations

from .errors import UsageError


def check_group(group: str) -> None:
    """A consumer group name (1..255 of [%|a-zA-Z0-9_-]); a usage error naming --group."""
    from store.offset_store import check_group as check
    try:
        check(group)
    except ValueError as e:
        raise UsageError(f"--group: {e}") from None
