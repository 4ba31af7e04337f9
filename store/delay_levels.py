"""Delayed messages in the store: RocketMQ's messageDelayLevel and the deliver time a SCHEDULE_TOPIC_XXXX unit keeps.

A delayed message waits in SCHEDULE_TOPIC_XXXX, queue = its delay level - 1. RocketMQ's consume-queue unit of such
a record holds, in place of the tag hash, the time it is due (store timestamp + the level's delay): a stock
broker's ScheduleMessageService delivers a unit once that time has passed, so a tag hash there (a small number)
would have it deliver every waiting message at once.
"""
from __future__ import annotations

import numpy as np

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
_UNITS_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_delay_levels(text: str) -> list[int]:
    """messageDelayLevel ("1s 5s ... 2h") -> the delay of each level in ms (level 1 first)."""
    levels = []
    for word in text.split():
        unit = word[-1]
        if unit not in _UNITS_MS or not word[:-1].isdigit():
            raise ValueError(f"messageDelayLevel: {word!r} is not a number followed by s, m, h or d")
        levels.append(int(word[:-1]) * _UNITS_MS[unit])
    if not levels:
        raise ValueError("messageDelayLevel: no level given")
    return levels


def deliver_times(queue_ids, store_timestamps, delays_ms: list[int]) -> np.ndarray:
    """The tagsCode of SCHEDULE_TOPIC_XXXX units: when each record is due. The level is the queue id + 1 (RocketMQ
    puts level L in queue L - 1; levels past the last are the last, as RocketMQ clamps them)."""
    levels = np.clip(np.asarray(queue_ids, dtype=np.int64) + 1, 1, len(delays_ms))
    return np.asarray(store_timestamps, dtype=np.int64) + np.asarray(delays_ms, dtype=np.int64)[levels - 1]
