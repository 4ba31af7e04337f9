"""The errors of reading message records: the base of the store's errors, and a record that fails its checks
(raised by the record decoder for the store's scans and for the records a client pulls alike)."""


class StoreError(Exception):
    """Base class of the store's errors."""


class CorruptRecordError(StoreError):
    """A commitlog record or consume-queue unit failed validation; it is never returned as data."""

    def __init__(self, reason: str, path: str, offset: int):
        super().__init__(f"corrupt record in {path} at offset {offset}: {reason}")
        self.reason = reason
        self.path = path
        self.offset = offset
