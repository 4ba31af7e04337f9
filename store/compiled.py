"""The compiled loops, each None where the install found no C compiler (the callers then use their numpy,
Arrow or zlib fallbacks, which give the same results more slowly): _native (store/_native.c: the scan's
decoder, properties kernels), _encode (store/_encode.c: the record encoder and writers) and _index
(store/_index.c: IndexFile writes)."""
from __future__ import annotations

import logging

log = logging.getLogger(__name__)

try:
    from . import _native  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - depends on the machine that installed us
    _native = None
    log.warning("store._native is not built; falling back to zlib/numpy loops")

try:
    from . import _encode  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - depends on the machine that installed us
    _encode = None
    log.warning("store._encode is not built; records are encoded with numpy/Arrow")

try:
    from . import _index  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - depends on the machine that installed us
    _index = None
    log.warning("store._index is not built; index entries are written in Python")
