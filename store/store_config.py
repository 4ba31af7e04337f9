"""Store settings, named exactly as the keys of RocketMQ's broker.conf."""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, fields

ASYNC_FLUSH = "ASYNC_FLUSH"
SYNC_FLUSH = "SYNC_FLUSH"


@dataclass
class StoreConfig:
    # Field names are broker.conf keys on purpose: a RocketMQ operator's file loads unchanged.
    mappedFileSizeCommitLog: int = 1024 * 1024 * 1024
    mappedFileSizeConsumeQueue: int = 300_000 * 20
    maxMessageSize: int = 4 * 1024 * 1024
    flushDiskType: str = ASYNC_FLUSH
    defaultTopicQueueNums: int = 8
    fileReservedTime: int = 72
    deleteWhen: str = "04"
    diskMaxUsedSpaceRatio: int = 75
    maxTransferBytesOnMessageInMemory: int = 256 * 1024
    maxTransferCountOnMessageInMemory: int = 32
    maxTransferBytesOnMessageInDisk: int = 64 * 1024
    maxTransferCountOnMessageInDisk: int = 8
    accessMessageInMemoryMaxRatio: int = 40
    checkCRCOnRecover: bool = True
    brokerIP1: str = ""
    listenPort: int = 10911

    def __post_init__(self):
        self.validate()

    def validate(self) -> None:
        if self.mappedFileSizeCommitLog < 256 or self.mappedFileSizeCommitLog >= 2**31:
            raise ValueError(
                f"mappedFileSizeCommitLog must be between 256 and 2^31-1 bytes, got {self.mappedFileSizeCommitLog}")
        if self.mappedFileSizeConsumeQueue < 20 or self.mappedFileSizeConsumeQueue % 20:
            raise ValueError(
                f"mappedFileSizeConsumeQueue must be a positive multiple of 20 (the unit size), "
                f"got {self.mappedFileSizeConsumeQueue}")
        if self.flushDiskType not in (ASYNC_FLUSH, SYNC_FLUSH):
            raise ValueError(f"flushDiskType must be ASYNC_FLUSH or SYNC_FLUSH, got {self.flushDiskType!r}")
        if not 1 <= self.defaultTopicQueueNums <= 1024:
            raise ValueError(f"defaultTopicQueueNums must be 1..1024, got {self.defaultTopicQueueNums}")
        if self.maxMessageSize <= 0:
            raise ValueError(f"maxMessageSize must be positive, got {self.maxMessageSize}")
        if not 10 <= self.diskMaxUsedSpaceRatio <= 95:
            raise ValueError(f"diskMaxUsedSpaceRatio must be 10..95, got {self.diskMaxUsedSpaceRatio}")

    @classmethod
    def from_file(cls, path: str | os.PathLike) -> "StoreConfig":
        """Load a broker.conf-style file (key=value, # comments); unknown keys are refused by name."""
        values: dict[str, str] = {}
        with open(path, encoding="utf-8") as f:
            for lineno, raw in enumerate(f, 1):
                line = raw.strip()
                if not line or line.startswith("#"):
                    continue
                if "=" not in line:
                    raise ValueError(f"{path}:{lineno}: expected key=value, got {line!r}")
                key, value = (part.strip() for part in line.split("=", 1))
                values[key] = value
        return cls.from_dict(values, source=str(path))

    @classmethod
    def from_dict(cls, values: dict, source: str = "config") -> "StoreConfig":
        known = {f.name: f for f in fields(cls)}
        kwargs = {}
        for key, value in values.items():
            if key not in known:
                raise ValueError(f"{source}: unknown store config key {key!r}; known keys: {', '.join(sorted(known))}")
            kwargs[key] = _convert(key, value, str(known[key].type))
        return cls(**kwargs)

    def replace(self, **changes) -> "StoreConfig":
        return dataclasses.replace(self, **changes)


def _convert(key: str, value, type_name: str):
    if not isinstance(value, str):
        return value
    try:
        if type_name == "int":
            return int(value.replace("_", ""))
        if type_name == "bool":
            if value.lower() not in ("true", "false"):
                raise ValueError
            return value.lower() == "true"
    except ValueError:
        raise ValueError(f"store config key {key!r}: expected {type_name}, got {value!r}") from None
    return value
