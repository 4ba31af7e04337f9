"""The hottest requests' frames in compiled code (remoting/_frame.c): a send (SEND_MESSAGE, SEND_MESSAGE_V2,
SEND_BATCH_MESSAGE) or a pull (PULL_MESSAGE) read straight into its typed header, and SEND_OK written straight
into its frame, without RemotingCommand's general decode and encode (a large part of such a request's cost in the
broker besides the store). Each gives None for what it does not take, and the caller then uses the general path;
without the compiled module both always do."""
from __future__ import annotations

import logging
from typing import Optional

from .broker_headers import PullMessageRequestHeader, SendMessageRequestHeader
from .codes import LanguageCode, RequestCode
from .command_header import CommandHeader
from .remoting_command import _LANGUAGE_NAMES, _LANGUAGES, SERVER_VERSION, RemotingCommand, SerializeType

log = logging.getLogger(__name__)

try:
    from . import _frame  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - depends on the machine that installed us
    _frame = None
    log.warning("remoting._frame is not built; sends and pulls are read through the general decoder")

COMPILED = _frame is not None
_SERIALIZE_TYPES = (SerializeType.JSON, SerializeType.ROCKETMQ)
_HEADERS: dict[int, type[CommandHeader]] = {RequestCode.SEND_MESSAGE: SendMessageRequestHeader,
                                            RequestCode.SEND_MESSAGE_V2: SendMessageRequestHeader,
                                            RequestCode.SEND_BATCH_MESSAGE: SendMessageRequestHeader,
                                            RequestCode.PULL_MESSAGE: PullMessageRequestHeader}
# what RemotingCommand.response stamps on an answer
_ANSWER_LANGUAGE = LanguageCode.PYTHON
_ANSWER_LANGUAGE_NAME = _LANGUAGE_NAMES[_ANSWER_LANGUAGE]


def read_request(payload) -> Optional[tuple[RemotingCommand, CommandHeader]]:
    """A frame's payload (what follows its length) when it is a send or a pull with the usual header: the
    request (its body, no ext_fields: its header is the second item) and its typed header, as the general decode
    and read_header read them; else None."""
    if _frame is None:
        return None
    read = _frame.read_request(payload)
    if read is None:
        return None
    code, opaque, serialize_type, language, version, fields, body_start = read
    body = payload[body_start:] if body_start < len(payload) else b""
    if type(body) is not bytes:
        body = bytes(body)
    if serialize_type == SerializeType.JSON:  # by name (or number); the ROCKETMQ header's byte as it came
        language = _LANGUAGES.get(language, LanguageCode.OTHER) if language is not None else LanguageCode.OTHER
    cmd = RemotingCommand(code, opaque, 0, None, {}, body, language, version, _SERIALIZE_TYPES[serialize_type])
    return cmd, _HEADERS[code](*fields)


def send_ok(cmd: RemotingCommand, msg_id: str, queue_id: int, queue_offset: int) -> Optional[bytes]:
    """SEND_OK's frame for cmd (what cmd.response(SUCCESS, ext_fields=SendMessageResponseHeader's and the region's)
    encodes to), or None when it needs the general encoder."""
    if _frame is None:
        return None
    return _frame.send_ok(int(cmd.serialize_type), cmd.opaque, msg_id, queue_id, queue_offset, _ANSWER_LANGUAGE_NAME,
                          int(_ANSWER_LANGUAGE), SERVER_VERSION)
