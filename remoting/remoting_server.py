"""An asyncio server of RemotingCommands: reads frames, hands each request to the processor registered for its
code, writes the response. A malformed frame closes its own connection only; a processor that fails answers
SYSTEM_ERROR with a remark; an unknown code answers REQUEST_CODE_NOT_SUPPORTED naming it."""
from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import struct
import time
from typing import Awaitable, Callable, Iterator, Optional, Union

from .codes import RequestCode, ResponseCode
from .command_header import HeaderFieldError
from .frame_io import FrameWriter
from .remoting_command import FrameError, RemotingCommand
from .remoting_serializable import BodyError
from .server_limits import SMALL_FRAME, FrameBudget, ServerLimits

log = logging.getLogger(__name__)

EOF_GRACE_S = 0.5
LARGE_BODY = 64 << 10
_LENGTH = struct.Struct(">i")
# RocketMQ's remark when a request finds its processor's queue full (NettyRemotingAbstract)
OVERLOAD_REMARK = "[OVERLOAD]system busy, start flow control for a while"

# A processor answers a request at once (returns the answer, or None for none), or later: a ResponseCallback it
# calls itself, a future of it (written when done) or any other awaitable of it (run as a task of its own). The
# usual pull is answered at once and a single send by a callback (appended with the others of its turn), without
# a task's cost; anything that waits (a held pull, a name-server call) is awaited.
Processor = Callable[[RemotingCommand, "Channel"],
                     Union[Awaitable[Optional[RemotingCommand]], Optional[RemotingCommand]]]
# RocketMQ's RPCHook.doBeforeRequest: sees every request before its processor; an answer it returns is the answer
# (a refusal) and the processor is not run
BeforeRequest = Callable[[RemotingCommand, "Channel"], Optional[RemotingCommand]]
# A frame's first reader (the broker's compiled reader of sends and pulls, remoting.request_frame.read_request): the
# request it read from the payload and its typed header, handed to the processor as processor(cmd, channel,
# header); or None for the general decode. Not used while before_request hooks are set: they see every request
# decoded.
Lane = Callable[[bytes], Optional[tuple[RemotingCommand, object]]]
# An answer: a RemotingCommand, or its frame already encoded (the lane's SEND_OK)
Answer = Union[RemotingCommand, bytes]


class ResponseCallback:
    """A request its processor answers from a callback of its own (RocketMQ's RemotingResponseCallback), without a
    task or a future: callback() puts the answer in the connection's output at once; flush() hands that output to
    the socket now rather than at the end of the turn (an answer sent before the work that follows it)."""

    __slots__ = ("server", "cmd", "channel", "answered", "counted")

    def __init__(self, server: "RemotingServer", cmd: RemotingCommand, channel: "Channel"):
        self.server = server
        self.cmd = cmd
        self.channel = channel
        self.answered = False
        self.counted = False  # among the connection's busy requests (from when the server has it)

    def callback(self, response: Optional[Answer]) -> None:
        if self.answered:
            return
        self.answered = True
        if self.counted:
            self.channel._set_busy(-1)
        self.server._respond(self.cmd, self.channel, response)

    def _count(self) -> None:
        if not self.answered:
            self.counted = True
            self.channel._set_busy(+1)

    def failed(self, e: Exception) -> None:
        """Answered with what the server answers for a processor's failure."""
        self.callback(self.server._failed(self.cmd, self.channel, e))

    def flush(self) -> None:
        self.channel._flush()


class Channel:
    """One client connection, as processors see it: where to write, and who it is."""

    def __init__(self, writer: asyncio.StreamWriter, server: Optional["RemotingServer"] = None):
        self.writer = writer
        self.frames = FrameWriter(writer)
        self.server = server
        self.limits = server.limits if server is not None else ServerLimits()
        writer.transport.set_write_buffer_limits(high=self.limits.write_high_water, low=self.limits.write_low_water)
        peer = writer.get_extra_info("peername")
        self.remote_address = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.closed = asyncio.Event()
        self.tasks: set[asyncio.Task] = set()  # requests of this connection being processed or held
        self.busy = 0  # requests being processed (not held)
        self.held: set[asyncio.Task] = set()  # requests held (a long-polling pull waiting for messages)
        self.frames_in = 0
        self.bytes_out = 0
        self.notes_dropped = 0  # best-effort oneway requests not sent: the client was not reading
        self._changed = asyncio.Event()  # busy or held went down
        self.pending: dict[int, asyncio.Future] = {}  # requests this server sent and awaits answers to, by opaque
        # Answers written within one turn of the event loop leave in one writev at its end (_flush): each send
        # on loopback is a system call that also runs the client's receive path, the broker's largest cost
        # when several requests of a connection finish together (a push consumer's pulls, a producer's threads).
        self._out: Optional[list] = None
        self._out_bytes = 0

    async def invoke(self, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        """A request of the server's own to the client, and its answer (RocketMQ's Broker2Client.callClient:
        GET_CONSUMER_RUNNING_INFO); TimeoutError when none comes, ConnectionError when the client is gone."""
        if self.closed.is_set():
            raise ConnectionError(f"{self.remote_address} is gone")
        answer: asyncio.Future = asyncio.get_running_loop().create_future()
        self.pending[cmd.opaque] = answer
        gone = asyncio.ensure_future(self.closed.wait())
        try:
            await self.send(cmd)
            done, _ = await asyncio.wait([answer, gone], timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            if answer in done:
                return answer.result()
            if self.closed.is_set():
                raise ConnectionError(f"{self.remote_address} closed before answering")
            raise TimeoutError(f"{self.remote_address} did not answer within {timeout:g} s")
        finally:
            gone.cancel()
            self.pending.pop(cmd.opaque, None)

    def buffered(self) -> int:
        """Bytes of answers written and not yet taken by the client."""
        return self.writer.transport.get_write_buffer_size() + self._out_bytes

    async def send(self, cmd: RemotingCommand) -> None:
        """Write cmd, first waiting while the client has more than the high-water mark of answers unread."""
        if not await self._room():
            return
        if len(cmd.body) < LARGE_BODY:
            self._write(cmd.encode())
        else:  # the body handed to the transport as it is: no copy into one frame buffer
            self._write(cmd.encode_head())
            self._write(cmd.body)

    async def send_encoded(self, frame: bytes) -> None:
        """Write a frame encoded already, as send does."""
        if await self._room():
            self._write(frame)

    async def _room(self) -> bool:
        """Wait while the client has more than the high-water mark of answers unread; False when it is gone."""
        if self.closed.is_set():
            return False
        while self.buffered() > self.limits.write_high_water:
            await self._drain()
            if self.writer.transport.is_closing():
                return False
        return True

    def send_oneway_best_effort(self, cmd: RemotingCommand) -> bool:
        """Write a oneway request the server sends on its own (NOTIFY_CONSUMER_IDS_CHANGED, CHECK_TRANSACTION_STATE)
        now, or drop it when the client has more than the high-water mark of answers unread: never waits, so one
        client that does not read delays nobody. False when dropped (the client learns it at its next periodic
        rebalance or check)."""
        if self.closed.is_set() or self.writer.transport.is_closing() \
                or self.buffered() > self.limits.write_high_water:
            self.notes_dropped += 1
            log.debug("%s is not reading: request code %d not sent", self.remote_address, cmd.code)
            return False
        self._write(cmd.encode())
        return True

    @contextlib.contextmanager
    def holding(self) -> Iterator[None]:
        """The current request waits here for something other than this server's work (a long-polling pull for a
        message): it is not counted among the connection's busy requests meanwhile, and is dropped when the
        connection closes."""
        task = asyncio.current_task()
        assert task is not None
        self._set_busy(-1)
        self.held.add(task)
        try:
            yield
        finally:
            self.held.discard(task)
            self._set_busy(+1)

    def response_callback(self, cmd: RemotingCommand) -> ResponseCallback:
        """What a processor returns for a request it answers later by calling it."""
        assert self.server is not None
        return ResponseCallback(self.server, cmd, self)

    def _write(self, data: bytes | bytearray) -> None:
        self.bytes_out += len(data)
        self._out_bytes += len(data)
        if self._out is None:
            self._out = [data]
            asyncio.get_running_loop().call_soon(self._flush)
        else:
            self._out.append(data)

    async def _drain(self) -> None:
        """Wait until the client has read its answers down to the low-water mark (ConnectionError when it is
        gone): what is gathered for this turn's writev goes to the transport first, or drain has nothing to wait
        for."""
        self._flush()
        await self.writer.drain()

    def _flush(self) -> None:
        """Hand the answers written since the last flush to the transport, together."""
        out, self._out, self._out_bytes = self._out, None, 0
        if out and not self.writer.transport.is_closing():
            self.writer.writelines(out)

    def _set_busy(self, delta: int) -> None:
        self.busy += delta
        if self.server is not None:
            self.server.busy += delta
        if delta < 0:
            self._changed.set()

    def _done(self, task: asyncio.Task) -> None:
        self.tasks.discard(task)
        self._set_busy(-1)

    def may_read(self) -> bool:
        """Whether the next request may be read: the client has read its answers below the high-water mark, and
        the connection has fewer requests busy and held than allowed."""
        limits = self.limits
        return self.buffered() <= limits.write_high_water and self.busy < limits.max_channel_busy \
            and len(self.held) < limits.max_channel_held

    async def readable(self) -> None:
        """Return when the next request may be read (may_read)."""
        while not self.may_read():
            if self.buffered() > self.limits.write_high_water:
                await self._drain()
            else:
                self._changed.clear()
                await self._changed.wait()


class RemotingServer:
    def __init__(self, host: str = "127.0.0.1", port: int = 0, max_frame: Optional[int] = None,
                 limits: Optional[ServerLimits] = None):
        limits = limits or ServerLimits()
        if max_frame is not None:
            limits = dataclasses.replace(limits, max_frame=max_frame,
                                         max_unfinished_frame_bytes=max(limits.max_unfinished_frame_bytes, max_frame))
        self.host, self.port, self.limits = host, port, limits
        self.max_frame = limits.max_frame
        self.processors: dict[int, Processor] = {}
        self.channels: set[Channel] = set()
        self.on_close: list[Callable[[Channel], None]] = []
        self.before_request: list[BeforeRequest] = []
        self.lane: Optional[Lane] = None
        self.busy = 0  # requests being processed across connections
        self.refused_busy = 0  # requests answered SYSTEM_BUSY, since start
        self.idle_closed = 0  # connections closed for idleness, since start
        self.frame_budget = FrameBudget(limits.max_unfinished_frame_bytes)
        self._refused_logged = (0.0, 0)  # when the last overload warning was logged, and the count then
        self._server: Optional[asyncio.base_events.Server] = None
        self._tasks: set[asyncio.Task] = set()
        self._idle_watch: Optional[asyncio.Task] = None

    def register(self, code: int, processor: Processor) -> None:
        self.processors[int(code)] = processor

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def start(self) -> "RemotingServer":
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _ConnectionProtocol(self, loop), self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        if self.limits.idle_timeout_s > 0:
            self._idle_watch = asyncio.ensure_future(self._close_idle())
        return self

    async def stop(self, grace_s: float = 0.0) -> None:
        """Stop accepting; give requests being processed up to grace_s to be answered; close every connection."""
        if self._idle_watch is not None:
            self._idle_watch.cancel()
            self._idle_watch = None
        if self._server is not None:
            self._server.close()
            pending = [t for t in self._tasks if not t.done()]
            if pending and grace_s > 0:
                await asyncio.wait(pending, timeout=grace_s)
            for ch in list(self.channels):
                ch._flush()
                ch.writer.close()
            await self._server.wait_closed()
            self._server = None
        for task in list(self._tasks):
            task.cancel()

    async def __aenter__(self) -> "RemotingServer":
        return await self.start()

    async def __aexit__(self, *exc) -> None:
        await self.stop()

    def _request(self, channel: Channel, payload: bytes) -> None:
        """One frame read from a client: an answer to a request of ours, or a request handed to its processor."""
        channel.frames_in += 1
        read = self.lane(payload) if self.lane is not None and not self.before_request else None
        if read is not None:
            cmd, header = read
            if self.busy >= self.limits.max_busy:
                self._refuse_busy(cmd, channel)
                return
            self._started(cmd, self._start(cmd, channel, header), channel)
            return
        cmd = RemotingCommand.decode(payload)
        if cmd.is_response:  # an answer to a request this server sent (most are oneway: no answer)
            waiting = channel.pending.get(cmd.opaque)
            if waiting is not None and not waiting.done():
                waiting.set_result(cmd)
            return
        if self.busy >= self.limits.max_busy:
            self._refuse_busy(cmd, channel)
            return
        self._started(cmd, self._start(cmd, channel), channel)

    def _started(self, cmd: RemotingCommand, answer, channel: Channel) -> None:
        """The processor's answer to cmd written now, or waited for (a callback, a future, any awaitable)."""
        if isinstance(answer, RemotingCommand) and not cmd.is_oneway \
                and channel.buffered() <= self.limits.write_high_water:
            self._answer_now(cmd, channel, answer)
        elif isinstance(answer, ResponseCallback):
            answer._count()
        elif isinstance(answer, asyncio.Future):
            channel._set_busy(+1)
            answer.add_done_callback(functools.partial(self._answered, cmd, channel))
        elif answer is not None and not (isinstance(answer, RemotingCommand) and cmd.is_oneway):
            later = self._finish(cmd, channel, answer)
            task = asyncio.ensure_future(later)
            channel._set_busy(+1)
            self._tasks.add(task)
            channel.tasks.add(task)
            task.add_done_callback(functools.partial(self._done, channel))

    def _closed(self, channel: Channel) -> None:
        """A connection is gone: its held pulls dropped, its close callbacks run."""
        channel.closed.set()
        for task in list(channel.held):  # held pulls: nobody to answer
            task.cancel()
        self.channels.discard(channel)
        for callback in self.on_close:
            callback(channel)
        channel.frames.close()

    def _refuse_busy(self, cmd: RemotingCommand, channel: Channel) -> None:
        """RocketMQ's answer when its request queue is full: SYSTEM_BUSY, counted, logged at most every 10 s."""
        self.refused_busy += 1
        if not cmd.is_oneway and not channel.writer.transport.is_closing():
            channel._write(cmd.response(ResponseCode.SYSTEM_BUSY, OVERLOAD_REMARK).encode())
        now = time.monotonic()
        last, count = self._refused_logged
        if now - last >= 10.0:
            log.warning("overload: %d requests refused with SYSTEM_BUSY (%d since start; more than %d requests "
                        "being processed)", self.refused_busy - count, self.refused_busy, self.limits.max_busy)
            self._refused_logged = (now, self.refused_busy)

    async def _close_idle(self) -> None:
        """Close connections that completed no request and took no byte of their answers for idle_timeout_s
        (so a client that sends a byte a second, or never reads, is not served forever)."""
        timeout = self.limits.idle_timeout_s
        seen: dict[Channel, tuple[int, int, float]] = {}  # channel -> (frames in, bytes taken, when they moved)
        while True:
            await asyncio.sleep(min(1.0, timeout / 4))
            now = time.monotonic()
            for ch in list(self.channels):
                progress = (ch.frames_in, ch.bytes_out - ch.buffered())
                before = seen.get(ch)
                if before is None or before[:2] != progress:
                    seen[ch] = (*progress, now)
                elif now - before[2] >= timeout:
                    self.idle_closed += 1
                    log.info("closing %s: no request and no answer taken for %.0f s", ch.remote_address, timeout)
                    ch.writer.transport.abort()  # connection_lost stops a wait for room too
            for ch in [c for c in seen if c not in self.channels]:
                del seen[ch]

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

    def _start(self, cmd: RemotingCommand, channel: Channel, header=None) -> Union[RemotingCommand, Awaitable, None]:
        """The request's answer if its processor gave one at once, else what to await for it (or None). header:
        the typed header the lane read, handed to the processor."""
        processor = self.processors.get(cmd.code)
        response = self._before(cmd, channel) if self.before_request else None
        if response is not None:
            return response  # refused before its processor
        if processor is None:
            name = RequestCode(cmd.code).name if cmd.code in RequestCode._value2member_map_ else "unknown"
            return cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                f"request code {cmd.code} ({name}) is not supported")
        try:
            return processor(cmd, channel) if header is None else processor(cmd, channel, header)  # type: ignore
        except Exception as e:
            return self._failed(cmd, channel, e)

    async def _finish(self, cmd: RemotingCommand, channel: Channel, answer) -> None:
        """A request answered later: its processor's awaitable, or an answer waiting for room to be written."""
        if not isinstance(answer, RemotingCommand):
            try:
                answer = await answer
            except Exception as e:
                answer = self._failed(cmd, channel, e)
        await self._answer(cmd, channel, answer)

    def _done(self, channel: Channel, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        channel._done(task)

    def _answered(self, cmd: RemotingCommand, channel: Channel, done: asyncio.Future) -> None:
        """A processor's future is done: its answer written (without a task while the client has room)."""
        channel._set_busy(-1)
        if done.cancelled():
            return
        error = done.exception()
        if error is not None and not isinstance(error, Exception):
            raise error
        self._respond(cmd, channel, done.result() if error is None else self._failed(cmd, channel, error))

    def _respond(self, cmd: RemotingCommand, channel: Channel, response: Optional[Answer]) -> None:
        """A later answer written (without a task while the client has room)."""
        if response is None or cmd.is_oneway or channel.closed.is_set():
            return
        if channel.buffered() <= self.limits.write_high_water:
            self._answer_now(cmd, channel, response)
        else:
            task = asyncio.ensure_future(self._answer(cmd, channel, response))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _answer_now(self, cmd: RemotingCommand, channel: Channel, response: Answer) -> None:
        """Write an answer given at once (the client has room for it)."""
        if type(response) is bytes:
            if not channel.closed.is_set():
                channel._write(response)
            return
        assert isinstance(response, RemotingCommand)
        try:
            parts = [response.encode()] if len(response.body) < LARGE_BODY else \
                [response.encode_head(), response.body]
        except (FrameError, struct.error, OverflowError) as e:  # an answer that does not fit its encoding
            log.error("the answer to request code %d from %s does not encode: %s", cmd.code, channel.remote_address,
                      e)
            parts = [cmd.response(ResponseCode.SYSTEM_ERROR, f"the answer does not encode: {e}").encode()]
        if not channel.closed.is_set():
            for part in parts:
                channel._write(part)

    async def _answer(self, cmd: RemotingCommand, channel: Channel, response: Optional[Answer]) -> None:
        if response is not None and not cmd.is_oneway:
            try:
                if type(response) is bytes:
                    await channel.send_encoded(response)
                else:
                    assert isinstance(response, RemotingCommand)
                    await channel.send(response)
            except ConnectionError:
                pass
            except (FrameError, struct.error, OverflowError) as e:  # an answer that does not fit its encoding
                log.error("the answer to request code %d from %s does not encode: %s", cmd.code,
                          channel.remote_address, e)
                await channel.send(cmd.response(ResponseCode.SYSTEM_ERROR, f"the answer does not encode: {e}"))


class _ConnectionProtocol(asyncio.streams.FlowControlMixin, asyncio.Protocol):
    """One client connection read as an asyncio Protocol: the frames a read brings are cut from its bytes and
    handled there and then (RemotingServer._request), with no task woken per frame (measured with a processor that
    does nothing, one request in flight: 116-124 us of server CPU a request through a StreamReader, 76-84 us so).
    Reading stops while the connection may not take another request (Channel.readable: answers unread past the
    high-water mark, too many requests busy or held) and while a frame longer than SMALL_FRAME finds no room in the
    budget of unfinished frames; what is not read waits in the kernel's buffers. Answers are written through a
    StreamWriter on the same transport (its drain() waits on this protocol's flow control)."""

    def __init__(self, server: RemotingServer, loop: asyncio.AbstractEventLoop):
        super().__init__(loop)
        self.loop = loop
        self.server = server
        self.channel: Optional[Channel] = None
        self.transport: Optional[asyncio.Transport] = None
        self._buf: bytes | bytearray = b""  # a read's bytes as they came while they end on a frame's end
        self._taken = 0  # bytes of the unfinished long frame counted in the server's frame budget
        self._waiting: Optional[asyncio.Task] = None  # until reading may go on
        self._eof = False
        self._ending: Optional[asyncio.Task] = None

    def connection_made(self, transport) -> None:
        self.transport = transport
        writer = asyncio.StreamWriter(transport, self, None, self.loop)
        self.channel = Channel(writer, self.server)
        self.server.channels.add(self.channel)

    def data_received(self, data: bytes) -> None:
        if not self._buf:
            self._buf = data  # the usual read: whole frames, cut from it without a copy of the whole
        elif type(self._buf) is bytes:
            self._buf = bytearray(self._buf) + data
        else:
            self._buf += data
        if self._waiting is None:
            self._read()

    def eof_received(self) -> bool:
        self._eof = True
        if self._waiting is None:
            self._read()
        return True  # the answers of what was read are still written; _end closes

    def connection_lost(self, exc: Optional[Exception]) -> None:
        super().connection_lost(exc)
        self.stop_waiting()
        if self._ending is not None:
            self._ending.cancel()
        self.server.frame_budget.give_back(self._taken)
        self._taken = 0
        if self.channel is not None and not self.channel.closed.is_set():
            self.server._closed(self.channel)

    def stop_waiting(self) -> None:
        if self._waiting is not None:
            self._waiting.cancel()
            self._waiting = None

    def _read(self) -> None:
        """Handle every whole frame in the buffer while the connection may take requests."""
        server, channel, buf = self.server, self.channel, self._buf
        assert channel is not None and self.transport is not None
        pos = 0
        try:
            while len(buf) - pos >= 4:
                if not channel.may_read():
                    self._wait(channel.readable())
                    break
                (length,) = _LENGTH.unpack_from(buf, pos)
                if length < 4 or length > server.max_frame:
                    raise FrameError(f"frame length {length} is outside 4..{server.max_frame}")
                have = len(buf) - pos - 4
                if length > SMALL_FRAME:  # a long frame's bytes held count in the budget across connections
                    more = min(have, length) - self._taken
                    if more > 0:
                        if not server.frame_budget.try_take(more):
                            self._wait(self._take_budget(more))
                            break
                        self._taken += more
                if have < length:
                    break
                payload = buf[pos + 4:pos + 4 + length] if type(buf) is bytes else \
                    bytes(memoryview(buf)[pos + 4:pos + 4 + length])
                pos += 4 + length
                if self._taken:
                    server.frame_budget.give_back(self._taken)
                    self._taken = 0
                server._request(channel, payload)
        except FrameError as e:
            log.warning("closing %s: %s", channel.remote_address, e)
            self._close()
            return
        except ConnectionError:
            self._close()
            return
        except Exception:  # a bug here closes this connection only
            log.exception("closing %s", channel.remote_address)
            self._close()
            return
        finally:
            if pos:
                buf = self._buf = buf[pos:]
        if self._eof and self._waiting is None and self._ending is None:
            if buf:
                log.warning("closing %s: the connection ended inside a frame", channel.remote_address)
                self._close()
            else:
                self._ending = asyncio.ensure_future(self._end())

    def _wait(self, until) -> None:
        """Stop reading until the awaitable is done, then read on."""
        assert self.transport is not None
        if not self._eof and not self.transport.is_closing():
            self.transport.pause_reading()
        self._waiting = asyncio.ensure_future(self._resume_after(until))

    async def _resume_after(self, until) -> None:
        try:
            await until
        except ConnectionError:
            self._waiting = None
            self._close()
            return
        self._waiting = None
        assert self.transport is not None
        if self.transport.is_closing():
            return
        if not self._eof:
            self.transport.resume_reading()
        self._read()

    async def _take_budget(self, n: int) -> None:
        await self.server.frame_budget.take(n)
        self._taken += n

    async def _end(self) -> None:
        """The client is done sending: what it asked is still answered if that is quick; what it asked is processed
        whatever happens (its answer dropped); a held pull is dropped."""
        channel = self.channel
        assert channel is not None
        busy = channel.tasks - channel.held
        if busy:
            await asyncio.wait(busy, timeout=EOF_GRACE_S)
        self._close()

    def _close(self) -> None:
        channel = self.channel
        assert channel is not None
        if not channel.closed.is_set():
            self.server._closed(channel)  # frames.close() closes the transport once the answers are written
