"""TopicConfigManager: config/topics.json in RocketMQ's shape; discovered from consumequeue/ when absent."""
from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass

from .json_file import atomic_write_json, load_rocketmq_json

PERM_READ_WRITE = 6


@dataclass
class TopicConfig:
    topicName: str
    readQueueNums: int
    writeQueueNums: int
    perm: int = PERM_READ_WRITE
    topicFilterType: str = "SINGLE_TAG"
    topicSysFlag: int = 0
    order: bool = False

    def to_json(self) -> dict:
        return dict(self.__dict__)


class TopicConfigManager:
    def __init__(self, root: str):
        self.root = root
        self.path = os.path.join(root, "config", "topics.json")
        self.table: dict[str, TopicConfig] = {}
        self.data_version = {"counter": 0, "timestamp": 0}
        self.load()

    def load(self) -> None:
        data = load_rocketmq_json(self.path)
        table: dict[str, TopicConfig] = {}
        if data:
            self.data_version = data.get("dataVersion", self.data_version)
            for name, cfg in (data.get("topicConfigTable") or {}).items():
                table[name] = TopicConfig(
                    topicName=name, readQueueNums=int(cfg.get("readQueueNums", 0)),
                    writeQueueNums=int(cfg.get("writeQueueNums", 0)), perm=int(cfg.get("perm", PERM_READ_WRITE)),
                    topicFilterType=cfg.get("topicFilterType", "SINGLE_TAG"),
                    topicSysFlag=int(cfg.get("topicSysFlag", 0)), order=bool(cfg.get("order", False)))
        # A broker store copied without config/ (or a topic the config misses): the directories say what exists.
        for name, queue_ids in discover_consume_queues(self.root).items():
            n = max(queue_ids) + 1
            if name not in table:
                table[name] = TopicConfig(topicName=name, readQueueNums=n, writeQueueNums=n)
            elif table[name].readQueueNums < n:
                table[name].readQueueNums = n
        self.table = table

    def persist(self) -> None:
        self.data_version = {"counter": int(self.data_version.get("counter", 0)) + 1,
                             "timestamp": int(time.time() * 1000)}
        atomic_write_json(self.path, {
            "dataVersion": self.data_version,
            "topicConfigTable": {name: cfg.to_json() for name, cfg in sorted(self.table.items())},
        })


_QUEUE_DIR = re.compile(r"\d+")


def discover_consume_queues(root: str) -> dict[str, list[int]]:
    base = os.path.join(root, "consumequeue")
    found: dict[str, list[int]] = {}
    try:
        topics = os.listdir(base)
    except FileNotFoundError:
        return found
    for topic in topics:
        tdir = os.path.join(base, topic)
        if not os.path.isdir(tdir):
            continue
        ids = sorted(int(q) for q in os.listdir(tdir) if _QUEUE_DIR.fullmatch(q) and os.path.isdir(os.path.join(tdir, q)))
        if ids:
            found[topic] = ids
    return found
