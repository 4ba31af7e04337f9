"""Reading and writing the JSON files of config/ the way RocketMQ's ConfigManager does."""
from __future__ import annotations

import json
import logging
import os
import re
import tempfile
from typing import Optional

from .errors import ConfigFileError, DiskFullError, disk_full_named

log = logging.getLogger(__name__)

# fastjson writes integer map keys unquoted ({0:17}); plain JSON needs them quoted.
_UNQUOTED_INT_KEY = re.compile(r'([{,]\s*)(-?\d+)(\s*:)')


def parse_rocketmq_json(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return json.loads(_UNQUOTED_INT_KEY.sub(r'\1"\2"\3', text))


MISSING = "is missing or empty"


def read_json_object(path: str) -> tuple[Optional[dict], str]:
    """(the file's JSON object, "") or (None, what is wrong with it): MISSING for a missing or empty file."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return None, MISSING
    except UnicodeDecodeError as e:
        return None, f"is not UTF-8 text ({e.reason} at byte {e.start})"
    except OSError as e:
        return None, f"cannot be read ({e.strerror})"
    if not text.strip():
        return None, MISSING
    try:
        data = parse_rocketmq_json(text)
    except json.JSONDecodeError as e:
        return None, f"is not valid JSON ({e.msg} at line {e.lineno} column {e.colno})"
    if not isinstance(data, dict):
        return None, f"holds a JSON {type(data).__name__}, not an object"
    return data, ""


def unreadable(path: str, problem: str, bak_problem: str) -> ConfigFileError:
    """The error for a config/ file that cannot be used, nor its .bak copy (what is wrong with each)."""
    bak_path = path + ".bak"
    if problem == MISSING:
        return ConfigFileError(bak_path, f"{bak_problem} (and {os.path.basename(path)} is missing)")
    return ConfigFileError(path, problem + (", and it has no .bak copy" if bak_problem == MISSING else
                                            f", and its backup {bak_path} {bak_problem}"))


def load_rocketmq_json(path: str) -> Optional[dict]:
    """A config/ file as RocketMQ's ConfigManager.load reads it: the file, else its .bak copy (the version
    before the last write), said in the log; None when neither exists (nothing was written yet). A corrupt file
    whose .bak loads is moved aside to <name>.corrupt, so the next write does not make it the .bak.
    ConfigFileError, naming the file and what is wrong, when neither can be read."""
    data, problem = read_json_object(path)
    if data is not None:
        return data
    bak_path = path + ".bak"
    bak, bak_problem = read_json_object(bak_path)
    if bak is not None:
        aside = ""
        if problem != MISSING:
            os.replace(path, path + ".corrupt")
            aside = f" ({os.path.basename(path)} kept as {os.path.basename(path)}.corrupt)"
        log.warning("%s %s; loaded its backup %s instead%s", path, problem, bak_path, aside)
        return bak
    if problem == MISSING and bak_problem == MISSING:
        return None
    raise unreadable(path, problem, bak_problem)


def atomic_write_json(path: str, data, keep_backup: bool = True, indent: Optional[int] = 4) -> None:
    """Write a temporary file, fsync, keep the previous version as .bak, rename over the original."""
    with disk_full_named(path, os.path.basename(path)):
        _atomic_write_json(path, data, keep_backup, indent)


def persist_config_json(path: str, data, indent: Optional[int] = 4) -> bool:
    """RocketMQ's ConfigManager.persist: write a config/ file (atomic_write_json); on a full disk say so in the
    log and go on with the table in memory (the caller writes it again with its next change), so that a broker
    on a full disk still serves reads and new consumer groups. False when it was not written."""
    try:
        atomic_write_json(path, data, indent=indent)
    except DiskFullError as e:
        log.warning("%s; kept in memory, written with the next change once there is room", e)
        return False
    return True


def _atomic_write_json(path: str, data, keep_backup: bool, indent: Optional[int]) -> None:
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps(data, indent=indent))  # without indent, the C encoder: large tables stay fast
            f.flush()
            os.fsync(f.fileno())
        if keep_backup and os.path.exists(path) and os.path.getsize(path) > 0:
            bak = path + ".bak"
            try:
                os.remove(bak)
            except FileNotFoundError:
                pass
            os.link(path, bak)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except FileNotFoundError:
            pass
        raise
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
