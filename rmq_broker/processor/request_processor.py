"""What every processor shares (RocketMQ's NettyRequestProcessor): the request codes it serves, each with the
typed header it is read through, one dispatch, and the executor it may be given at registration
(`Broker.register_processor(processor, executor)`, as RocketMQ's registerProcessor(code, processor, executor)).

A handler is `async def name(self, header, cmd, channel)`, marked `@handles(RequestCode.X, XRequestHeader)`, or a
plain `def` that answers at once when it can and returns an awaitable of its answer when it must wait (the hot
pull and send: no task is made for a request answered at once). The dispatch reads the header (HeaderFieldError,
answered SYSTEM_ERROR naming the field, when a field is missing or malformed) and a handler refuses a request by
raising BadRequest with the RocketMQ code and a remark."""
from __future__ import annotations

import asyncio
from concurrent.futures import Executor
from typing import Any, Awaitable, Callable, Mapping, Optional, Union

from remoting import CommandHeader, RemotingCommand

# a header class, or a reader for a request whose header has two forms (the send's V2): (code, ext fields) -> header
HeaderReader = Union[type[CommandHeader], Callable[[int, Mapping[str, str]], Any], None]
Handler = Callable[..., Awaitable[Optional[RemotingCommand]]]
_HANDLES = "_rmq_handles"


def handles(*codes: int, header: HeaderReader = None) -> Callable[[Handler], Handler]:
    """Marks a processor method as the handler of these request codes, read through `header` (None: the request
    has only a body)."""
    def mark(method: Handler) -> Handler:
        setattr(method, _HANDLES, (codes, header))
        return method
    return mark


def read_header(reader: HeaderReader, cmd: RemotingCommand) -> Any:
    if reader is None:
        return None
    if isinstance(reader, type) and issubclass(reader, CommandHeader):
        return reader.from_ext_fields(cmd.ext_fields)
    return reader(cmd.code, cmd.ext_fields)  # type: ignore[call-arg]


class RequestProcessor:
    """A family of requests; subclasses mark their handlers with @handles."""

    executor: Optional[Executor] = None

    def __init__(self) -> None:
        self._handlers: dict[int, tuple[Handler, HeaderReader]] = {}
        for name in dir(type(self)):
            marked = getattr(getattr(type(self), name), _HANDLES, None)
            if marked is not None:
                codes, reader = marked
                for code in codes:
                    self._handlers[code] = (getattr(self, name), reader)

    @property
    def codes(self) -> list[int]:
        return sorted(self._handlers)

    def header_of(self, code: int) -> HeaderReader:
        return self._handlers[code][1]

    def process_request(self, cmd: RemotingCommand, channel, header: Any = None) -> Any:
        """The handler's answer: at once (a RemotingCommand or None) from a plain handler that had it, else an
        awaitable of it (every `async def` handler, and a plain one that must wait). header: the request's typed
        header read already (remoting.request_frame), else read here."""
        handler, reader = self._handlers[cmd.code]
        return handler(read_header(reader, cmd) if header is None else header, cmd, channel)

    async def blocking(self, fn: Callable[..., Any], *args: Any) -> Any:
        """fn(*args) in the processor's executor when it was given one, else here on the event loop (a store
        call that takes well under a millisecond)."""
        if self.executor is None:
            return fn(*args)
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)
