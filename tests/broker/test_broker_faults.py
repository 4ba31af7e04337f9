"""Faults around the broker: SIGKILL while clients send with SYNC_FLUSH (every SEND_OK survives a restart and is
consumed), a client that disconnects while its pull is held (nothing left behind), and 1,000 idle connections
(the others are still served)."""
from __future__ import annotations

import asyncio
import resource
import signal
import struct

from broker_testkit import pull, records, send, serve_process, stop_process

from remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from rmq_broker import Broker
from store import MessageStore


def test_every_send_ok_survives_a_sigkill_under_sync_flush(tmp_path):
    acked: list[bytes] = []
    proc, addresses = serve_process(tmp_path, "flushDiskType = SYNC_FLUSH\n")
    try:
        async def senders() -> None:
            async def one(sender: int) -> None:
                async with RemotingClient(addresses["broker"]) as client:
                    for i in range(100_000):
                        body = b"s%d-%d" % (sender, i)
                        try:
                            r = await client.invoke(send("Durable", body, queue_id=-1), timeout=5)
                        except (ConnectionError, TimeoutError):
                            return  # the broker is gone: this send was never acknowledged
                        if r.code == ResponseCode.SUCCESS:
                            acked.append(body)

            async def kill_soon() -> None:
                while len(acked) < 1500:
                    await asyncio.sleep(0.01)
                proc.send_signal(signal.SIGKILL)  # mid-stream: sends are in flight
            await asyncio.gather(*(one(s) for s in range(4)), kill_soon())
        asyncio.run(senders())
    finally:
        stop_process(proc)
    assert proc.returncode == -signal.SIGKILL and len(acked) >= 1500

    proc, addresses = serve_process(tmp_path, "flushDiskType = SYNC_FLUSH\n")  # the restart recovers the store
    try:
        async def consume() -> list[bytes]:
            got: list[bytes] = []
            async with RemotingClient(addresses["broker"]) as client:
                for q in range(4):
                    offset = 0
                    while True:
                        r = await client.invoke(pull("Durable", offset, queue_id=q))
                        if r.code != ResponseCode.SUCCESS:
                            break
                        got += [m.body for m in records(r.body)]
                        offset = int(r.ext_fields["nextBeginOffset"])
            return got
        consumed = asyncio.run(consume())
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        stop_process(proc)
    missing = set(acked) - set(consumed)
    assert not missing, f"{len(missing)} acknowledged sends lost, e.g. {sorted(missing)[:3]}"
    assert len(consumed) == len(set(consumed))  # nothing twice
    print(f"SIGKILL under SYNC_FLUSH: {len(acked)} acknowledged, {len(consumed)} consumed after the restart")


def test_a_client_that_disconnects_while_its_pull_is_held_leaves_nothing_behind(tmp_path):
    async def main():
        async with Broker(tmp_path / "s", "127.0.0.1:0") as b:
            async with RemotingClient(b.address) as client:
                await client.invoke(send("T", b"one"))
                for q in range(4):
                    client._check_open()  # a held pull per queue, then the connection goes away
                    asyncio.ensure_future(client.invoke(pull("T", 1 if q == 0 else 0, queue_id=q,
                                                             suspend_ms=30_000), timeout=60))
                await asyncio.sleep(0.3)
                assert b.hold.held == 4 and len(b.server.channels) == 1
            for _ in range(50):
                if b.hold.held == 0 and not b.server.channels:
                    break
                await asyncio.sleep(0.05)
            assert b.hold.held == 0 and not b.server.channels and not b.server._tasks
            async with RemotingClient(b.address) as client:  # and the next message is for whoever asks next
                await client.invoke(send("T", b"two", queue_id=0))
                r = await client.invoke(pull("T", 1))
                assert [m.body for m in records(r.body)] == [b"two"]
    asyncio.run(main())


def test_a_thousand_idle_connections_do_not_stop_the_others_being_served(tmp_path):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    proc, addresses = serve_process(tmp_path, "")
    try:
        async def main():
            host, _, port = addresses["broker"].rpartition(":")
            idle = [await asyncio.open_connection(host, int(port)) for _ in range(1000)]
            try:
                async with RemotingClient(addresses["broker"]) as client:
                    for i in range(200):
                        assert (await client.invoke(send("T", b"%d" % i, queue_id=0))).code == ResponseCode.SUCCESS
                    r = await client.invoke(RemotingCommand.request(RequestCode.GET_MAX_OFFSET,
                                                                    {"topic": "T", "queueId": 0}))
                    assert r.ext_fields["offset"] == "200"
                # the idle ones are still open and served when they speak
                for _, w in idle[::100]:
                    w.write(RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": "T", "queueId": 0}).encode())
                for r_, _ in idle[::100]:
                    (length,) = struct.unpack(">i", await asyncio.wait_for(r_.readexactly(4), 10))
                    assert RemotingCommand.decode(await r_.readexactly(length)).ext_fields["offset"] == "200"
            finally:
                for _, w in idle:
                    w.close()
        asyncio.run(main())
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) == 0
        stop_process(proc)
    with MessageStore(tmp_path / "s", read_only=True) as s:
        assert s.max_offset("T", 0) == 200
