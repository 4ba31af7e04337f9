"""Reading and writing the JSON files of config/ the way RocketMQ's ConfigManager does."""
from __future__ import annotations

import json
import os
import re
import tempfile
from typing import Optional

from .errors import disk_full_named

# fastjson writes integer map keys unquoted ({0:17}); plain JSON needs them quoted.
_UNQUOTED_INT_KEY = re.compile(r'([{,]\s*)(-?\d+)(\s*:)')


def parse_rocketmq_json(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return json.loads(_UNQUOTED_INT_KEY.sub(r'\1"\2"\3', text))


def load_rocketmq_json(path: str) -> Optional[dict]:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return None
    if not text.strip():
        return None
    return parse_rocketmq_json(text)


def atomic_write_json(path: str, data, keep_backup: bool = True, indent: Optional[int] = 4) -> None:
    """Write a temporary file, fsync, keep the previous version as .bak, rename over the original."""
    with disk_full_named(path, os.path.basename(path)):
        _atomic_write_json(path, data, keep_backup, indent)


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
