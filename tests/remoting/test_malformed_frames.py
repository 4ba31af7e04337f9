"""Whatever arrives, a frame either decodes or raises FrameError; over real sockets, generated malformed frames
(random bytes, lying lengths, oversize frames, headers that do not parse or hold the wrong types, unknown codes)
close only their own connection while a well-behaved client on another connection keeps being answered. Also
the blocking client: answers, oneway requests, timeouts naming the request."""
from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from remoting import (
    FrameError,
    RemotingCommand,
    RemotingServer,
    RemotingTimeoutError,
    RequestCode,
    ResponseCode,
    SerializeType,
)
from remoting.blocking_client import BlockingRemotingClient

MAX_FRAME = 1 << 20

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=8)
header_fields = st.sampled_from(["code", "language", "version", "opaque", "flag", "remark", "extFields",
                                 "serializeTypeCurrentRPC"])


def frame(header: bytes, kind: int = 0, body: bytes = b"") -> bytes:
    return struct.pack(">iI", 4 + len(header) + len(body), (kind << 24) | len(header)) + header + body


@st.composite
def json_header_frames(draw) -> bytes:
    obj = draw(st.dictionaries(header_fields, json_values, max_size=8))
    return frame(json.dumps(obj).encode(), 0, draw(st.binary(max_size=20)))


@st.composite
def binary_header_frames(draw) -> bytes:
    """A ROCKETMQ header whose remark and extFields lengths may lie."""
    remark = draw(st.binary(max_size=10))
    ext = draw(st.binary(max_size=30))
    header = struct.pack(">hbhii", draw(st.integers(-(2**15), 2**15 - 1)), draw(st.integers(-128, 127)), 0,
                         draw(st.integers(-(2**31), 2**31 - 1)), draw(st.integers(0, 3)))
    header += struct.pack(">i", draw(st.sampled_from([len(remark), -1, len(remark) + 5, 2**31 - 1]))) + remark
    header += struct.pack(">i", draw(st.sampled_from([len(ext), -2, len(ext) + 1, 0]))) + ext
    return frame(header[:draw(st.integers(0, len(header)))] if draw(st.booleans()) else header, 1)


def good_frame(code: int = RequestCode.HEART_BEAT) -> bytes:
    return RemotingCommand.request(code, {"a": "1"}, body=b"xy").encode()


malformed = st.one_of(
    st.binary(min_size=1, max_size=200),
    st.integers(MAX_FRAME + 1, 2**31 - 1).map(lambda n: struct.pack(">i", n) + b"\0" * 16),  # oversize
    st.integers(-(2**31), 3).map(lambda n: struct.pack(">i", n)),  # a length below the minimum
    st.integers(0, 2**24 - 1).map(lambda n: struct.pack(">iI", 8, n) + b"{}\0\0"),  # header past the frame
    st.integers(2, 255).map(lambda k: frame(b"{}", k)),  # an unknown serialize type
    st.binary(max_size=50).map(frame),  # a JSON header that does not parse
    json_header_frames(),
    binary_header_frames(),
    st.integers(1, 40).map(lambda n: good_frame()[:n]),  # truncated
    st.integers(400, 2**15 - 1).map(good_frame),  # a well-formed request with a code nobody serves
)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=300) | malformed.map(lambda f: f[4:]))
def test_a_payload_decodes_or_raises_frame_error(payload):
    try:
        cmd = RemotingCommand.decode(payload)
    except FrameError:
        return
    cmd.response(ResponseCode.SUCCESS, cmd.remark, cmd.ext_fields, cmd.body).encode()  # an answer always encodes


@contextlib.contextmanager
def server_in_thread(server: RemotingServer):
    """The server on its own event loop, so the test can drive plain blocking sockets against it."""
    loop = asyncio.new_event_loop()
    started = threading.Event()

    def run():
        asyncio.set_event_loop(loop)
        loop.run_until_complete(server.start())
        started.set()
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert started.wait(10)
    try:
        yield server
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


async def echo(cmd: RemotingCommand, channel) -> RemotingCommand:
    return cmd.response(ResponseCode.SUCCESS, ext_fields=cmd.ext_fields, body=cmd.body)


@pytest.fixture(scope="module")
def served():
    server = RemotingServer(max_frame=MAX_FRAME)
    server.register(RequestCode.HEART_BEAT, echo)
    with server_in_thread(server), BlockingRemotingClient(server.address) as client:
        yield server, client


def _read_answer(sock: socket.socket) -> RemotingCommand | None:
    """The answer to a well-formed request, or None if the server closed the connection first."""
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except (ConnectionError, socket.timeout):
            return None
        if not chunk:
            return None
        data += chunk
        if len(data) >= 4 and len(data) >= 4 + struct.unpack(">i", data[:4])[0]:
            return RemotingCommand.decode(data[4:4 + struct.unpack(">i", data[:4])[0]])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(frames=st.lists(malformed, min_size=1, max_size=6), round_=st.integers(0, 10**6))
def test_malformed_frames_close_only_their_connection(served, frames, round_):
    server, client = served
    socks = []
    for junk in frames:
        s = socket.create_connection((server.host, server.port), timeout=5)
        s.sendall(junk)
        socks.append((s, junk))
    answer = client.invoke(RemotingCommand.request(RequestCode.HEART_BEAT, {"round": round_}, body=b"b"))
    assert (answer.code, answer.ext_fields, answer.body) == (ResponseCode.SUCCESS, {"round": str(round_)}, b"b")
    for s, junk in socks:
        s.shutdown(socket.SHUT_WR)
        got = _read_answer(s)
        try:
            sent = RemotingCommand.decode(junk[4:]) if len(junk) >= 8 and \
                struct.unpack(">i", junk[:4])[0] == len(junk) - 4 else None
        except FrameError:
            sent = None
        if sent is not None and not sent.is_response and not sent.is_oneway:
            # a frame that did decode gets the answer a RocketMQ server gives: by code, same opaque
            assert got is not None and got.opaque == sent.opaque and got.is_response
            assert got.code in (ResponseCode.SUCCESS, ResponseCode.REQUEST_CODE_NOT_SUPPORTED)
        s.close()


def test_after_the_storm_only_the_good_client_is_connected(served):
    server, client = served
    deadline = time.monotonic() + 10
    while len(server.channels) > 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(server.channels) == 1
    assert client.invoke(RemotingCommand.request(RequestCode.HEART_BEAT)).code == ResponseCode.SUCCESS


def test_the_blocking_client_answers_oneway_and_timeouts():
    heard = threading.Event()

    async def silent(cmd, channel):
        await asyncio.sleep(30)

    async def note(cmd, channel):
        heard.set()
        return cmd.response(ResponseCode.SUCCESS)  # dropped: a oneway request gets no answer

    server = RemotingServer()
    server.register(RequestCode.PULL_MESSAGE, silent)
    server.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, note)
    server.register(RequestCode.HEART_BEAT, echo)
    with server_in_thread(server), BlockingRemotingClient(server.address) as client:
        binary = RemotingCommand.request(RequestCode.HEART_BEAT, {"k": "v"}, serialize_type=SerializeType.ROCKETMQ)
        answer = client.invoke(binary)
        assert (answer.serialize_type, answer.ext_fields) == (SerializeType.ROCKETMQ, {"k": "v"})
        client.invoke_oneway(RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, oneway=True))
        assert heard.wait(5)
        t0 = time.monotonic()
        with pytest.raises(RemotingTimeoutError, match=r"no response to request code 11 .* within 0.3 s"):
            client.invoke(RemotingCommand.request(RequestCode.PULL_MESSAGE), timeout=0.3)
        assert time.monotonic() - t0 < 3
        assert client.invoke(RemotingCommand.request(RequestCode.HEART_BEAT)).code == ResponseCode.SUCCESS
    with pytest.raises(ConnectionError, match="closed"):
        client.invoke(RemotingCommand.request(RequestCode.HEART_BEAT))
    with pytest.raises(OSError):
        BlockingRemotingClient(server.address, connect_timeout=2)  # stopped: nothing listens there now
