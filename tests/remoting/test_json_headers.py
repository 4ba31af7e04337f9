"""RocketMQ's JSON frame headers read and written through orjson (remoting/remoting_command.py) exactly as through
Python's json: the same bytes written for every header, the same command read from every header text, and the same
error for every header json refuses; what orjson refuses or reads otherwise (NaN, a lone surrogate, an integer past
64 bits, a number where text belongs) is read by json."""
from __future__ import annotations

import json
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import remoting.remoting_command as rc
from remoting import FrameError, RemotingCommand

text = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x2FFFF), max_size=20)
i32 = st.integers(-2**31, 2**31 - 1)


def _with_json_only(f):
    with pytest.MonkeyPatch.context() as m:
        m.setattr(rc, "orjson", None)
        return f()


def _payload(header: bytes) -> bytes:
    return struct.pack(">I", len(header)) + header


def _read(payload: bytes):
    try:
        cmd = RemotingCommand.decode(payload)
    except FrameError as e:
        return ("error", str(e))
    return (cmd.code, cmd.opaque, cmd.flag, cmd.remark, cmd.ext_fields, cmd.language, cmd.version, cmd.body)


@settings(max_examples=300, deadline=None)
@given(code=i32, opaque=i32, remark=st.none() | text, ext=st.dictionaries(text, text, max_size=6))
def test_a_header_is_written_as_json_writes_it(code, opaque, remark, ext):
    cmd = RemotingCommand(code, opaque, 1, remark, ext, b"body", version=407)
    assert rc.orjson is not None
    assert cmd.encode() == _with_json_only(cmd.encode)


def test_a_header_json_alone_can_write_is_written_as_before():
    cmd = RemotingCommand(0, 1, 1, "lone \ud800 surrogate", {"k": "\udfff"}, version=2**70)
    written = cmd.encode()
    assert written == _with_json_only(cmd.encode)
    assert b"lone ? surrogate" in written and str(2**70).encode() in written


@settings(max_examples=300, deadline=None)
@given(code=i32, opaque=i32, flag=i32, remark=st.none() | text, ext=st.dictionaries(text, text, max_size=6),
       ascii_only=st.booleans())
def test_a_header_text_is_read_as_json_reads_it(code, opaque, flag, remark, ext, ascii_only):
    obj = {"code": code, "language": "JAVA", "opaque": opaque, "flag": flag, "version": 407, "extFields": ext}
    if remark is not None:
        obj["remark"] = remark
    payload = _payload(json.dumps(obj, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass"))
    assert _read(payload) == _with_json_only(lambda: _read(payload))


@pytest.mark.parametrize("header", [
    b'{"code":1e400,"opaque":1}',  # json: inf
    b'{"code":NaN,"opaque":1}',
    b'{"code":123456789012345678901234567890,"opaque":1}',  # orjson: a float
    b'{"code":10,"opaque":1,"remark":"\\ud800"}',  # a lone surrogate
    b'{"code":10,"opaque":1,"remark":12}',
    b'{"code":10,"opaque":1,"language":3}',
    b'{"code":10,"opaque":1,"extFields":{"a":1,"b":null,"c":123456789012345678901234567890}}',
    b'{"code":10,"opaque":1,"extFields":[]}',
    b'{"code":"10","opaque":1}',
    b'[1,2]',
    b'{"code":10,"opaque":1,"flag":1.5}',
    b'{"code":10,',
    b'{"code":10,"opaque":1} trailing',
    b'{"code":10,"opaque":1,"remark":"\xff"}',  # not UTF-8
])
def test_what_orjson_refuses_or_reads_otherwise_is_read_by_json(header):
    payload = _payload(header)
    assert _read(payload) == _with_json_only(lambda: _read(payload))
