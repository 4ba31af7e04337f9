"""Where a source test reads a store: its directory, or the same store served by `rmq serve` as broker-a (its
name server in the same process), as the options that say so."""
from __future__ import annotations

import contextlib
from typing import Callable, Iterator

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


@contextlib.contextmanager
def places_of(store_dir) -> Iterator[Callable[[str], dict]]:
    """read_place's options for each place asked, a place made ready at its first ask and all stopped on leaving:
    a module's tests over both places share one broker."""
    with contextlib.ExitStack() as stack:
        ready: dict[str, dict] = {}

        def where(place: str) -> dict:
            if place not in ready:
                ready[place] = stack.enter_context(read_place(place, store_dir))
            return ready[place]

        yield where
