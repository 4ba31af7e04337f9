"""What one client may cost the server: the bounds RemotingServer keeps per connection and across connections, and
the budget of bytes held in unfinished request frames. A connection over its bounds is not refused: the server
stops reading it (TCP holds the rest in the client's buffers) until its answers are read or its work is done."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass

from .remoting_command import DEFAULT_MAX_FRAME


@dataclass(frozen=True)
class ServerLimits:
    # largest request frame read (RocketMQ: com.rocketmq.remoting.frameMaxLength, 16 MiB); a longer one closes
    # its connection
    max_frame: int = DEFAULT_MAX_FRAME
    # bytes of every connection's unfinished request frames together; a connection that would go past it waits,
    # unread, until other frames complete (frames up to SMALL_FRAME are not held to it)
    max_unfinished_frame_bytes: int = 64 << 20
    # answers waiting to be written to one connection: past high, its requests are not read until the client has
    # read them down to low (RocketMQ: writeBufferHighWaterMark / writeBufferLowWaterMark)
    write_high_water: int = 4 << 20
    write_low_water: int = 1 << 20
    # requests of one connection being processed at once (a held long-polling pull is not counted); past it the
    # connection's next requests wait unread
    max_channel_busy: int = 16
    # held pulls of one connection; past it its next requests wait unread
    max_channel_held: int = 4096
    # requests being processed across connections; past it a request is answered SYSTEM_BUSY at once and not
    # processed (RocketMQ: a full thread pool queue, e.g. sendThreadPoolQueueCapacity)
    max_busy: int = 10000
    # a connection that completes no request and takes no byte of its answers for this long is closed (RocketMQ:
    # serverChannelMaxIdleTimeSeconds); 0: never
    idle_timeout_s: float = 120.0

    def __post_init__(self) -> None:
        # errors name broker.conf's keys: that is where users set these
        if self.max_frame < 1024:
            raise ValueError(f"frameMaxLength must be at least 1024 bytes, got {self.max_frame}")
        if self.max_unfinished_frame_bytes < self.max_frame:
            raise ValueError(f"serverUnfinishedFramesMaxBytes ({self.max_unfinished_frame_bytes}) must hold one "
                             f"frame of frameMaxLength ({self.max_frame})")
        if not 0 < self.write_low_water <= self.write_high_water:
            raise ValueError(f"writeBufferLowWaterMark ({self.write_low_water}) must be > 0 and <= "
                             f"writeBufferHighWaterMark ({self.write_high_water})")
        for name, key in (("max_channel_busy", "serverChannelMaxBusyRequests"), ("max_busy", "serverMaxBusyRequests"),
                          ("max_channel_held", "max_channel_held")):
            if getattr(self, name) < 1:
                raise ValueError(f"{key} must be at least 1, got {getattr(self, name)}")
        if self.idle_timeout_s < 0:
            raise ValueError(f"serverChannelMaxIdleTimeSeconds must be >= 0, got {self.idle_timeout_s}")


# frames up to this size are read whole; longer ones in chunks of it, each counted in the unfinished frame budget
SMALL_FRAME = 64 << 10


class FrameBudget:
    """Bytes held in unfinished frames across connections."""

    def __init__(self, limit: int):
        self.limit = limit
        self.used = 0
        self._freed = asyncio.Event()

    async def take(self, n: int) -> None:
        while not self.try_take(n):
            self._freed.clear()
            await self._freed.wait()

    def try_take(self, n: int) -> bool:
        """take(n) when there is room now; False, with nothing taken, when it would wait."""
        if self.used and self.used + n > self.limit:
            return False
        self.used += n
        return True

    def give_back(self, n: int) -> None:
        if n:
            self.used -= n
            self._freed.set()
