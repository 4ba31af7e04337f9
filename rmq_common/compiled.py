"""The compiled loops of the record codec, each None where the install found no C compiler (the callers then use
their numpy, Arrow or zlib fallbacks, which give the same results more slowly): _native (rmq_common/_native.c: the
record decoder, properties kernels, CRC32) and _encode (rmq_common/_encode.c: the record encoder and writers)."""
from __future__ import annotations

import logging

log = logging.getLogger(__name__)

try:
    from . import _native  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - depends on the machine that installed us
    _native = None
    log.warning("rmq_common._native is not built; falling back to zlib/numpy loops")

try:
    from . import _encode  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - depends on the machine that installed us
    _encode = None
    log.warning("rmq_common._encode is not built; records are encoded with numpy/Arrow")
