"""RemotingCommand: RocketMQ's frame, header and body.

A frame on the wire: a 4-byte big-endian length of what follows; 4 bytes holding the header's serialize type in
the high byte (0 JSON, 1 ROCKETMQ) and its length in the low three; the header; the body. The JSON header is
RemotingCommand's fields as fastjson writes them (language by name); the ROCKETMQ header is code i16, language
byte, version i16, opaque i32, flag i32, remark (i32 length + UTF-8), extFields (i32 length + per entry i16 key
length, key, i32 value length, value). A response is answered in the encoding of its request.
"""
from __future__ import annotations

import itertools
import json
import struct
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Optional

from .codes import LanguageCode

RESPONSE_FLAG = 0x1  # bit 0 of flag: a response
ONEWAY_FLAG = 0x2    # bit 1 of flag: a request that gets no response
DEFAULT_MAX_FRAME = 16 << 20

try:  # ~3x faster to decode a header and ~10x to encode one; json's own where it is missing or refuses
    import orjson
except ImportError:  # pragma: no cover - a dependency; kept optional
    orjson = None  # type: ignore[assignment]

try:  # the head written in one compiled call (remoting/_frame.c: encode_head), the same bytes as below
    from . import _frame  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - depends on the machine that installed us
    _frame = None

_opaques = itertools.count(1)
_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_JSON_DECODE = json.JSONDecoder().decode
_MARK = struct.Struct(">I")
# enum lookups by value or name are slow on a per-frame path: plain dicts
_LANGUAGE_NAMES: dict[int, str] = {m.value: m.name for m in LanguageCode}
_LANGUAGES: dict = {**{m.name: m for m in LanguageCode}, **{m.value: m for m in LanguageCode}}

# A command's body: bytes, or the bytearray a large body was received into (remoting/frame_receiver.py), handed on
# as it is rather than copied into bytes
Body = bytes | bytearray


class SerializeType(IntEnum):
    JSON = 0
    ROCKETMQ = 1


class FrameError(ValueError):
    """A frame or header that cannot be decoded; the connection it came on is closed."""


# The version every answer carries (RocketMQ's servers stamp MQVersion.CURRENT_VERSION on their responses): the Java
# client keeps it per broker from the heartbeat's answer and refuses to pull with SQL92 from a broker older than
# 4.1.0 (PullAPIWrapper.pullKernelImpl: "does not upgrade to support for filter message by SQL92").
SERVER_VERSION = 407  # MQVersion.Version.V4_9_7.ordinal()


@dataclass
class RemotingCommand:
    code: int
    opaque: int = 0
    flag: int = 0
    remark: Optional[str] = None
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: Body = b""  # or any bytes-like object (a pull's records gathered into a numpy buffer)
    language: int = LanguageCode.PYTHON
    version: int = 0
    serialize_type: SerializeType = SerializeType.JSON

    @classmethod
    def request(cls, code: int, ext_fields: Optional[dict] = None, body: Body = b"", oneway: bool = False,
                serialize_type: SerializeType = SerializeType.JSON) -> "RemotingCommand":
        return cls(code=int(code), opaque=next(_opaques), flag=ONEWAY_FLAG if oneway else 0,
                   ext_fields=_texts(ext_fields), body=body, serialize_type=serialize_type)

    def response(self, code: int, remark: Optional[str] = None, ext_fields: Optional[dict] = None,
                 body: Body = b"") -> "RemotingCommand":
        """The answer to this request: same opaque, the response flag, in the request's encoding."""
        return RemotingCommand(code=int(code), opaque=self.opaque, flag=RESPONSE_FLAG, remark=remark,
                               ext_fields=_texts(ext_fields), body=body, version=SERVER_VERSION,
                               serialize_type=self.serialize_type)

    @property
    def is_response(self) -> bool:
        return bool(self.flag & RESPONSE_FLAG)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & ONEWAY_FLAG)

    # -- encoding ------------------------------------------------------------------------------------------------

    def encode(self) -> bytes:
        """The whole frame, length prefix included."""
        head = self.encode_head()
        return head + self.body

    def encode_head(self) -> bytes:
        """The frame up to its body (length prefix, header length and type, header): a large body is written
        after it as it is, not copied into one buffer with it."""
        if _frame is not None:
            head = _frame.encode_head(int(self.serialize_type), self.code, int(self.language),
                                      _LANGUAGE_NAMES.get(self.language, "OTHER"), self.version, self.opaque, self.flag,
                                      self.remark, self.ext_fields, len(self.body))
            if head is not None:
                return head
        header = self._json_header() if self.serialize_type == SerializeType.JSON else self._binary_header()
        if len(header) >= 1 << 24:
            raise FrameError(f"header of {len(header)} bytes does not fit the 24-bit header length")
        return struct.pack(">iI", 4 + len(header) + len(self.body),
                           (int(self.serialize_type) << 24) | len(header)) + header

    def _json_header(self) -> bytes:
        language = _LANGUAGE_NAMES.get(self.language, "OTHER")
        obj: dict = {"code": self.code, "language": language, "version": self.version, "opaque": self.opaque,
                     "flag": self.flag, "serializeTypeCurrentRPC": "JSON"}
        if self.remark is not None:
            obj["remark"] = self.remark
        if self.ext_fields:
            obj["extFields"] = self.ext_fields
        if orjson is not None:
            try:
                return orjson.dumps(obj)  # the same bytes as json's (tests/remoting/test_json_headers.py)
            except TypeError:  # a lone surrogate, an int past 64 bits
                pass
        # a lone surrogate (JSON can escape one) becomes "?", as Java's String.getBytes does
        return _JSON.encode(obj).encode("utf-8", "replace")

    def _binary_header(self) -> bytes:
        remark = (self.remark or "").encode("utf-8", "replace")
        ext = b"".join(struct.pack(">h", len(k)) + k + struct.pack(">i", len(v)) + v
                       for k, v in ((k.encode("utf-8", "replace"), v.encode("utf-8", "replace"))
                                    for k, v in self.ext_fields.items()))
        return (struct.pack(">hbhii", self.code, int(self.language), self.version, self.opaque, self.flag)
                + struct.pack(">i", len(remark)) + remark + struct.pack(">i", len(ext)) + ext)

    # -- decoding ------------------------------------------------------------------------------------------------

    @classmethod
    def decode(cls, payload: bytes | bytearray) -> "RemotingCommand":
        """A frame's payload (what follows the 4-byte length)."""
        if len(payload) < 4:
            raise FrameError(f"a frame of {len(payload)} bytes has no header length")
        header_len = _MARK.unpack_from(payload, 0)[0] & 0xFFFFFF
        if 4 + header_len > len(payload):
            raise FrameError(f"header length {header_len} runs past the frame ({len(payload)} bytes)")
        cmd = cls.decode_header(payload, header_len)
        if 4 + header_len < len(payload):
            body = payload[4 + header_len:]
            cmd.body = body if type(body) is bytes else bytes(body)
        return cmd

    @classmethod
    def decode_header(cls, payload: bytes | bytearray | memoryview, header_len: int) -> "RemotingCommand":
        """The command whose header is payload[4:4 + header_len] (payload: a frame's payload, its header mark first,
        or that much of it), its body left empty: the caller attaches the body as it has it, without a copy."""
        kind = _MARK.unpack_from(payload, 0)[0] >> 24
        if kind == SerializeType.JSON:
            return cls._from_json(payload, header_len)
        if kind == SerializeType.ROCKETMQ:
            return cls._from_binary(bytes(payload[4:4 + header_len]))
        raise FrameError(f"unknown serialize type {kind}")

    @classmethod
    def _from_json(cls, payload: bytes | bytearray | memoryview, header_len: int) -> "RemotingCommand":
        raw = memoryview(payload)[4:4 + header_len]
        obj = _usual_header(raw)
        try:
            if obj is None:
                obj = _JSON_DECODE(str(raw, "utf-8"))
        except (ValueError, UnicodeDecodeError) as e:
            raise FrameError(f"the JSON header does not parse: {e}") from None
        except RecursionError:
            raise FrameError("the JSON header nests too deeply") from None
        if type(obj) is not dict:
            raise FrameError("the JSON header is not an object")
        ext = obj.get("extFields")
        if ext is None:
            ext = {}
        elif type(ext) is not dict:
            raise FrameError("extFields is not an object")
        elif set(map(type, ext.values())) - _STR:  # JSON's keys are strings; values are as clients sent them
            ext = _texts(ext)
        language = obj.get("language", "OTHER")
        lang = _LANGUAGES.get(language if type(language) in (str, int) else None, LanguageCode.OTHER)
        remark = obj.get("remark")
        code, opaque, flag, version = obj.get("code"), obj.get("opaque", 0), obj.get("flag", 0), obj.get("version", 0)
        if not (type(code) is int and type(opaque) is int and type(flag) is int and type(version) is int):
            code, opaque = _int(code, "code"), _int(opaque, "opaque")
            flag, version = _int(flag, "flag"), _int(version, "version")
        return cls(code, opaque, flag, None if remark is None else str(remark), ext, b"", lang, version,
                   SerializeType.JSON)

    @classmethod
    def _from_binary(cls, header: bytes) -> "RemotingCommand":
        try:
            code, language, version, opaque, flag = struct.unpack_from(">hbhii", header, 0)
            pos = 13
            (remark_len,) = struct.unpack_from(">i", header, pos)
            pos += 4
            if remark_len < 0 or pos + remark_len > len(header):
                raise FrameError(f"remark length {remark_len} runs past the header")
            remark = header[pos:pos + remark_len].decode("utf-8") if remark_len else None
            pos += remark_len
            (ext_len,) = struct.unpack_from(">i", header, pos)
            pos += 4
            if ext_len < 0 or pos + ext_len != len(header):
                raise FrameError(f"extFields length {ext_len} does not end the header")
            ext = {}
            while pos < len(header):
                (klen,) = struct.unpack_from(">h", header, pos)
                pos += 2
                key = header[pos:pos + klen]
                pos += klen
                (vlen,) = struct.unpack_from(">i", header, pos)
                pos += 4
                if klen < 0 or vlen < 0 or pos + vlen > len(header):
                    raise FrameError("an extFields entry runs past the header")
                ext[key.decode("utf-8")] = header[pos:pos + vlen].decode("utf-8")
                pos += vlen
        except (struct.error, UnicodeDecodeError) as e:
            raise FrameError(f"the ROCKETMQ header does not decode: {e}") from None
        return cls(code=code, opaque=opaque, flag=flag, remark=remark, ext_fields=ext, language=language,
                   version=version, serialize_type=SerializeType.ROCKETMQ)


_STR = {str}
_INT_FIELDS = ("code", "opaque", "flag", "version")


def _usual_header(raw: memoryview) -> Optional[dict]:
    """The usual JSON header (an object whose code, opaque, flag and version are ints, remark and language text,
    extFields texts) decoded by orjson; None for anything else, which json decodes: orjson refuses what
    json accepts (NaN, a lone surrogate) and reads an integer past 64 bits as a float."""
    if orjson is None:
        return None
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if type(obj) is not dict:
        return None
    get = obj.get
    for name in _INT_FIELDS:
        if type(get(name, 0)) is not int:
            return None
    if type(get("remark", "")) is not str or type(get("language", "")) is not str:
        return None
    ext = get("extFields")
    if ext is not None and (type(ext) is not dict or set(map(type, ext.values())) - _STR):
        return None
    return obj


def _texts(fields: Optional[dict]) -> dict[str, str]:
    """extFields as strings, null values left out; a map already all strings (the usual case) is copied whole."""
    if not fields:
        return {}
    if set(map(type, fields.values())) == _STR and set(map(type, fields)) == _STR:  # type checks at C speed
        return dict(fields)
    return {str(k): _text(v) for k, v in fields.items() if v is not None}


def _text(value) -> str:
    """extFields values travel as strings; clients send JSON numbers and booleans too."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):  # as fastjson turns a nested value into a String field: its JSON text
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return str(value)


def _int(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise FrameError(f"header field {name} is {value!r}, not an integer")
    try:
        return int(value)
    except ValueError:
        raise FrameError(f"header field {name} is {value!r}, not an integer") from None
