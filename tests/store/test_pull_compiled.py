"""The broker's usual pull is decided and gathered in one compiled pass (store/get_message.py _pull_compiled,
_native.pull_records); the numpy path stays for everything else. Both must answer every pull alike: the same
status, the same next offset and the same bytes, over commitlog files that end between a pull's records, byte
and count caps, tag filters and the queue's end; and a record that does not match its unit is refused, never
sent."""
import numpy as np
import pytest
from python_kernels import use_python_kernels

from filters import MessageFilter
from rmq_common import native as store_native
from store import MessageStore, StoreConfig, StoreError

CFG = StoreConfig(mappedFileSizeCommitLog=16 * 1024, maxTransferBytesOnMessageInMemory=3000,
                  maxTransferCountOnMessageInMemory=40)


def _fill(store):
    # sixty batches of random sizes (not tests/store_fill.py's one batch), so pulls meet files' ends anywhere
    rng = np.random.default_rng(7)
    for i in range(60):
        n = int(rng.integers(1, 12))
        bodies = [bytes(rng.integers(65, 90, int(rng.integers(1, 400)), dtype=np.uint8)) for _ in range(n)]
        tags = [("A", "B", "C")[int(rng.integers(0, 3))] for _ in range(n)]
        store.put_batch("T", bodies, tags=tags, queue_id=i % 3)


def _answers(store, flt, max_msgs):
    out = []
    for q in range(3):
        end = store.max_offset("T", q)
        for offset in range(0, end + 2):
            result, body = store.get_message_records("T", q, offset, max_msgs, flt)
            out.append((q, offset, result.status, result.next_begin_offset,
                        None if body is None else bytes(body)))
    return out


@pytest.mark.parametrize("selector", [None, "A", "B || C"])
def test_the_compiled_pull_answers_as_the_numpy_path(tmp_path, monkeypatch, selector):
    flt = None if selector is None else MessageFilter.by_tags(selector)
    with MessageStore(tmp_path / "s", config=CFG) as store:
        _fill(store)
        assert len(store.commit_log.files.files) > 3  # pulls meet files' ends
        calls = []
        real = store_native.pull_records
        monkeypatch.setattr(store_native, "pull_records", lambda *a: calls.append(1) or real(*a))
        compiled = {m: _answers(store, flt, m) for m in (1, 7, 32, 100)}
        assert calls  # the compiled pass answered
        use_python_kernels(monkeypatch)  # the numpy path, and numpy's gather
        for m, answers in compiled.items():
            assert answers == _answers(store, flt, m), m
        found = [a for a in compiled[32] if a[4] is not None]
        assert found and max(len(a[4]) for a in found) <= 3000 + 400  # the byte cap held


def test_a_record_that_does_not_match_its_unit_is_refused(tmp_path):
    with MessageStore(tmp_path / "s") as store:
        store.put_batch("T", [b"one", b"two", b"three"], queue_id=0)
        second = int(store.consume_queue("T", 0).units(1, 2)["offset"][0])
    with open(tmp_path / "s" / "commitlog" / f"{0:020d}", "r+b") as f:
        f.seek(second)
        f.write(b"\x00\x00\x00\x07")  # its TOTALSIZE torn
    with MessageStore(tmp_path / "s", read_only=True) as store:
        with pytest.raises(StoreError, match="does not match its consume-queue unit"):
            store.get_message_records("T", 0, 0, 32)
        result, body = store.get_message_records("T", 0, 0, 1)  # the first record alone is whole
        assert bytes(body).count(b"one") == 1 and result.next_begin_offset == 1
