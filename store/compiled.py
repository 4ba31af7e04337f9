"""The store's own compiled loop, None where the install found no C compiler (the caller then writes in Python,
with the same results more slowly): _index (store/_index.c: IndexFile writes). The record codec's loops are in
rmq_common/compiled.py."""
from __future__ import annotations

import logging

log = logging.getLogger(__name__)

try:
    from . import _index  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - depends on the machine that installed us
    _index = None
    log.warning("store._index is not built; index entries are written in Python")
