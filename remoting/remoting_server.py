"""An asyncio server of RemotingCommands: reads frames, hands each request to the processor registered for its
code, writes the response. A malformed frame closes its own connection only; a processor that fails answers
SYSTEM_ERROR with a remark; an unknown code answers REQUEST_CODE_NOT_SUPPORTED naming it."""
from __future__ import annotations

import asyncio
import logging
import struct
from typing import Awaitable, Callable, Optional

from .codes import RequestCode, ResponseCode
from .command_header import HeaderFieldError
from .frame_io import FrameWriter, read_frame
from .remoting_command import DEFAULT_MAX_FRAME, FrameError, RemotingCommand
from .remoting_serializable import BodyError

log = logging.getLogger(__name__)

EOF_GRACE_S = 0.5
LARGE_BODY = 64 << 10

Processor = Callable[[RemotingCommand, "Channel"], Awaitable[Optional[RemotingCommand]]]
# RocketMQ's RPCHook.doBeforeRequest: sees every request before its processor; an answer it returns is the answer
# (a refusal) and the processor is not run
BeforeRequest = Callable[[RemotingCommand, "Channel"], Optional[RemotingCommand]]


class Channel:
    """One client connection, as processors see it: where to write, and who it is."""

    def __init__(self, writer: asyncio.StreamWriter):
        self.writer = writer
        self.frames = FrameWriter(writer)
        peer = writer.get_extra_info("peername")
        self.remote_address = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.closed = asyncio.Event()
        self.tasks: set[asyncio.Task] = set()  # requests of this connection being processed

    async def send(self, cmd: RemotingCommand) -> None:
        if self.closed.is_set():
            return
        if len(cmd.body) < LARGE_BODY:
            await self.frames.write(cmd.encode())
        else:  # the body handed to the transport as it is: no copy into one frame buffer
            head = cmd.encode_head()
            self.writer.write(head)
            await self.frames.write(cmd.body)


class RemotingServer:
    def __init__(self, host: str = "127.0.0.1", port: int = 0, max_frame: int = DEFAULT_MAX_FRAME):
        self.host, self.port, self.max_frame = host, port, max_frame
        self.processors: dict[int, Processor] = {}
        self.channels: set[Channel] = set()
        self.on_close: list[Callable[[Channel], None]] = []
        self.before_request: list[BeforeRequest] = []
        self._server: Optional[asyncio.base_events.Server] = None
        self._tasks: set[asyncio.Task] = set()

    def register(self, code: int, processor: Processor) -> None:
        self.processors[int(code)] = processor

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def start(self) -> "RemotingServer":
        self._server = await asyncio.start_server(self._serve, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self, grace_s: float = 0.0) -> None:
        """Stop accepting; give requests being processed up to grace_s to be answered; close every connection."""
        if self._server is not None:
            self._server.close()
            pending = [t for t in self._tasks if not t.done()]
            if pending and grace_s > 0:
                await asyncio.wait(pending, timeout=grace_s)
            for ch in list(self.channels):
                ch.writer.close()
            await self._server.wait_closed()
            self._server = None
        for task in list(self._tasks):
            task.cancel()

    async def __aenter__(self) -> "RemotingServer":
        return await self.start()

    async def __aexit__(self, *exc) -> None:
        await self.stop()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        channel = Channel(writer)
        self.channels.add(channel)
        try:
            while True:
                payload = await read_frame(reader, self.max_frame)
                if payload is None:
                    # the client is done sending: what it asked is still answered if that is quick (a held pull
                    # is not; it is dropped)
                    if channel.tasks:
                        await asyncio.wait(set(channel.tasks), timeout=EOF_GRACE_S)
                    break
                cmd = RemotingCommand.decode(payload)
                if cmd.is_response:
                    continue  # answers to requests this server sent (NOTIFY_CONSUMER_IDS_CHANGED is oneway)
                task = asyncio.ensure_future(self._dispatch(cmd, channel))
                self._tasks.add(task)
                channel.tasks.add(task)
                task.add_done_callback(self._tasks.discard)
                task.add_done_callback(channel.tasks.discard)
        except FrameError as e:
            log.warning("closing %s: %s", channel.remote_address, e)
        except (ConnectionError, asyncio.CancelledError):
            pass
        except Exception:  # a bug here closes this connection only
            log.exception("closing %s", channel.remote_address)
        finally:
            channel.closed.set()
            for task in list(channel.tasks):  # requests still held (a long-polling pull): nobody to answer
                task.cancel()
            self.channels.discard(channel)
            for callback in self.on_close:
                callback(channel)
            channel.frames.close()

    def _failed(self, cmd: RemotingCommand, channel: Channel, e: Exception) -> RemotingCommand:
        if isinstance(e, (HeaderFieldError, BodyError)):  # the client's mistake: RocketMQ answers SYSTEM_ERROR too
            log.debug("request code %d from %s: %s", cmd.code, channel.remote_address, e)
            return cmd.response(ResponseCode.SYSTEM_ERROR, str(e))
        # a processor's bug answers this request only; the server goes on
        log.error("request code %d from %s failed", cmd.code, channel.remote_address, exc_info=e)
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"{type(e).__name__}: {e}")

    def _before(self, cmd: RemotingCommand, channel: Channel) -> Optional[RemotingCommand]:
        try:
            for hook in self.before_request:
                refusal = hook(cmd, channel)
                if refusal is not None:
                    return refusal
        except Exception as e:
            return self._failed(cmd, channel, e)
        return None

    async def _dispatch(self, cmd: RemotingCommand, channel: Channel) -> None:
        processor = self.processors.get(cmd.code)
        response = self._before(cmd, channel) if self.before_request else None
        if response is not None:
            pass  # refused before its processor
        elif processor is None:
            name = RequestCode(cmd.code).name if cmd.code in RequestCode._value2member_map_ else "unknown"
            response = cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                    f"request code {cmd.code} ({name}) is not supported")
        else:
            try:
                response = await processor(cmd, channel)
            except Exception as e:
                response = self._failed(cmd, channel, e)
        await self._answer(cmd, channel, response)

    async def _answer(self, cmd: RemotingCommand, channel: Channel, response: Optional[RemotingCommand]) -> None:
        if response is not None and not cmd.is_oneway:
            try:
                await channel.send(response)
            except ConnectionError:
                pass
            except (FrameError, struct.error, OverflowError) as e:  # an answer that does not fit its encoding
                log.error("the answer to request code %d from %s does not encode: %s", cmd.code,
                          channel.remote_address, e)
                await channel.send(cmd.response(ResponseCode.SYSTEM_ERROR, f"the answer does not encode: {e}"))
