"""What the client receives, over real sockets on both event loops: a server's frames cut anywhere across reads
(pieces of 1 byte to 300 KB), many in one read, bodies from none to megabytes and headers longer than what is read
at once are each assembled whole, answers matched by opaque and the server's own requests handed to on_request in
order; a frame that cannot be read closes the connection and fails what waits on it."""
from __future__ import annotations

import asyncio
import random
import struct

import pytest

from remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode, SerializeType, event_loop
from remoting.frame_receiver import READ_AHEAD

LOOPS = [pytest.param(asyncio.new_event_loop, id="asyncio")]
if event_loop.name() == "uvloop":
    import uvloop

    LOOPS.append(pytest.param(uvloop.new_event_loop, id="uvloop"))

SIZES = [0, 1, 100, 4000, READ_AHEAD - 200, READ_AHEAD - 7, READ_AHEAD, 70_000, 300_000, 1_200_000, 3_000_000]


def run(factory, main) -> None:
    loop = factory()
    try:
        loop.run_until_complete(asyncio.wait_for(main(), 60))
    finally:
        loop.close()


async def _read_requests(reader: asyncio.StreamReader, n: int) -> list[RemotingCommand]:
    out = []
    for _ in range(n):
        (length,) = struct.unpack(">i", await reader.readexactly(4))
        out.append(RemotingCommand.decode(await reader.readexactly(length)))
    return out


async def _write_in_pieces(writer: asyncio.StreamWriter, stream: bytes, rng: random.Random, pieces: bool) -> None:
    at = 0
    while at < len(stream):
        n = rng.choice([1, 2, 3, 5, 7, 100, 4096, 65535, 65536, 65537, 300_000]) if pieces else len(stream)
        writer.write(stream[at:at + n])
        await writer.drain()
        at += n
        if pieces and rng.random() < 0.2:
            await asyncio.sleep(0.001)  # the client reads what came so far


@pytest.mark.parametrize("factory", LOOPS)
@pytest.mark.parametrize("pieces", [True, False], ids=["cut-anywhere", "one-write"])
def test_responses_and_requests_cut_anywhere_are_each_assembled_whole(factory, pieces):
    """60 answers (bodies of every size around the read-ahead, headers of either encoding, some with a remark
    longer than the read-ahead) in reverse order, 10 requests of the server's own among them, written as one run in
    random pieces and again in one write: each answer reaches its request with its own header and body, the
    requests reach on_request in the order sent."""
    rng = random.Random(11 if pieces else 12)

    async def main():
        requests = [RemotingCommand.request(RequestCode.PULL_MESSAGE, {"i": i},
                                            serialize_type=SerializeType(i % 2)) for i in range(60)]
        answers = {r.opaque: r.response(ResponseCode.SUCCESS,
                                        remark="r" * (READ_AHEAD + 5000) if i % 13 == 5 else f"answer {i}",
                                        ext_fields={"i": i, "n": rng.randrange(10**9)},
                                        body=rng.randbytes(rng.choice(SIZES)))
                   for i, r in enumerate(requests)}
        asks = [RemotingCommand.request(RequestCode.GET_CONSUMER_RUNNING_INFO, {"k": k},
                                        body=rng.randbytes(rng.choice(SIZES[:6] + [200_000])))
                for k in range(10)]
        served = asyncio.get_running_loop().create_future()

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            got = await _read_requests(reader, len(requests))
            frames = [answers[r.opaque].encode() for r in reversed(got)]
            for k, ask in enumerate(asks):
                frames.insert(6 * k + 1, ask.encode())
            await _write_in_pieces(writer, b"".join(frames), rng, pieces)
            served.set_result(None)
            await reader.read()  # until the client closes
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        told: list[RemotingCommand] = []
        async with server, RemotingClient(f"127.0.0.1:{port}") as client:
            async def on_request(cmd: RemotingCommand) -> None:
                await asyncio.sleep(0)
                told.append(cmd)
            client.on_request = on_request
            got = await client.invoke_many(requests, timeout=30)
            await served
            for _ in range(200):
                if len(told) == len(asks):
                    break
                await asyncio.sleep(0.01)
        for r, answer in zip(requests, got):
            want = answers[r.opaque]
            assert answer is not None, f"no answer to request {r.ext_fields}"
            assert (answer.opaque, answer.code, answer.remark, answer.ext_fields, answer.serialize_type) == \
                (r.opaque, ResponseCode.SUCCESS, want.remark, want.ext_fields, r.serialize_type)
            assert answer.body == want.body
        assert [(c.code, c.ext_fields, c.body) for c in told] == [(a.code, a.ext_fields, a.body) for a in asks]

    run(factory, main)


@pytest.mark.parametrize("factory", LOOPS)
@pytest.mark.parametrize("bad", [struct.pack(">i", (16 << 20) + 1), struct.pack(">i", 3),
                                 struct.pack(">iI", 10, 7) + b"{}" + b"\0" * 4],
                         ids=["over-max-frame", "under-4", "header-past-frame"])
def test_a_frame_that_cannot_be_read_closes_the_connection_and_fails_what_waits(factory, bad):
    """An answer, then bytes that are no frame: the first request is answered, the second fails at once with
    ConnectionError (not at its timeout), and so does a request made after."""
    async def main():
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            first, second = await _read_requests(reader, 2)
            writer.write(first.response(ResponseCode.SUCCESS, body=b"x" * 100_000).encode()[:-1])
            await writer.drain()
            await asyncio.sleep(0.05)  # the answer's last byte comes later, the bad bytes right after it
            writer.write(b"x" + bad)
            await reader.read()
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server, RemotingClient(f"127.0.0.1:{port}") as client:
            first = asyncio.ensure_future(client.invoke(RemotingCommand.request(RequestCode.PULL_MESSAGE), 30))
            second = asyncio.ensure_future(client.invoke(RemotingCommand.request(RequestCode.PULL_MESSAGE), 30))
            answer = await first
            assert answer.code == ResponseCode.SUCCESS and answer.body == b"x" * 100_000
            with pytest.raises(ConnectionError, match="was lost"):
                await asyncio.wait_for(second, 10)
            with pytest.raises(ConnectionError, match="was lost"):
                await client.invoke(RemotingCommand.request(RequestCode.PULL_MESSAGE))
            await client.close()  # closed twice: the second does nothing more

    run(factory, main)


@pytest.mark.parametrize("factory", LOOPS)
def test_writing_past_the_high_water_mark_waits_for_the_server_to_read(factory):
    """32 oneway requests of 1 MiB written while the server reads nothing: the writer waits (what it has not sent
    stays bounded) until the server reads, and then every request arrives whole and in order."""
    bodies = [random.Random(i).randbytes(1 << 20) for i in range(32)]

    async def main():
        reading = asyncio.Event()
        got: list[RemotingCommand] = []

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reading.wait()
            got.extend(await _read_requests(reader, len(bodies)))
            await reader.read()
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server, RemotingClient(f"127.0.0.1:{port}") as client:
            async def send() -> None:
                for i, body in enumerate(bodies):
                    await client.invoke_oneway(RemotingCommand.request(RequestCode.SEND_MESSAGE, {"i": i}, body=body,
                                                                       oneway=True))
            sending = asyncio.ensure_future(send())
            await asyncio.sleep(0.5)
            assert not sending.done()  # waiting for the server to take what was written
            reading.set()
            await asyncio.wait_for(sending, 30)
            for _ in range(300):
                if len(got) == len(bodies):
                    break
                await asyncio.sleep(0.01)
        assert [(c.ext_fields["i"], c.body) for c in got] == [(str(i), b) for i, b in enumerate(bodies)]

    run(factory, main)
