"""Store settings, named exactly as the keys of RocketMQ's broker.conf."""
from __future__ import annotations

import dataclasses
import difflib
import logging
import os
from collections.abc import Collection
from dataclasses import dataclass, fields

from .delay_levels import DEFAULT_DELAY_LEVELS, parse_delay_levels
from .rocketmq_config_keys import ROCKETMQ_CONFIG_KEYS

log = logging.getLogger("rmq.config")

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
    # delayed messages' levels: their consume-queue units keep the time they are due (store/delay_levels.py)
    messageDelayLevel: str = DEFAULT_DELAY_LEVELS
    # RocketMQ's IndexFile (index/): slots and entries per file, and whether messages are indexed at all
    messageIndexEnable: bool = True
    maxHashSlotNum: int = 5_000_000
    maxIndexNum: int = 5_000_000 * 4
    maxMsgsNumBatch: int = 64       # the most offsets one index query returns
    defaultQueryMaxNum: int = 32    # a unique-key query's maxNum (QueryMessageProcessor)

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
        parse_delay_levels(self.messageDelayLevel)  # its ValueError names messageDelayLevel
        if self.maxHashSlotNum < 1 or self.maxIndexNum < 2 or \
                40 + 4 * self.maxHashSlotNum + 20 * self.maxIndexNum >= 2**31:
            raise ValueError(f"maxHashSlotNum ({self.maxHashSlotNum}) must be >= 1 and maxIndexNum "
                             f"({self.maxIndexNum}) >= 2, with an index file (40 + 4 * slots + 20 * entries "
                             f"bytes) under 2 GiB")
        if self.maxMsgsNumBatch < 1 or self.defaultQueryMaxNum < 1:
            raise ValueError(f"maxMsgsNumBatch ({self.maxMsgsNumBatch}) and defaultQueryMaxNum "
                             f"({self.defaultQueryMaxNum}) must be >= 1")
        if not 10 <= self.diskMaxUsedSpaceRatio <= 95:
            raise ValueError(f"diskMaxUsedSpaceRatio must be 10..95, got {self.diskMaxUsedSpaceRatio}")

    @classmethod
    def from_file(cls, path: str | os.PathLike, other_keys: Collection[str] = ()) -> "StoreConfig":
        """Load a broker.conf-style file (key=value, # comments). A real broker's file loads: keys RocketMQ defines
        that nothing here uses are logged once as ignored; `other_keys` are read by the caller (the broker's own);
        a key nobody defines is refused by name with the nearest known key."""
        return cls.from_dict(read_conf_file(path), source=str(path), other_keys=other_keys)

    @classmethod
    def from_dict(cls, values: dict, source: str = "config", other_keys: Collection[str] = ()) -> "StoreConfig":
        known = {f.name: f for f in fields(cls)}
        kwargs = {}
        ignored = []
        for key, value in values.items():
            if key in known:
                kwargs[key] = _convert(key, value, str(known[key].type))
            elif key in other_keys:
                continue
            elif _rocketmq_class(key):
                ignored.append(f"{key} ({_rocketmq_class(key)})")
            else:
                raise ValueError(f"{source}: unknown config key {key!r}{did_you_mean(key, [*known, *other_keys])}")
        if ignored:
            log.info("%s: RocketMQ keys not used here, ignored: %s", source, ", ".join(ignored))
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


def read_conf_file(path: str | os.PathLike) -> dict[str, str]:
    """key=value lines as java.util.Properties reads broker.conf ('=' or ':' between, # and ! comments)."""
    values: dict[str, str] = {}
    with open(path, encoding="utf-8") as f:
        for lineno, raw in enumerate(f, 1):
            line = raw.strip()
            if not line or line[0] in "#!":
                continue
            cut = min((i for i in (line.find("="), line.find(":")) if i > 0), default=-1)
            if cut < 0:
                raise ValueError(f"{path}:{lineno}: expected key=value, got {line!r}")
            values[line[:cut].strip()] = line[cut + 1:].strip()
    return values


def _rocketmq_class(key: str) -> str:
    return "/".join(name for name, keys in ROCKETMQ_CONFIG_KEYS.items() if key in keys)


def did_you_mean(key: str, candidates: Collection[str]) -> str:
    """'; did you mean X?' with the nearest known key (RocketMQ's too), or a list of ours when none is near."""
    pool = set(candidates).union(*ROCKETMQ_CONFIG_KEYS.values())
    near = difflib.get_close_matches(key, pool, n=1, cutoff=0.75) or \
        [k for k in pool if k.lower() == key.lower()]
    if near:
        return f"; did you mean {near[0]!r}?"
    return f"; keys used here: {', '.join(sorted(candidates))}"
