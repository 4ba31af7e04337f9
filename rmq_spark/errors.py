"""The Spark edge's errors: every one names what the user can fix (an option, a row, the data that was lost)."""
from __future__ import annotations

import contextlib
from typing import Iterator

from rmq_log.errors import RowError
from rmq_log.place import OptionError

__all__ = ["DataLossError", "RmqOptionError", "RmqSchemaError", "RowError", "options_of_places"]


class RmqOptionError(ValueError):
    """Bad input for the rmq source or sink, naming the option at fault."""

    def __init__(self, option: str, message: str):
        self.option = option
        super().__init__(f"option '{option}': {message}")


@contextlib.contextmanager
def options_of_places() -> Iterator[None]:
    """The errors of the options a place reads (rmq_log's OptionError) as RmqOptionError."""
    try:
        yield
    except OptionError as e:
        raise RmqOptionError(e.option, e.message) from None


class RmqSchemaError(ValueError):
    """A schema given to the rmq source (.schema(...)) that it cannot give, naming the field at fault and listing
    the columns it has."""

    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(f"schema field '{field}': {message}")


class DataLossError(RuntimeError):
    """Messages a query was to read are gone (retention, a missing file, offsets past a queue's end); raised
    when failOnDataLoss is true, as Kafka's source does."""
