"""Where a source test reads a store: its directory, or the same store served by `rmq serve` (one broker named
after the directory, with a name server), as the options that say so."""
from __future__ import annotations

import contextlib
import os
from typing import Iterator

from wire_cluster import WireCluster

PLACES = ["directory", "cluster"]


@contextlib.contextmanager
def read_place(place: str, store_dir) -> Iterator[dict]:
    """{"path": store_dir}, or {"namesrvAddr": ...} of a cluster whose one broker serves store_dir (stopped on
    leaving)."""
    if place == "directory":
        yield {"path": str(store_dir)}
        return
    root, name = os.path.split(os.path.abspath(store_dir))
    with WireCluster(root, brokers=(name,)) as cluster:
        yield {"namesrvAddr": cluster.namesrv}
