"""Running code with rmq_common.native's pure-Python kernels in place of the compiled ones, in this process (the
module binds each kernel once at import; a test rebinds them all for a while)."""
from __future__ import annotations

import pytest

from rmq_common import native


def use_python_kernels(mp: pytest.MonkeyPatch) -> None:
    """Bind every kernel of rmq_common.native to its pure-Python form until mp is undone."""
    for name, fallback in native.FALLBACKS.items():
        mp.setattr(native, name, fallback)
