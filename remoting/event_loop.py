"""The event loop servers and clients run on: uvloop when it is installed (the broker answers single sends faster on
it: docs/benchmarks.md, "Other measurements"), asyncio's own otherwise or when the environment asks for it with
RMQ_EVENT_LOOP=asyncio (the working fallback, and the reference the benchmarks compare with)."""
from __future__ import annotations

import asyncio
import os
from typing import Any, Callable, Coroutine

ENV = "RMQ_EVENT_LOOP"


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    """uvloop's new_event_loop, or asyncio's when uvloop is missing or RMQ_EVENT_LOOP=asyncio."""
    if os.environ.get(ENV, "").lower() != "asyncio":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return uvloop.new_event_loop
    return asyncio.new_event_loop


def new_event_loop() -> asyncio.AbstractEventLoop:
    return loop_factory()()


def name() -> str:
    """The loop this process's new loops are: "uvloop" or "asyncio"."""
    return "asyncio" if loop_factory() is asyncio.new_event_loop else "uvloop"


def run(main: Coroutine[Any, Any, Any]) -> Any:
    """asyncio.run on the chosen loop."""
    if loop_factory() is asyncio.new_event_loop:
        return asyncio.run(main)
    import uvloop
    return uvloop.run(main)
