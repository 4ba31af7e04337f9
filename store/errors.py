"""Exceptions raised by the store."""
import errno

# The record decoder's error, shared with the clients: defined below the store, the same classes here.
from rmq_common.errors import CorruptRecordError, StoreError


class MissingFileError(CorruptRecordError):
    """A commitlog file inside the retained range is gone (not retention, which deletes from the front): the
    messages it held are lost."""

    def __init__(self, reason: str, path: str, offset: int):
        StoreError.__init__(self, f"missing file {path}: {reason}")
        self.reason = reason
        self.path = path
        self.offset = offset


class InvalidMessageError(StoreError, ValueError):
    """A message (or a batch of them) was refused before anything was written."""


class UnknownTopicError(StoreError, KeyError):
    """A read named a topic or queue the store does not have."""

    def __str__(self):  # KeyError quotes its argument; this one is a sentence
        return str(self.args[0])


class ReadOnlyStoreError(StoreError):
    """A write was attempted on a store opened read-only."""


class StoreRecoveryError(StoreError):
    """Recovery would drop messages it cannot prove were never acknowledged (records that validate after
    damage, or records the checkpoint says were flushed); the store refuses to open instead."""

    def __init__(self, message: str, path: str, offset: int, messages: int):
        super().__init__(message)
        self.path = path
        self.offset = offset
        self.messages = messages


class ConfigFileError(StoreError):
    """A file under config/ and its .bak copy are both unreadable: names the file and what is wrong with it."""

    def __init__(self, path: str, problem: str):
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


class DiskFullError(StoreError, OSError):
    """ENOSPC while writing: names what was being written; the write was not acknowledged."""

    def __init__(self, path: str, what: str):
        OSError.__init__(self, errno.ENOSPC, f"no space left on the device writing {what} ({path})")
        self.path = path

    def __str__(self) -> str:
        return self.strerror or ""


class disk_full_named:
    """Turn ENOSPC inside the block into DiskFullError naming path and what. A class, not a generator: it wraps
    every append, where @contextmanager's generator costs several times more."""

    __slots__ = ("path", "what")

    def __init__(self, path: str, what: str):
        self.path = path
        self.what = what

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, e, tb) -> None:
        if kind is not None and issubclass(kind, OSError) and e.errno == errno.ENOSPC \
                and not isinstance(e, DiskFullError):
            raise DiskFullError(self.path, self.what) from e
