"""SYNC_FLUSH single sends share their fsyncs (rmq_broker/group_commit_service.py, MessageStore.sync_to): a SEND_OK
goes out only once an fsync that started after its record was written has finished, and concurrent sends are
covered by fewer fsyncs than sends."""
from __future__ import annotations

import asyncio
import threading

from broker_testkit import send

from remoting import RemotingClient, ResponseCode
from rmq_broker import Broker
from store import MessageStore, StoreConfig, append


def _counting_fsyncs(monkeypatch) -> list:
    """The paths the group commit fsyncs, in order."""
    done: list = []
    real = append.fsync_path
    lock = threading.Lock()

    def counted(path):
        real(path)
        with lock:
            done.append(path)
    monkeypatch.setattr(append, "fsync_path", counted)
    return done


def test_deferred_appends_are_durable_once_sync_to_returns(tmp_path, monkeypatch):
    fsyncs = _counting_fsyncs(monkeypatch)
    with MessageStore(tmp_path / "s", StoreConfig(flushDiskType="SYNC_FLUSH")) as store:
        results = [store.put("T", b"m%d" % i, queue_id=0, defer_flush=True) for i in range(5)]
        last = results[-1].commit_log_offset + 1
        assert store.synced_end < last and not fsyncs  # written, not yet fsynced
        assert store.sync_to(last) >= last
        assert len(fsyncs) == 1  # one fsync of the commitlog file for the five
        store.sync_to(last)
        assert len(fsyncs) == 1  # nothing new to flush
        plain = store.put("T", b"own fsync", queue_id=0)  # not deferred: fsynced by the append itself
        assert store.sync_to(plain.commit_log_offset + 1) > plain.commit_log_offset and len(fsyncs) == 1


def test_sync_flush_send_ok_after_a_covering_fsync(tmp_path, monkeypatch):
    fsyncs = _counting_fsyncs(monkeypatch)

    async def main():
        async with Broker(tmp_path / "b", "127.0.0.1:0", config=StoreConfig(flushDiskType="SYNC_FLUSH")) as b:
            assert b.group_commit is not None
            async with RemotingClient(b.address) as c:
                answers = await asyncio.gather(*(c.invoke(send("T", b"x%d" % i, queue_id=i % 4))
                                                 for i in range(64)))
                assert all(a.code == ResponseCode.SUCCESS for a in answers)
                ends = [int(a.ext_fields["msgId"][-16:], 16) + 1 for a in answers]
                assert b.store.synced_end >= max(ends)
        return len(fsyncs)

    flushes = asyncio.run(main())
    assert 1 <= flushes < 64
