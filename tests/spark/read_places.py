"""Where a source test reads a store: its directory, or the same store served by `rmq serve` as broker-a (its
name server in the same process), as the options that say so."""
from __future__ import annotations

import contextlib
from typing import Iterator

from wire_cluster import serve_store

PLACES = ["directory", "cluster"]


@contextlib.contextmanager
def read_place(place: str, store_dir) -> Iterator[dict]:
    """{"path": store_dir}, or {"namesrvAddr": ...} of the broker serving store_dir (stopped on leaving)."""
    if place == "directory":
        yield {"path": str(store_dir)}
        return
    with serve_store(store_dir) as served:
        yield {"namesrvAddr": served["namesrv"]}
