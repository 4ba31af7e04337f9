"""Frames on an asyncio stream: reading one; writing one, waiting for the socket to drain only past a high-water
mark (so a slow reader does not make memory grow, and a fast one costs no drain per frame). Frames are handed to
the transport as they are made, not gathered per turn of the loop: that would batch the two ends into taking
turns instead of working at once (measured: half the round trips with 16 requests in flight).
"""
from __future__ import annotations

import asyncio
import struct
from typing import Optional

from .remoting_command import FrameError

HIGH_WATER = 4 << 20


async def read_frame(reader: asyncio.StreamReader, max_frame: int) -> Optional[bytes]:
    """The next frame's payload; None at a clean end of stream; FrameError for a length out of range."""
    length = await read_length(reader, max_frame)
    if length is None:
        return None
    try:
        return await reader.readexactly(length)
    except asyncio.IncompleteReadError:
        raise FrameError("the connection ended inside a frame") from None


async def read_length(reader: asyncio.StreamReader, max_frame: int) -> Optional[int]:
    """The next frame's length; None at a clean end of stream; FrameError for a length out of range."""
    try:
        head = await reader.readexactly(4)
    except asyncio.IncompleteReadError as e:
        if e.partial:
            raise FrameError("the connection ended inside a frame's length") from None
        return None
    (length,) = struct.unpack(">i", head)
    if length < 4 or length > max_frame:
        raise FrameError(f"frame length {length} is outside 4..{max_frame}")
    return length


class FrameWriter:
    def __init__(self, writer: asyncio.StreamWriter):
        self.writer = writer

    async def write(self, frame: bytes) -> None:
        self.writer.write(frame)
        if self.writer.transport.get_write_buffer_size() > HIGH_WATER:
            await self.writer.drain()

    def close(self) -> None:
        self.writer.close()
