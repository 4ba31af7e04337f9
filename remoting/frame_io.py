"""Frames written to an asyncio stream, waiting for the socket to drain only past a high-water mark (so a slow
reader does not make memory grow, and a fast one costs no drain per frame). Frames are handed to the transport as
they are made, not gathered per turn of the loop: that would batch the two ends into taking turns instead of
working at once (measured: half the round trips with 16 requests in flight).
"""
from __future__ import annotations

import asyncio

HIGH_WATER = 4 << 20


class FrameWriter:
    def __init__(self, writer: asyncio.StreamWriter):
        self.writer = writer

    async def write(self, frame: bytes) -> None:
        self.writer.write(frame)
        if self.writer.transport.get_write_buffer_size() > HIGH_WATER:
            await self.writer.drain()

    def close(self) -> None:
        self.writer.close()
