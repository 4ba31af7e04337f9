"""open_log: the one place that opens where the messages are, from a command's arguments or the settings a Spark
query's options were parsed into: the place they name (places.for_settings), refusing what a command asks of it
that it cannot honour."""
from __future__ import annotations

from typing import Any, Mapping, Optional

from . import places
from .errors import UsageError
from .message_log import MessageLog


def open_log(options: Optional[Mapping[str, object]] = None, **settings: Any) -> MessageLog:
    """The log of the place `settings` name: its address under the place's setting (store=PATH, namesrv=ADDRS,
    ...) with what else it reads of them (config; access_key, secret_key or a resolved account, timeout_ms), the
    default place's when no other is given. UsageError for an option in `options` (a command's: name -> value)
    that this place refuses. Nothing is opened yet: each request opens what it needs, and a missing store is
    reported by the first."""
    place = places.for_settings(settings)
    for name, value in (options or {}).items():
        if value and name in place.cli_refuses:
            raise UsageError(place.cli_refuses[name])
    return place.open(settings)
