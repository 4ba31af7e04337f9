"""A blocking RemotingClient for code without an event loop (Spark tasks, scripts, notebooks): the asyncio
client runs on its own loop in a daemon thread, and each call waits for its answer there."""
from __future__ import annotations

import asyncio
import threading
from typing import Any, Coroutine, Optional

from . import event_loop
from .remoting_client import RemotingClient
from .remoting_command import DEFAULT_MAX_FRAME, RemotingCommand


class BlockingRemotingClient:
    def __init__(self, address: str, max_frame: int = DEFAULT_MAX_FRAME, connect_timeout: float = 5.0):
        self.address = address
        self._loop = event_loop.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"remoting-{address}", daemon=True)
        self._thread.start()
        self._client: Optional[RemotingClient] = RemotingClient(address, max_frame)
        try:
            self._call(asyncio.wait_for(self._client.connect(), connect_timeout), connect_timeout + 1)
        except BaseException:
            self._client = None
            self._stop_loop()
            raise

    def _call(self, coro: Coroutine[Any, Any, Any], timeout: Optional[float]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def invoke(self, cmd: RemotingCommand, timeout: float = 5.0) -> RemotingCommand:
        """Send a request and wait for its response; RemotingTimeoutError when none comes within `timeout`."""
        if self._client is None:
            raise ConnectionError(f"the client of {self.address} is closed")
        # the client's own timeout answers first; the margin only guards against a stuck loop
        return self._call(self._client.invoke(cmd, timeout), timeout + 5)

    def invoke_oneway(self, cmd: RemotingCommand, timeout: float = 5.0) -> None:
        if self._client is None:
            raise ConnectionError(f"the client of {self.address} is closed")
        self._call(self._client.invoke_oneway(cmd), timeout)

    def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            try:
                self._call(client.close(), 5)
            finally:
                self._stop_loop()

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    def __enter__(self) -> "BlockingRemotingClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
