"""The blocking faces' event loop: one asyncio loop per process on a daemon thread, made again in a forked child
(Spark's Python workers are forked from a daemon that may have used one)."""
from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from typing import Any, Callable, Coroutine, Optional

from remoting import event_loop

_lock = threading.Lock()
_loop: Optional[asyncio.AbstractEventLoop] = None
_pid = 0


def loop() -> asyncio.AbstractEventLoop:
    global _loop, _pid
    with _lock:
        if _loop is None or _pid != os.getpid():
            _loop = event_loop.new_event_loop()
            _pid = os.getpid()
            threading.Thread(target=_loop.run_forever, name="rmq-client", daemon=True).start()
        return _loop


def run_blocking(fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any, timeout: Optional[float] = None) -> Any:
    """fn(*args) run on the client loop; its result or its exception here."""
    return asyncio.run_coroutine_threadsafe(fn(*args), loop()).result(timeout)


def run_in_background(fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> "concurrent.futures.Future[Any]":
    """fn(*args) started on the client loop; the future gives its result or its exception when asked."""
    return asyncio.run_coroutine_threadsafe(fn(*args), loop())
