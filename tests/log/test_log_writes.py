"""A MessageLog's two-phase writes (MessageLog.writes: stage in tasks, commit or abort on the driver), the same on a
store directory and on a real broker (`rmq serve`): staged rows are not readable until their batch commits, an
aborted batch never is, and a commit repeated after one that died part way makes each row readable once."""
from __future__ import annotations

import pickle

import pyarrow as pa
import pytest
from wire_cluster import WireCluster

from rmq_common.message_codec import PROPERTY_UNIQ_KEY, local_host_address, new_uniq_keys
from rmq_log import Consume, MessageLog, cluster_writes, open_log, store_commit
from rmq_log.staged_rows import MAP_TYPE, STAGED_SCHEMA
from rmq_log.writes import LogWrites, WriteOptionError, WriteOptions


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with WireCluster(tmp_path_factory.mktemp("writes") / "cluster", brokers=("broker-a",)) as c:
        yield c


def _place(kind: str, tmp_path, cluster, sink_id: str) -> tuple[MessageLog, WriteOptions]:
    if kind == "store":
        path = str(tmp_path / "store")
        return open_log(store=path), WriteOptions(path=path, topic=None, sink_id=sink_id, batch_id=None,
                                                  checkpoint=None, stream=True)
    options = WriteOptions(path="", topic=None, sink_id=sink_id, batch_id=None, checkpoint=str(tmp_path / "ckpt"),
                           namesrv_addr=cluster.namesrv, producer_group=f"rmq-sink-{sink_id}",
                           broker_timeout_ms=20000, stream=True)
    return open_log(namesrv=cluster.namesrv), options


def _rows(topic: str, bodies: list[bytes]) -> pa.RecordBatch:
    n = len(bodies)
    uniq = new_uniq_keys(n, local_host_address())
    props = pa.array([[(PROPERTY_UNIQ_KEY, u)] for u in uniq.to_pylist()], MAP_TYPE)
    return pa.record_batch([pa.array([topic] * n), pa.array(bodies, pa.binary()), pa.nulls(n, pa.string()),
                            pa.nulls(n, pa.string()), props, pa.nulls(n, pa.int32()), pa.nulls(n, pa.string()),
                            pa.nulls(n, pa.timestamp("ms")), uniq], schema=STAGED_SCHEMA)


def _stage(writes: LogWrites, topic: str, batch_id: int, parts: list[list[bytes]]) -> list:
    """Each part staged as one task's attempt; the receipts as the driver gets them (pickled by Spark)."""
    return [pickle.loads(pickle.dumps(writes.stage(iter([_rows(topic, bodies)]), batch_id, p, p)))
            for p, bodies in enumerate(parts)]


def _bodies(log: MessageLog, topic: str) -> list[bytes]:
    if topic not in {t["topic"] for t in log.topics()}:
        return []
    got: list[bytes] = []
    log.consume(Consume(topic, None, ("earliest", None), None, None, None, None, False, False),
                lambda m, q: got.append(m.body))
    return sorted(got)


@pytest.mark.parametrize("kind", ["store", "cluster"])
def test_a_committed_batch_is_read_once_and_an_aborted_one_never(kind, tmp_path, cluster):
    log, options = _place(kind, tmp_path, cluster, f"once-{kind}")
    topic = f"Writes{kind.title()}"
    writes = log.writes(options, ["body"])
    dropped = _stage(writes, topic, 0, [[b"x1", b"x2"], [b"x3"]])
    writes.abort(dropped, 0)
    kept = _stage(writes, topic, 1, [[b"a", b"b"], [b"c"]])
    assert _bodies(log, topic) == []  # staged only
    writes.commit(kept, 1)
    assert _bodies(log, topic) == [b"a", b"b", b"c"]
    writes.commit(kept, 1)  # the same batch again (a restarted query's replay): nothing appended twice
    assert _bodies(log, topic) == [b"a", b"b", b"c"]


class Killed(BaseException):
    """A commit's process dying at a named point."""


def _die_after_the_append(monkeypatch) -> None:
    """The store's commit dies once its rows and marker are appended, before it cleans up."""
    def crash(*args):
        raise Killed("after the append")
    monkeypatch.setattr(store_commit, "_clean_up", crash)


def _die_inside_the_commit(monkeypatch) -> None:
    """The cluster's commit dies between its END_TRANSACTIONs: some half batches committed, the others not."""
    def crash(directory, point, batch_id):
        if point == "inside_commit":
            raise Killed("inside the commit")
    monkeypatch.setattr(cluster_writes, "COMMIT_STEPS", [crash])


@pytest.mark.parametrize("kind", ["store", "cluster"])
def test_a_commit_repeated_after_one_that_died_appends_each_row_once(kind, tmp_path, cluster, monkeypatch):
    log, options = _place(kind, tmp_path, cluster, f"retry-{kind}")
    topic = f"Retry{kind.title()}"
    receipts = _stage(log.writes(options, ["body"]), topic, 0, [[b"p0-%d" % i for i in range(5)],
                                                                 [b"p1-%d" % i for i in range(4)]])
    with monkeypatch.context() as m:
        (_die_after_the_append if kind == "store" else _die_inside_the_commit)(m)
        with pytest.raises(Killed):
            log.writes(options, ["body"]).commit(receipts, 0)
    want = sorted([b"p0-%d" % i for i in range(5)] + [b"p1-%d" % i for i in range(4)])
    died = _bodies(log, topic)
    # the store died with the batch appended whole; the cluster with part of its halves committed
    assert died == want if kind == "store" else 0 < len(died) < len(want)
    log.writes(options, ["body"]).commit(receipts, 0)  # a fresh writer, as the next driver process has
    assert _bodies(log, topic) == want
    log.writes(options, ["body"]).commit(receipts, 0)
    assert _bodies(log, topic) == want


def test_a_cluster_refuses_a_column_a_store_writes(tmp_path, cluster):
    log, options = _place("cluster", tmp_path, cluster, "columns")
    with pytest.raises(WriteOptionError, match="born_timestamp column is not sent through brokers") as e:
        log.writes(options, ["body", "born_timestamp"])
    assert e.value.field == "namesrv_addr"
    store, store_options = _place("store", tmp_path, cluster, "columns")
    assert isinstance(store.writes(store_options, ["body", "born_timestamp"]), LogWrites)
