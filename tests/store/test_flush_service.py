"""The broker's flush thread (store/flush_service.py): the once-a-second fsync and checkpoint stamp of an
ASYNC_FLUSH store happen off the appending thread, the checkpoint is stamped with what was appended before the
round, and close() stops the thread and stamps the rest itself."""
import time

from store import MessageStore
from store.store_checkpoint import StoreCheckpoint


def _on_disk(path) -> StoreCheckpoint:
    cp = StoreCheckpoint(str(path / "checkpoint"), writable=False)
    return cp


def test_flush_thread_stamps_the_checkpoint_and_close_stamps_the_rest(tmp_path):
    store = MessageStore(tmp_path / "s")
    store.start_flush_service()
    service = store._flush_service
    first = store.put("T", b"one", queue_id=0)
    deadline = time.monotonic() + 30
    while service.flushes < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert service.flushes >= 1
    flushed = _on_disk(tmp_path / "s").read_flushed_offset()
    assert flushed is not None and flushed > first.commit_log_offset  # the first record is covered
    second = store.put_batch("T", [b"two"] * 10, queue_id=1)  # within the second: left for the next round
    store.close()
    assert not service._thread.is_alive()
    assert _on_disk(tmp_path / "s").read_flushed_offset() > int(second.commit_log_offsets[-1])
    with MessageStore(tmp_path / "s", read_only=True) as reopened:
        assert reopened.get_message("g", "T", 1, 0, 32).messages[9].body == b"two"
