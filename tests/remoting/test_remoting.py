"""RocketMQ's remoting frames over real sockets: both header encodings round-trip, answers come in the request's
encoding and by opaque, unknown codes get REQUEST_CODE_NOT_SUPPORTED, and malformed frames close their own
connection only while the server keeps serving the others."""
from __future__ import annotations

import asyncio
import json
import random
import socket
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from remoting import (
    FrameError,
    LanguageCode,
    RemotingClient,
    RemotingCommand,
    RemotingServer,
    RequestCode,
    ResponseCode,
    SerializeType,
)

texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)


@settings(max_examples=200, deadline=None)
@given(code=st.integers(-(2**15), 2**15 - 1), opaque=st.integers(-(2**31), 2**31 - 1), flag=st.integers(0, 3),
       remark=st.none() | texts, ext=st.dictionaries(texts, texts, max_size=5), body=st.binary(max_size=100),
       kind=st.sampled_from(list(SerializeType)))
def test_both_header_encodings_round_trip(code, opaque, flag, remark, ext, body, kind):
    cmd = RemotingCommand(code=code, opaque=opaque, flag=flag, remark=remark, ext_fields=ext, body=body,
                          language=LanguageCode.JAVA, version=399, serialize_type=kind)
    frame = cmd.encode()
    assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
    assert frame[4] == int(kind)  # the serialize type in the high byte of the header length
    back = RemotingCommand.decode(frame[4:])
    if kind == SerializeType.ROCKETMQ and remark == "":
        remark = None  # the binary header has no way to tell "" from absent
    assert (back.code, back.opaque, back.flag, back.remark, back.ext_fields, back.body, back.language,
            back.version, back.serialize_type) == (code, opaque, flag, remark, ext, body, LanguageCode.JAVA, 399,
                                                   kind)


def test_a_java_clients_json_header_with_numbers_and_booleans_in_ext_fields():
    header = json.dumps({"code": 105, "language": "JAVA", "version": 399, "opaque": 7, "flag": 0,
                         "extFields": {"topic": "T", "queueId": 3, "commitOffset": -1, "flag": False},
                         "serializeTypeCurrentRPC": "JSON"}).encode()
    cmd = RemotingCommand.decode(struct.pack(">I", len(header)) + header)
    assert cmd.ext_fields == {"topic": "T", "queueId": "3", "commitOffset": "-1", "flag": "false"}
    assert cmd.language == LanguageCode.JAVA and cmd.code == RequestCode.GET_ROUTEINFO_BY_TOPIC


@pytest.mark.parametrize("payload, reason", [
    (b"\x00\x00", "no header length"),
    (struct.pack(">I", 100) + b"{}", "runs past the frame"),
    (struct.pack(">I", 3) + b"{x}", "does not parse"),
    (struct.pack(">I", 2) + b"[]", "not an object"),
    (struct.pack(">I", 9) + b'{"code":1', "does not parse"),
    (struct.pack(">I", (7 << 24) | 2) + b"{}", "unknown serialize type"),
    (struct.pack(">I", 18) + b'{"code":"x","a":1}', "not an integer"),
    (struct.pack(">I", (1 << 24) | 5) + b"\x00\x01\x00\x00\x00", "does not decode"),
])
def test_undecodable_frames_say_why(payload, reason):
    with pytest.raises(FrameError, match=reason):
        RemotingCommand.decode(payload)


async def _echo(cmd: RemotingCommand, channel) -> RemotingCommand:
    return cmd.response(ResponseCode.SUCCESS, remark=f"from {channel.remote_address}", ext_fields=cmd.ext_fields,
                        body=cmd.body[::-1])


def test_requests_are_answered_by_opaque_in_their_own_encoding():
    async def main():
        async with RemotingServer() as server:
            server.register(RequestCode.HEART_BEAT, _echo)
            async with RemotingClient(server.address) as client:
                requests = [RemotingCommand.request(RequestCode.HEART_BEAT, {"i": i}, body=b"ab%d" % i,
                                                    serialize_type=SerializeType(i % 2)) for i in range(50)]
                answers = await asyncio.gather(*(client.invoke(r) for r in requests))
                for r, a in zip(requests, answers):
                    assert (a.opaque, a.code, a.is_response, a.serialize_type) == \
                        (r.opaque, ResponseCode.SUCCESS, True, r.serialize_type)
                    assert a.ext_fields == r.ext_fields and a.body == r.body[::-1]
                unknown = await client.invoke(RemotingCommand.request(9999))
                assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
                assert "request code 9999" in unknown.remark
                pull = await client.invoke(RemotingCommand.request(RequestCode.PULL_MESSAGE))
                assert "(PULL_MESSAGE) is not supported" in pull.remark
    asyncio.run(main())


def test_frames_cut_anywhere_across_reads_and_many_in_one_read_are_each_answered_once_in_order():
    """A client's bytes arrive in whatever pieces TCP makes: 60 requests (bodies up to 200 KiB, past the size read
    in one piece), written as one run in random pieces of 1 byte to 64 KiB, and again all in one write: every one
    is answered once, in order, with its own body."""
    rng = random.Random(5)
    bodies = [rng.randbytes(rng.choice([0, 1, 100, 4000, 70_000, 200_000])) for _ in range(60)]

    async def main():
        async with RemotingServer() as server:
            server.register(RequestCode.HEART_BEAT, _sync_echo)
            for pieces in (True, False):
                requests = [RemotingCommand.request(RequestCode.HEART_BEAT, {"i": i}, body=b) for i, b in
                            enumerate(bodies)]
                stream = b"".join(r.encode() for r in requests)
                reader, writer = await asyncio.open_connection(server.host, server.port)
                writer.transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

                async def write() -> None:
                    at = 0
                    while at < len(stream):
                        n = rng.choice([1, 2, 3, 7, 100, 4096, 65536]) if pieces else len(stream)
                        writer.write(stream[at:at + n])
                        await writer.drain()
                        at += n
                        if pieces and rng.random() < 0.3:
                            await asyncio.sleep(0.001)

                sending = asyncio.ensure_future(write())
                for r in requests:
                    length = struct.unpack(">i", await reader.readexactly(4))[0]
                    answer = RemotingCommand.decode(await reader.readexactly(length))
                    assert (answer.opaque, answer.code, answer.ext_fields) == (r.opaque, ResponseCode.SUCCESS,
                                                                               r.ext_fields)
                    assert answer.body == r.body[::-1]
                await sending
                writer.close()
    asyncio.run(main())


def _sync_echo(cmd: RemotingCommand, channel) -> RemotingCommand:
    return cmd.response(ResponseCode.SUCCESS, ext_fields=cmd.ext_fields, body=cmd.body[::-1])


def test_a_failing_processor_answers_system_error_and_the_server_goes_on():
    async def broken(cmd, channel):
        raise KeyError("queueId")

    async def main():
        async with RemotingServer() as server:
            server.register(RequestCode.PULL_MESSAGE, broken)
            server.register(RequestCode.HEART_BEAT, _echo)
            async with RemotingClient(server.address) as client:
                bad = await client.invoke(RemotingCommand.request(RequestCode.PULL_MESSAGE))
                assert bad.code == ResponseCode.SYSTEM_ERROR and "KeyError" in bad.remark
                ok = await client.invoke(RemotingCommand.request(RequestCode.HEART_BEAT))
                assert ok.code == ResponseCode.SUCCESS
    asyncio.run(main())


def test_malformed_frames_close_their_connection_only():
    """Random bytes, truncated frames, oversize lengths and headers that do not decode, over many connections:
    each closes its own connection; the server keeps answering a well-behaved client throughout."""
    rng = random.Random(17)

    def junk() -> bytes:
        kind = rng.randrange(5)
        if kind == 0:
            return rng.randbytes(rng.randrange(1, 200))
        if kind == 1:  # oversize length
            return struct.pack(">i", (16 << 20) + rng.randrange(1, 1000)) + b"x" * 10
        if kind == 2:  # negative length
            return struct.pack(">i", -rng.randrange(1, 100))
        if kind == 3:  # a header that does not parse
            header = rng.randbytes(rng.randrange(1, 50))
            return struct.pack(">iI", 4 + len(header), len(header)) + header
        good = RemotingCommand.request(RequestCode.HEART_BEAT).encode()  # truncated
        return good[:rng.randrange(1, len(good))]

    async def main():
        async with RemotingServer(max_frame=1 << 20) as server:
            server.register(RequestCode.HEART_BEAT, _echo)
            async with RemotingClient(server.address) as client:
                for round_ in range(20):
                    socks = []
                    for _ in range(25):
                        s = socket.create_connection((server.host, server.port))
                        s.sendall(junk())
                        s.shutdown(socket.SHUT_WR)
                        socks.append(s)
                    answer = await client.invoke(RemotingCommand.request(RequestCode.HEART_BEAT, {"r": round_}))
                    assert answer.code == ResponseCode.SUCCESS and answer.ext_fields == {"r": str(round_)}
                    await asyncio.sleep(0.01)
                    for s in socks:
                        s.close()
                await asyncio.sleep(0.1)
                assert len(server.channels) == 1  # only the good client is left
    asyncio.run(main())


def test_codes_carry_rocketmqs_names_and_numbers():
    assert [(c.name, c.value) for c in (RequestCode.QUERY_MESSAGE, RequestCode.END_TRANSACTION,
                                        RequestCode.GET_KVLIST_BY_NAMESPACE, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO,
                                        RequestCode.CONSUME_MESSAGE_DIRECTLY, RequestCode.POP_MESSAGE)] == \
        [("QUERY_MESSAGE", 12), ("END_TRANSACTION", 37), ("GET_KVLIST_BY_NAMESPACE", 219),
         ("QUERY_TOPIC_CONSUME_BY_WHO", 300), ("CONSUME_MESSAGE_DIRECTLY", 309), ("POP_MESSAGE", 200050)]
    assert [(c.name, c.value) for c in (ResponseCode.TRANSACTION_FAILED, ResponseCode.SUBSCRIPTION_NOT_LATEST,
                                        ResponseCode.NO_MESSAGE, ResponseCode.RPC_TIME_OUT)] == \
        [("TRANSACTION_FAILED", 4), ("SUBSCRIPTION_NOT_LATEST", 25), ("NO_MESSAGE", 208), ("RPC_TIME_OUT", -1006)]
    assert [c.name for c in LanguageCode][:4] == ["JAVA", "CPP", "DOTNET", "PYTHON"] and LanguageCode.NODE_JS == 13

    async def main():
        async with RemotingServer() as server, RemotingClient(server.address) as client:
            answer = await client.invoke(RemotingCommand.request(RequestCode.QUERY_MESSAGE))
            assert answer.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
            assert answer.remark == "request code 12 (QUERY_MESSAGE) is not supported"
    asyncio.run(main())


def test_a_lost_connection_fails_waiting_and_later_requests_at_once():
    async def never(cmd, channel):
        await asyncio.sleep(60)

    async def main():
        server = await RemotingServer().start()
        server.register(RequestCode.PULL_MESSAGE, never)
        client = await RemotingClient(server.address).connect()
        try:
            waiting = asyncio.ensure_future(client.invoke(RemotingCommand.request(RequestCode.PULL_MESSAGE), 30))
            await asyncio.sleep(0.1)
            await server.stop()
            with pytest.raises(ConnectionError, match="was lost"):
                await asyncio.wait_for(waiting, 5)
            with pytest.raises(ConnectionError, match="was lost"):
                await asyncio.wait_for(client.invoke(RemotingCommand.request(RequestCode.PULL_MESSAGE), 30), 5)
        finally:
            await client.close()
        with pytest.raises(ConnectionError, match="not connected"):
            await client.invoke(RemotingCommand.request(RequestCode.PULL_MESSAGE))
    asyncio.run(main())
