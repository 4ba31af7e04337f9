"""Exceptions raised by the store."""


class StoreError(Exception):
    """Base class of the store's errors."""


class CorruptRecordError(StoreError):
    """A commitlog record or consume-queue unit failed validation; it is never returned as data."""

    def __init__(self, reason: str, path: str, offset: int):
        super().__init__(f"corrupt record in {path} at offset {offset}: {reason}")
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
