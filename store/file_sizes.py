"""The store's file sizes (mappedFileSizeCommitLog, mappedFileSizeConsumeQueue): written into the store's marker
when the store is created, so every later open, whatever config it is given, maps offsets to the files the store
was written with. A store without that record (a RocketMQ broker's copy, an older store) has them inferred from
its file names, which damage to a file's contents or length does not change: consecutive files are named a file
size apart. A file's own length is trusted last, and only the longest seen (damage shortens files, never lengthens
them)."""
from __future__ import annotations

import json
import logging
import os
from typing import Optional

log = logging.getLogger(__name__)

STORE_MARKER = ".rmq-spark"  # present in stores this project created; absent in a broker's
SIZE_KEYS = ("mappedFileSizeCommitLog", "mappedFileSizeConsumeQueue")
INDEX_KEYS = ("maxHashSlotNum", "maxIndexNum")  # the index files' geometry, kept like the file sizes
_UNIT = 20


def _names(directory: str) -> list[int]:
    try:
        return sorted(int(n) for n in os.listdir(directory) if n.isdigit() and len(n) == 20)
    except (FileNotFoundError, NotADirectoryError):
        return []


def recorded_sizes(path: str) -> dict[str, int]:
    """The sizes recorded in the marker ({} when there is none, or the marker is empty or unreadable)."""
    try:
        with open(os.path.join(path, STORE_MARKER), encoding="utf-8") as f:
            text = f.read()
    except (FileNotFoundError, NotADirectoryError):
        return {}
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError:
        log.warning("store %s: %s is not JSON; the file sizes are inferred from the files", path, STORE_MARKER)
        return {}
    out = {}
    for key in SIZE_KEYS:
        value = data.get(key) if isinstance(data, dict) else None
        if isinstance(value, int) and value > 0 and (key != SIZE_KEYS[1] or value % _UNIT == 0):
            out[key] = value
    for key in INDEX_KEYS:
        value = data.get(key) if isinstance(data, dict) else None
        if isinstance(value, int) and value > 0:
            out[key] = value
    return out


def record_sizes(path: str, config) -> None:
    """Write the config's file sizes into the marker (a new store, or one nothing was written to yet)."""
    data = {key: getattr(config, key) for key in SIZE_KEYS + INDEX_KEYS}
    if recorded_sizes(path) == data:
        return
    tmp = os.path.join(path, STORE_MARKER + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(json.dumps(data) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, os.path.join(path, STORE_MARKER))


def _spacing(names: list[int]) -> Optional[int]:
    """The smallest distance between consecutive file names (a missing file doubles one distance only)."""
    steps = [b - a for a, b in zip(names, names[1:]) if b > a]
    return min(steps) if steps else None


def _longest(directory: str, names: list[int], unit: int) -> Optional[int]:
    best = 0
    for n in names:
        try:
            size = os.path.getsize(os.path.join(directory, f"{n:020d}"))
        except FileNotFoundError:
            continue
        if size % unit == 0:
            best = max(best, size)
    return best or None


def inferred_sizes(path: str) -> dict[str, int]:
    """The sizes the files show: from the spacing of their names, else the longest file (see the module)."""
    out: dict[str, int] = {}
    cl_dir = os.path.join(path, "commitlog")
    names = _names(cl_dir)
    size = _spacing(names) or _longest(cl_dir, names, 1)
    if size:
        out[SIZE_KEYS[0]] = size
    spacings: list[int] = []
    longest = 0
    cq_root = os.path.join(path, "consumequeue")
    for topic in sorted(os.listdir(cq_root)) if os.path.isdir(cq_root) else []:
        tdir = os.path.join(cq_root, topic)
        for q in sorted(os.listdir(tdir)) if os.path.isdir(tdir) else []:
            qdir = os.path.join(tdir, q)
            names = _names(qdir)
            step = _spacing(names)
            if step and step % _UNIT == 0:
                spacings.append(step)
                if len(spacings) >= 8:  # enough to outvote a queue missing a middle file
                    break
            elif names and not spacings:
                longest = max(longest, _longest(qdir, names, _UNIT) or 0)
    if spacings or longest:
        out[SIZE_KEYS[1]] = min(spacings) if spacings else longest
    return out


def adopt_sizes(path: str, config, read_only: bool) -> tuple:
    """(the config to open the store at path with, whether the consume-queue file size is the store's own): an
    existing store keeps the file sizes it was written with, whatever the config says (those recorded in its
    marker, else those its file names show; never a damaged file's length); a store nothing was written to yet
    records the config's."""
    commit_log = os.path.join(path, "commitlog")
    has_log = bool(os.path.isdir(commit_log) and any(n.isdigit() for n in os.listdir(commit_log)))
    if not has_log and not read_only:
        record_sizes(path, config)
        return config, True
    known = recorded_sizes(path)
    sizes_known = SIZE_KEYS[1] in known
    if not sizes_known:
        found = inferred_sizes(path)
        known = {**found, **known}
        sizes_known = SIZE_KEYS[1] in found
    changes = {k: v for k, v in known.items() if v != getattr(config, k)}
    if changes:
        log.info("store %s keeps its existing file sizes %s", path, changes)
        config = config.replace(**changes)
    return config, sizes_known
