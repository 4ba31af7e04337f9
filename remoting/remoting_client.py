"""An asyncio client of RemotingCommands: sends a request and awaits the response with the same opaque. Frames are
received by a FrameReceiver (a large body read straight into the buffer the response then holds) and written
through a FrameWriter."""
from __future__ import annotations

import asyncio
import collections
import logging
from typing import Awaitable, Callable, Optional

from .frame_io import FrameWriter
from .frame_receiver import FrameReceiver
from .remoting_command import DEFAULT_MAX_FRAME, RemotingCommand

log = logging.getLogger(__name__)


class RemotingTimeoutError(TimeoutError):
    """No response within the timeout; names the request."""


def _expire(fut: asyncio.Future, cmd: RemotingCommand, timeout: float, host: str, port: int) -> None:
    if not fut.done():
        fut.set_exception(RemotingTimeoutError(f"no response to request code {cmd.code} (opaque {cmd.opaque}) from "
                                               f"{host}:{port} within {timeout} s"))


class RemotingClient:
    def __init__(self, address: str, max_frame: int = DEFAULT_MAX_FRAME):
        host, _, port = address.rpartition(":")
        self.host, self.port, self.max_frame = host.strip("[]") or "127.0.0.1", int(port), max_frame
        self._writer: Optional[asyncio.StreamWriter] = None
        self._frames: Optional[FrameWriter] = None
        self._receiver: Optional[FrameReceiver] = None
        self._pending: dict[int, asyncio.Future] = {}
        self._requests: collections.deque[RemotingCommand] = collections.deque()  # from the server, not handled yet
        self._handling: Optional[asyncio.Task] = None
        self.on_request: Optional[Callable[[RemotingCommand], Awaitable[None]]] = None  # requests from the server

    async def connect(self) -> "RemotingClient":
        loop = asyncio.get_running_loop()
        transport, receiver = await loop.create_connection(
            lambda: FrameReceiver(self.max_frame, self._received, self._lost, loop), self.host, self.port)
        self._receiver = receiver
        self._writer = asyncio.StreamWriter(transport, receiver, None, loop)
        self._frames = FrameWriter(self._writer)
        return self

    @property
    def source_host(self) -> Optional[str]:
        """This end's address on the connection: what the server sees as the client's host."""
        if self._writer is None:
            return None
        name = self._writer.get_extra_info("sockname")
        return str(name[0]) if isinstance(name, tuple) else None

    async def close(self) -> None:
        """Closes the connection; a second close (a client closed again after its connection was lost) does
        nothing more."""
        if self._frames is not None and self._receiver is not None:
            self._frames.close()
            self._frames = None
            await self._receiver.closed
        if self._handling is not None:
            self._handling.cancel()
        self._requests.clear()
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(ConnectionError("the connection was closed"))
        self._pending.clear()

    async def __aenter__(self) -> "RemotingClient":
        return await self.connect()

    async def __aexit__(self, *exc) -> None:
        await self.close()

    def _check_open(self) -> FrameWriter:
        if self._frames is None:
            raise ConnectionError(f"not connected to {self.host}:{self.port}")
        if self._frames.writer.transport.is_closing():
            raise ConnectionError(f"the connection to {self.host}:{self.port} was lost")
        return self._frames

    async def invoke(self, cmd: RemotingCommand, timeout: float = 5.0) -> RemotingCommand:
        frames = self._check_open()
        loop = asyncio.get_running_loop()
        fut: asyncio.Future = loop.create_future()
        self._pending[cmd.opaque] = fut
        # a timer on the future rather than asyncio.wait_for, which costs a task per request
        timer = loop.call_later(timeout, _expire, fut, cmd, timeout, self.host, self.port)
        try:
            await frames.write(cmd.encode())
            return await fut
        finally:
            timer.cancel()
            self._pending.pop(cmd.opaque, None)

    async def invoke_many(self, cmds: list[RemotingCommand], timeout: float = 5.0) -> list[Optional[RemotingCommand]]:
        """The answers to many requests written at once: a frame each, all in flight together; None for a request
        that got no answer within `timeout` or before the connection was lost."""
        frames = self._check_open()
        loop = asyncio.get_running_loop()
        futs = []
        for cmd in cmds:
            fut = loop.create_future()
            self._pending[cmd.opaque] = fut
            futs.append(fut)
        try:
            await frames.write(b"".join([cmd.encode() for cmd in cmds]))
            await asyncio.wait(futs, timeout=timeout)
            return [f.result() if f.done() and not f.cancelled() and f.exception() is None else None for f in futs]
        finally:
            for cmd, fut in zip(cmds, futs):
                self._pending.pop(cmd.opaque, None)
                if fut.done() and not fut.cancelled():
                    fut.exception()  # retrieved: a lost connection's error is the None above

    async def invoke_oneway(self, cmd: RemotingCommand) -> None:
        await self._check_open().write(cmd.encode())

    def _received(self, cmd: RemotingCommand) -> None:
        if cmd.is_response:
            fut = self._pending.get(cmd.opaque)
            if fut is not None and not fut.done():
                fut.set_result(cmd)
        elif self.on_request is not None:
            self._requests.append(cmd)
            if self._handling is None:
                self._handling = asyncio.ensure_future(self._handle_requests())

    async def _handle_requests(self) -> None:
        """The server's requests, one at a time in the order they came; the responses read meanwhile are not held
        up by them."""
        try:
            while self._requests:
                cmd = self._requests.popleft()
                handler = self.on_request
                if handler is None:
                    continue
                try:
                    await handler(cmd)
                except ConnectionError:  # the connection is gone: so are the requests that came on it
                    self._requests.clear()
                except Exception:
                    log.exception("the handler of request code %d from %s:%d failed", cmd.code, self.host, self.port)
        finally:
            self._handling = None

    def _lost(self, exc: Optional[Exception]) -> None:
        """The connection is gone (the server ended it, it broke, or a frame could not be read)."""
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(ConnectionError(f"the connection to {self.host}:{self.port} was lost"))
