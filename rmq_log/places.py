"""Every place messages live in (PLACES, the default first), and how a Spark read's or write's options and a
command's arguments choose one of them. Adding a place is a module declaring its place.Place and an entry in
PLACES; the Spark source and sink, the `rmq` commands and open_log ask only this module."""
from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional

from .cluster_place import CLUSTER
from .errors import UsageError
from .place import OptionError, Place
from .store_place import STORE

PLACES: tuple[Place, ...] = (STORE, CLUSTER)


def for_settings(settings: Mapping[str, Any]) -> Place:
    """The place open_log's settings (a command's arguments) name: a place other than the default whose address
    is given (it wins over the default's, which $RMQ_STORE may give to every command), else the default."""
    named = [p for p in PLACES[1:] if settings.get(p.setting)]
    if len(named) > 1:
        raise UsageError(f"give one of {named[0].cli_flag} and {named[1].cli_flag}, not both")
    return named[0] if named else PLACES[0]


def for_reads(opts: Mapping[str, str]) -> Place:
    """The place a Spark source's options (their canonical names) name, else the default; OptionError for the
    address options of two places, naming both, and for an option only another place takes."""
    named = [p for p in PLACES if p.named_in(opts)]
    if len(named) > 1:
        a, b = named[:2]
        raise OptionError(b.address_option, f"give {a.what} ({a.address_option}={opts[a.address_option]!r}) or "
                                            f"{b.what} ({b.address_option}={opts[b.address_option]!r}), not both")
    place = named[0] if named else PLACES[0]
    for other in PLACES:
        given = [n for n in other.read_options if n in opts and n not in place.read_options]
        if other is not place and given:
            raise OptionError(given[0], other.foreign_read_option(given[0], place))
    return place


def for_writes(names: Iterable[str]) -> Place:
    """The place a Spark sink's option names (any case: Spark lower-cases them) name: a place other than the
    default whose address option is among them, else the default (which refuses the others' options as
    unknown). OptionError for two such places, naming both options."""
    given = {n.lower() for n in names}
    named = [p for p in PLACES[1:] if p.address_option.lower() in given]
    if len(named) > 1:
        a, b = named[:2]
        raise OptionError(b.address_option, f"give one of {a.address_option} and {b.address_option}, not both")
    return named[0] if named else PLACES[0]


def read_option_names() -> tuple[str, ...]:
    """Every place's address option and the options only it takes for reads."""
    return tuple(dict.fromkeys(n for p in PLACES for n in (p.address_option,) + p.read_options))


def write_option_names() -> tuple[str, ...]:
    """Every sink option some place takes."""
    return tuple(dict.fromkeys(n for p in PLACES for n in p.write_options))


def secret_options() -> tuple[str, ...]:
    return tuple(dict.fromkeys(n for p in PLACES for n in p.secret_options))


def option_of(setting: str) -> Optional[str]:
    """The Spark option that sets a place's setting or WriteOptions field (None: no place has it)."""
    return next((p.option_of[setting] for p in PLACES if setting in p.option_of), None)
