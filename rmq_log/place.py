"""Place: what one place messages live in declares about itself, so that the Spark source and sink, the `rmq`
commands and open_log choose and open it without naming it: the Spark option and the `rmq` flag that give its
address, the options only it takes (parsed here, with errors naming them), what a command may not ask of it,
and how its MessageLog is opened. places.PLACES lists the places; the first is the default.

The Spark options are plain strings here (rmq_spark.option_keys re-exports them); their errors are OptionError,
which rmq_spark raises again as its own."""
from __future__ import annotations

import abc
import dataclasses
import hashlib
import json
import os
import re
from typing import TYPE_CHECKING, Any, Mapping, Optional

if TYPE_CHECKING:
    from .message_log import MessageLog
    from .writes import WriteOptions

# The sink options every place's writes read (rmq_spark.option_keys re-exports them)
TOPIC = "topic"
SINK_ID = "sinkId"
CHECKPOINT_LOCATION = "checkpointLocation"


class OptionError(ValueError):
    """A Spark option of a place given wrong, naming the option at fault."""

    def __init__(self, option: str, message: str):
        self.option, self.message = option, message
        super().__init__(f"option '{option}': {message}")


@dataclasses.dataclass(frozen=True)
class ReadPlace:
    """Where a Spark query reads, as its place parsed the source's options: open_log's settings, the
    ReadSettings fields the place tunes, what default consumer groups are named after (the same query on the
    same place shares progress), and whether offsets are left uncommitted unless asked (a read-only store)."""
    log_settings: dict
    tuning: dict
    identity: str
    read_only: bool = False


@dataclasses.dataclass(frozen=True)
class SinkBasics:
    """The sink options every place reads the same way, parsed before the place reads its own."""
    topic: Optional[str]
    sink_id: Optional[str]
    checkpoint: Optional[str]
    stream: bool


class Place(abc.ABC):
    """One place messages live in. Subclasses set the attributes and implement reads, writes and open."""

    name: str                   # "store", "cluster": for people reading the code and the docs
    setting: str                # its address's name among open_log's settings and as a `rmq` argument ("store")
    address_option: str         # the Spark option that gives its address ("path")
    cli_flag: str               # the `rmq` flag that gives it ("--store")
    what: str                   # what its address is, in an error naming two places ("a store directory")
    read_options: tuple[str, ...] = ()    # Spark source options only this place takes, beside its address
    write_options: tuple[str, ...] = ()   # Spark sink options only this place takes, its address first
    write_refuses: tuple[str, ...] = ()   # sink options of other places it knows only to refuse them
    secret_options: tuple[str, ...] = ()  # never kept with the options as given
    writes_how: str = ""        # how the Spark sink writes there, in its unknown-option error (" through brokers")
    cli_refuses: Mapping[str, str] = {}   # a command's option (its attribute) -> the usage error when given
    option_of: Mapping[str, str] = {}     # its settings and WriteOptions fields -> the Spark option setting each

    def named_in(self, opts: Mapping[str, Any]) -> bool:
        """Whether the Spark options (canonical names) name this place."""
        return self.address_option in opts

    def foreign_read_option(self, name: str, chosen: "Place") -> str:
        """The error of one of its read_options given to a read of the place `chosen`."""
        return f"only for reads with {self.address_option}, not with {chosen.address_option}"

    @abc.abstractmethod
    def reads(self, opts: Mapping[str, str]) -> ReadPlace:
        """The source's options (canonical names) read for this place: its address and read_options."""

    @abc.abstractmethod
    def writes(self, opts: Mapping[str, str], basics: SinkBasics) -> WriteOptions:
        """The sink's options (canonical names) as the WriteOptions of a write to this place."""

    @abc.abstractmethod
    def open(self, settings: Mapping[str, Any]) -> MessageLog:
        """Its log, from open_log's settings (this place's address under `setting`, and what else it reads of
        them); nothing is opened until a request needs it."""

    def add_arguments(self, parser: Any, common: Any) -> None:
        """`rmq` arguments every command takes, before the command (parser) or after it (common, whose values
        then override)."""

    def add_command_arguments(self, parser: Any) -> None:
        """`rmq` arguments of a command that works on any place."""


def int_option(opts: Mapping[str, str], name: str, default: Any, minimum: int) -> Any:
    if name not in opts:
        return default
    text = opts[name]
    try:
        value = int(str(text).strip())
    except ValueError:
        raise OptionError(name, f"{text!r} is not an integer") from None
    if value < minimum:
        raise OptionError(name, f"{value} must be >= {minimum}")
    return value


def bool_option(opts: Mapping[str, str], name: str, default: bool) -> bool:
    if name not in opts:
        return default
    text = str(opts[name]).strip().lower()
    if text not in ("true", "false"):
        raise OptionError(name, f"{opts[name]!r} must be true or false")
    return text == "true"


def default_stream_sink_id(checkpoint: str) -> str:
    """A stream's sink id when none is given: the query id kept in its checkpoint (stable across restarts from
    it, new when the checkpoint is deleted), else a hash of the checkpoint path."""
    local = checkpoint[len("file:"):] if checkpoint.startswith("file:") else checkpoint
    local = re.sub(r"^/+", "/", local) if local.startswith("//") else local
    try:
        with open(os.path.join(local, "metadata"), encoding="utf-8") as f:
            query_id = json.loads(f.readline())["id"]
        return f"query-{query_id}"
    except (OSError, ValueError, KeyError, TypeError):
        digest = hashlib.sha1(os.path.abspath(local).encode("utf-8")).hexdigest()[:16]
        return f"checkpoint-{digest}"
