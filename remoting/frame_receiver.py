"""Frames received on a connection as an asyncio BufferedProtocol, which hands the loop the buffer to read into.
The socket's bytes go into a read-ahead buffer, whose whole frames are decoded where they lie (a read brings many
small frames); a frame that does not fit in it gets a buffer of its own for its body, which the kernel then fills
directly and which becomes the command's body as it is. A pull's megabyte of records is so copied once (kernel to
that buffer; the part that came with the header, read-ahead to it), where a StreamReader copied it three times
more (into its buffer, out of it, out of the frame)."""
from __future__ import annotations

import asyncio
import logging
import struct
from typing import Callable, Optional

from .remoting_command import FrameError, RemotingCommand

READ_AHEAD = 64 << 10  # the most read at once between frames; a longer frame gets a buffer of its own for its body
_LENGTH = struct.Struct(">i")
log = logging.getLogger(__name__)


class FrameReceiver(asyncio.BufferedProtocol):
    """Calls on_frame with each command received, in order; on_lost once the connection is gone (its error, None
    at a clean end or after a frame that cannot be read, which closes it: FrameError, logged). Writing goes
    through an asyncio.StreamWriter on the transport, whose drain() waits in _drain_helper while the transport has
    paused writing. (Not asyncio.streams.FlowControlMixin: that is an asyncio.Protocol, which uvloop reads with
    data_received, never get_buffer.)"""

    def __init__(self, max_frame: int, on_frame: Callable[[RemotingCommand], None],
                 on_lost: Callable[[Optional[Exception]], None], loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.max_frame = max_frame
        self.on_frame, self.on_lost = on_frame, on_lost
        self.transport: Optional[asyncio.Transport] = None
        self.closed: asyncio.Future = loop.create_future()  # done once the connection is lost
        self._stage = bytearray(READ_AHEAD)
        self._view = memoryview(self._stage)
        self._start = 0  # the first byte of the stage not cut into frames yet
        self._fill = 0  # the end of the bytes read into the stage
        self._head: Optional[RemotingCommand] = None  # the frame whose body is being read into _body
        self._body: Optional[bytearray] = None
        self._body_fill = 0
        self._broken = False  # a frame could not be read: nothing more is
        self._writable: Optional[asyncio.Future] = None  # while writing is paused: done when it resumes

    def connection_made(self, transport) -> None:
        self.transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._body is not None:
            return memoryview(self._body)[self._body_fill:]
        return self._view[self._fill:]

    def buffer_updated(self, nbytes: int) -> None:
        if self._broken:
            return
        body = self._body
        if body is not None:
            self._body_fill += nbytes
            if self._body_fill == len(body):
                cmd = self._head
                assert cmd is not None
                cmd.body = body
                self._head, self._body = None, None
                self._deliver(cmd)
            return
        self._fill += nbytes
        try:
            self._cut()
        except FrameError as e:
            self._break(str(e))

    def _cut(self) -> None:
        """Decode every whole frame in the stage; start the body buffer of a frame that does not fit in it; make
        room for the rest."""
        stage, view, start, fill = self._stage, self._view, self._start, self._fill
        want = 8  # bytes of the stage from `start` the next step needs
        while fill - start >= 4:
            (length,) = _LENGTH.unpack_from(stage, start)
            if length < 4 or length > self.max_frame:  # checked as soon as it is read: a server may send no more
                raise FrameError(f"frame length {length} is outside 4..{self.max_frame}")
            if fill - start < 8:
                break
            header_len = _LENGTH.unpack_from(stage, start + 4)[0] & 0xFFFFFF
            if header_len > length - 4:
                raise FrameError(f"header length {header_len} runs past the frame ({length} bytes)")
            head_end, end = start + 8 + header_len, start + 4 + length
            if end <= fill:
                cmd = RemotingCommand.decode_header(view[start + 4:head_end], header_len)
                if end > head_end:
                    cmd.body = bytes(view[head_end:end])
                start = self._start = end
                self._deliver(cmd)
                if self._broken:
                    return
                continue
            want = 8 + header_len if head_end > fill else 4 + length
            if head_end <= fill and want > len(stage):  # the body is read into a buffer of its own
                cmd = RemotingCommand.decode_header(view[start + 4:head_end], header_len)
                body = bytearray(end - head_end)
                body[:fill - head_end] = view[head_end:fill]
                self._head, self._body, self._body_fill = cmd, body, fill - head_end
                self._start = self._fill = 0
                return
            break
        self._start = start
        if start == fill:
            self._start = self._fill = 0
            if len(stage) > READ_AHEAD:  # grown for a long header: back to the usual size
                self._stage = bytearray(READ_AHEAD)
                self._view = memoryview(self._stage)
        elif want > len(stage):  # a header longer than the stage: a longer stage for it
            self._stage = bytearray(want)
            self._stage[:fill - start] = view[start:fill]
            self._view = memoryview(self._stage)
            self._start, self._fill = 0, fill - start
        elif start + want > len(stage):  # the unfinished frame moved to the front, where it fits
            stage[:fill - start] = bytes(view[start:fill])  # a copy first: the two places may overlap
            self._start, self._fill = 0, fill - start

    def _deliver(self, cmd: RemotingCommand) -> None:
        try:
            self.on_frame(cmd)
        except Exception:  # a bug there closes this connection only
            log.exception("closing the connection after a frame")
            self._break(None)

    def _break(self, reason: Optional[str]) -> None:
        if reason is not None:
            log.warning("closing the connection: %s", reason)
        self._broken = True
        self._head = self._body = None
        if self.transport is not None:
            self.transport.close()

    def eof_received(self) -> bool:
        return False  # the transport closes; connection_lost tells on_lost

    def pause_writing(self) -> None:
        if self._writable is None:
            self._writable = self.loop.create_future()

    def resume_writing(self) -> None:
        writable, self._writable = self._writable, None
        if writable is not None and not writable.done():
            writable.set_result(None)

    async def _drain_helper(self) -> None:
        """What StreamWriter.drain() awaits: the transport taking writes again."""
        if self.closed.done():
            raise ConnectionResetError("the connection was lost")
        if self._writable is not None:
            await asyncio.shield(self._writable)  # one writer's cancelled drain does not cancel the others'

    def connection_lost(self, exc: Optional[Exception]) -> None:
        writable, self._writable = self._writable, None
        if writable is not None and not writable.done():
            if exc is None:
                writable.set_result(None)
            else:
                writable.set_exception(exc)
                writable.exception()  # retrieved: the drains waiting on it raise it
        self._broken = True
        self._head = self._body = None
        if not self.closed.done():
            self.closed.set_result(None)
        self.on_lost(exc)
