"""TopicConfigManager: config/topics.json in RocketMQ's shape; discovered from consumequeue/ when absent."""
from __future__ import annotations

import os
import re
import time
import warnings
from dataclasses import dataclass
from typing import Optional

from .errors import StoreError
from .json_file import atomic_write_json, parse_rocketmq_json

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


class TopicConfigWarning(UserWarning):
    """config/topics.json was unreadable and its .bak was used."""


class TopicConfigError(StoreError):
    """config/topics.json and its .bak are both unreadable: names the file and what is wrong with it."""


class TopicConfigManager:
    def __init__(self, root: str, problems: Optional[list] = None):
        """problems: a list to record an unreadable topics.json in (the topics then come from consumequeue/
        alone) instead of raising TopicConfigError; `rmq check` reports them as findings."""
        self.root = root
        self.path = os.path.join(root, "config", "topics.json")
        self.table: dict[str, TopicConfig] = {}
        self.data_version = {"counter": 0, "timestamp": 0}
        self.problems = problems
        self._warned = ""
        self.load()

    def _read(self) -> dict:
        """The parsed table: topics.json, else its .bak with a TopicConfigWarning, else {} for a store that has
        neither yet; TopicConfigError when what is there cannot be read."""
        main, main_problem = _parse_topics_file(self.path)
        if main is not None:
            return main
        bak_path = self.path + ".bak"
        bak, bak_problem = _parse_topics_file(bak_path)
        if bak is not None:
            text = f"{self.path} {main_problem}; loaded topics from {bak_path}"
            if text != self._warned:  # once, not at every reload
                warnings.warn(text, TopicConfigWarning, stacklevel=4)
                self._warned = text
            return bak
        if main_problem == _MISSING and bak_problem == _MISSING:
            return {}
        text = (f"{self.path} {main_problem}, and {bak_path} {bak_problem}. The topics and their queue counts "
                f"can be rediscovered from consumequeue/: move {os.path.basename(self.path)} (and its .bak) out "
                f"of {os.path.dirname(self.path)} and open the store again (per-topic settings such as perm or "
                f"order are then lost).")
        if self.problems is None:
            raise TopicConfigError(text)
        if text not in self.problems:
            self.problems.append(text)
        return {}

    def load(self) -> None:
        data = self._read()
        table: dict[str, TopicConfig] = {}
        if data:
            self.data_version = data.get("dataVersion", self.data_version)
            for name, cfg in (data.get("topicConfigTable") or {}).items():
                table[name] = _topic_config(name, cfg)
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


_MISSING = "is missing or empty"


def _topic_config(name: str, cfg: dict) -> TopicConfig:
    return TopicConfig(
        topicName=name, readQueueNums=int(cfg.get("readQueueNums", 0)),
        writeQueueNums=int(cfg.get("writeQueueNums", 0)), perm=int(cfg.get("perm", PERM_READ_WRITE)),
        topicFilterType=str(cfg.get("topicFilterType", "SINGLE_TAG")),
        topicSysFlag=int(cfg.get("topicSysFlag", 0)), order=bool(cfg.get("order", False)))


def _parse_topics_file(path: str) -> tuple[Optional[dict], str]:
    """(the parsed file, "") when it is a usable topics.json; (None, what is wrong) otherwise."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return None, _MISSING
    except (OSError, UnicodeDecodeError) as e:
        return None, f"cannot be read ({e})"
    if not text.strip():
        return None, _MISSING
    try:
        data = parse_rocketmq_json(text)
    except ValueError as e:
        return None, f"is not JSON ({e})"
    if not isinstance(data, dict):
        return None, f"holds a JSON {type(data).__name__}, not an object"
    table = data.get("topicConfigTable") or {}
    if not isinstance(table, dict):
        return None, f"has a topicConfigTable that is a JSON {type(table).__name__}, not an object"
    for name, cfg in table.items():
        if not isinstance(cfg, dict):
            return None, f"has topic {name!r} as a JSON {type(cfg).__name__}, not an object"
        try:
            t = _topic_config(name, cfg)
        except (TypeError, ValueError) as e:
            return None, f"has topic {name!r} with a bad field ({e})"
        if not 0 <= t.readQueueNums <= 65535 or not 0 <= t.writeQueueNums <= 65535:
            return None, f"has topic {name!r} with queue counts {t.readQueueNums}/{t.writeQueueNums}"
    return data, ""


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
        ids = sorted(int(q) for q in os.listdir(tdir)
                     if _QUEUE_DIR.fullmatch(q) and os.path.isdir(os.path.join(tdir, q)))
        if ids:
            found[topic] = ids
    return found
