"""TopicConfigManager: config/topics.json in RocketMQ's shape; discovered from consumequeue/ when absent."""
from __future__ import annotations

import os
import re
import time
import warnings
from dataclasses import dataclass
from typing import Optional

from .errors import StoreError
from .json_file import parse_rocketmq_json, persist_config_json

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
    """The topic table. Loaded whole once (topics.json, then consumequeue/ for topics it misses); after that the
    table in memory is the truth, kept fresh for other processes' changes by two stats (topics.json and the
    consumequeue/ directory) rather than by re-reading and re-listing on every call. Creations are persisted at
    once, or within a window of the previous write when they come fast (a crash before that loses no topic with
    messages: its directories are found again). The window is PERSIST_WINDOW_S, or twenty times the last write
    when the table is so large that writing it takes longer: rewriting the whole table then costs at most 5% of
    the time spent creating, whatever the number of topics (up to PERSIST_WINDOW_MAX_S)."""

    PERSIST_WINDOW_S = 0.5
    PERSIST_WINDOW_MAX_S = 5.0

    def __init__(self, root: str, problems: Optional[list] = None):
        """problems: a list to record an unreadable topics.json in (the topics then come from consumequeue/
        alone) instead of raising TopicConfigError; `rmq check` reports them as findings."""
        self.root = root
        self.path = os.path.join(root, "config", "topics.json")
        self.queue_root = os.path.join(root, "consumequeue")
        self.table: dict[str, TopicConfig] = {}
        self.data_version = {"counter": 0, "timestamp": 0}
        self.problems = problems
        self._warned = ""
        self._file_stamp: Optional[tuple] = None   # topics.json as last read
        self._dir_stamp: Optional[tuple] = None    # consumequeue/ as last listed
        self._dirs: set[str] = set()                # its topic directories then
        self._unpersisted: set[str] = set()         # created here, not yet in topics.json
        self._last_persist = 0.0
        self._window = self.PERSIST_WINDOW_S
        self.changes = 0  # bumped whenever the table may have changed: callers keep what they derive from it
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
        """Read the whole table again: topics.json, and consumequeue/ for what it misses."""
        self._file_stamp = _stamp(self.path)
        data = self._read()
        table: dict[str, TopicConfig] = {}
        if data:
            self.data_version = data.get("dataVersion", self.data_version)
            for name, cfg in (data.get("topicConfigTable") or {}).items():
                table[name] = _topic_config(name, cfg)
        for name in self._unpersisted:
            if name in self.table:
                table[name] = self.table[name]
        # A broker store copied without config/ (or a topic the config misses): the directories say what exists.
        self._dir_stamp = _stamp(self.queue_root, settle=True)
        found = discover_consume_queues(self.root)
        self._dirs = set(found)
        for name, queue_ids in found.items():
            _merge_dirs(table, name, queue_ids)
        self.table = table
        self.changes += 1

    def refresh(self) -> None:
        """Take in what other processes changed since: a rewritten topics.json (one stat when it was not), and
        topic directories created since consumequeue/ was last listed (one stat when none was)."""
        self.refresh_file()
        self.refresh_dirs()

    def refresh_file(self) -> None:
        stamp = _stamp(self.path)
        if stamp != self._file_stamp:
            self._file_stamp = stamp
            data = self._read()
            if data:
                self.data_version = data.get("dataVersion", self.data_version)
                for name, cfg in (data.get("topicConfigTable") or {}).items():
                    if name not in self._unpersisted:
                        self.table[name] = _topic_config(name, cfg)
                self.changes += 1

    def refresh_dirs(self) -> None:
        stamp = _stamp(self.queue_root, settle=True)
        if stamp is None or stamp != self._dir_stamp:
            self._dir_stamp = stamp
            try:
                names = set(os.listdir(self.queue_root))
            except FileNotFoundError:
                names = set()
            for name in names - self._dirs:
                self.discover(name)
            self._dirs = names

    def find(self, name: str) -> Optional[TopicConfig]:
        """The topic's config, looking past the table only for a topic it does not have (one stat of topics.json,
        and of the topic's directory)."""
        cfg = self.table.get(name)
        if cfg is None:
            self.refresh_file()
            self.discover(name)
            cfg = self.table.get(name)
        return cfg

    def discover(self, name: str) -> bool:
        """Add a topic from its consumequeue/<topic>/<queueId> directories, if it has any; True if it exists."""
        if name in self.table:
            return True
        if not name or name in (".", "..") or "/" in name or "\x00" in name:
            return False
        tdir = os.path.join(self.queue_root, name)
        try:
            ids = [int(q) for q in os.listdir(tdir) if _QUEUE_DIR.fullmatch(q) and os.path.isdir(os.path.join(tdir, q))]
        except (FileNotFoundError, NotADirectoryError):
            return False
        if ids:
            _merge_dirs(self.table, name, ids)
            self.changes += 1
        return bool(ids)

    def add(self, cfg: TopicConfig) -> None:
        """A topic created here: in the table at once, in topics.json now or within PERSIST_WINDOW_S."""
        self.table[cfg.topicName] = cfg
        self.changes += 1
        self._unpersisted.add(cfg.topicName)
        if time.monotonic() - self._last_persist >= self._window:
            self.persist()

    def remove(self, name: str) -> None:
        """A topic deleted here: out of the table and out of topics.json now (other writers' changes kept)."""
        self.refresh_file()
        self.table.pop(name, None)
        self._unpersisted.discard(name)
        self._dirs.discard(name)
        self.persist()

    def flush(self, force: bool = True) -> None:
        """Persist creations still waiting: all of them (force), or only once their window has passed."""
        if self._unpersisted and (force or time.monotonic() - self._last_persist >= self._window):
            self.persist()

    def persist(self) -> None:
        started = time.monotonic()
        self.refresh_file()  # another writer's topics stay in the file
        self.changes += 1  # a caller may have changed a config in place (a queue count raised)
        self.data_version = {"counter": int(self.data_version.get("counter", 0)) + 1,
                             "timestamp": int(time.time() * 1000)}
        written = persist_config_json(self.path, {
            "dataVersion": self.data_version,
            "topicConfigTable": {name: cfg.to_json() for name, cfg in sorted(self.table.items())},
        }, indent=4 if len(self.table) <= 1000 else None)
        self._last_persist = time.monotonic()
        if not written:  # a full disk: the topics' queue directories say they exist until a later write
            return
        self._file_stamp = _stamp(self.path)
        self._unpersisted.clear()
        self._window = min(self.PERSIST_WINDOW_MAX_S, max(self.PERSIST_WINDOW_S, 20 * (self._last_persist - started)))


def _merge_dirs(table: dict, name: str, queue_ids) -> None:
    n = max(queue_ids) + 1
    if name not in table:
        table[name] = TopicConfig(topicName=name, readQueueNums=n, writeQueueNums=n)
    elif table[name].readQueueNums < n:
        table[name].readQueueNums = n


def _stamp(path: str, settle: bool = False) -> Optional[tuple]:
    """What changes when a file is replaced (topics.json is only ever renamed over, so a rewrite is a new inode)
    or a directory gains or loses an entry; None while missing. settle: None also while the mtime is within the
    filesystem's coarse timestamp tick (an entry added in the same tick would not move it)."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if settle and time.time_ns() - st.st_mtime_ns < 200_000_000:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


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
    """{topic: sorted queue ids} of consumequeue/<topic>/<queueId> directories. Listed with scandir, whose
    entries say whether they are directories without a stat each (tens of thousands of queues)."""
    base = os.path.join(root, "consumequeue")
    found: dict[str, list[int]] = {}
    try:
        topics = list(os.scandir(base))
    except FileNotFoundError:
        return found
    for topic in topics:
        try:
            if not topic.is_dir():
                continue
            ids = sorted(int(q.name) for q in os.scandir(topic.path) if _QUEUE_DIR.fullmatch(q.name) and q.is_dir())
        except (FileNotFoundError, NotADirectoryError):  # removed by another process meanwhile
            continue
        if ids:
            found[topic.name] = ids
    return found
