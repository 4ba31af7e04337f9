"""Exactly once per microbatch, under real faults: a task retried by Spark, a query stopped at random points
and restarted from its checkpoint, a commit process killed with SIGKILL, two queries into one store."""
import os
import random
import subprocess
import sys
import time

import pyarrow as pa
from pyspark import TaskContext
from sink_testkit import counts, markers
from source_testkit import fill

from rmq_log.store_commit import commit_batch
from rmq_log.store_writes import StoreWrites
from rmq_spark.sink.sink_options import parse_sink_options
from rmq_spark.sink.writer import RmqStreamWriter
from store import MessageStore, StoreConfig
from store.store_check import check_store

HERE = os.path.dirname(os.path.abspath(__file__))


def _bodies(topic, n):
    return [f"body-{topic}-{i}".encode() for i in range(n)]


def _staging_left(dst):
    return [os.path.join(r, f) for r, _, fs in os.walk(os.path.join(dst, "sink")) for f in fs
            if f.endswith(".arrow") or f.startswith("intent")]


def wait_for_first_offsets(query, checkpoint, timeout=120.0):
    """Until the query has logged its first batch's offsets. Spark 4 refuses to restart a query whose offset log
    has no batch yet but whose offsets directory is not empty (a stop inside that very first write leaves a
    temporary file: STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY), so random stops start after it."""
    deadline = time.monotonic() + timeout
    while query.isActive and not os.path.exists(os.path.join(str(checkpoint), "offsets", "0")):
        assert time.monotonic() < deadline, "the query logged no offsets"
        time.sleep(0.05)


def test_task_failing_on_its_first_attempt_is_retried_and_its_rows_written_once(spark, tmp_path):
    def fail_first_attempt(batches):  # defined here: pickled by value for the Python workers
        ctx = TaskContext.get()
        for b in batches:
            yield b
            if ctx.attemptNumber() == 0 and ctx.partitionId() == 0:
                # the sink has consumed rows of this attempt already: they must not show up
                raise RuntimeError("injected failure on the first attempt")

    master = spark.sparkContext.master
    assert master.startswith("local[") and master.count(",") == 1, f"need a retrying master, got {master}"
    src = fill(tmp_path / "src", "T", n=120, queues=2)
    dst = str(tmp_path / "dst")
    stream = (spark.readStream.format("rmq").option("topic", "T").option("startingOffsets", "earliest")
              .option("maxMessagesPerTrigger", 60).load(src).select("body"))
    q = (stream.mapInArrow(fail_first_attempt, "body binary").writeStream.format("rmq").option("topic", "R")
         .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start(dst))
    q.awaitTermination()
    assert q.exception() is None
    assert counts(dst, "R", _bodies("T", 120)) == (120, 120, 0, 0)
    assert _staging_left(dst) == []  # the failed attempts' staged files went with their batch


def test_query_stopped_at_random_points_and_restarted_from_its_checkpoint(spark, tmp_path):
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    n = 1200
    src = fill(tmp_path / "src", "T", n=n, queues=3)
    dst = str(tmp_path / "dst")

    def start(available_now=False):
        stream = (spark.readStream.format("rmq").option("topic", "T").option("startingOffsets", "earliest")
                  .option("maxMessagesPerTrigger", 100).load(src).select("body", "tags"))
        w = stream.writeStream.format("rmq").option("topic", "S").option("checkpointLocation", str(tmp_path / "cp"))
        return w.trigger(availableNow=True).start(dst) if available_now else w.start(dst)

    stops = 0
    for _ in range(4):
        q = start()
        if stops == 0:
            wait_for_first_offsets(q, tmp_path / "cp")
        time.sleep(rng.uniform(0.3, 3.0))
        q.stop()
        stops += 1
        if counts(dst, "S", [])[0] >= n:
            break
    q = start(available_now=True)
    q.awaitTermination()
    assert q.exception() is None
    assert counts(dst, "S", _bodies("T", n)) == (n, n, 0, 0), f"seed {seed}, {stops} stops"
    ids = [m[1] for m in markers(dst)]
    assert len(ids) == len(set(ids)), f"a batch id committed twice (seed {seed})"
    assert sum(m[2] for m in markers(dst)) == n
    assert _staging_left(dst) == []


def _stage(opts, batch_id, bodies, parts=2):
    writer = RmqStreamWriter(opts, {"body": 0}, StoreWrites(opts, StoreConfig()))
    messages = []
    size = -(-len(bodies) // parts)
    for p in range(parts):
        chunk = pa.record_batch([pa.array(bodies[p * size:(p + 1) * size], pa.binary())], names=["body"])
        messages.append(writer._stage(iter([chunk]), batch_id))
    return messages


def _child(args):
    import json

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(HERE), os.path.dirname(os.path.dirname(HERE))]))
    return subprocess.Popen([sys.executable, os.path.join(HERE, "sink_crash_child.py"), json.dumps(args)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
                            cwd=os.path.dirname(os.path.dirname(HERE)))


def sigkill_trials(path, trials, rows_per_batch, rng, atomic=True):
    """Each trial: a child commits a staged batch and is killed (at a named step or a random moment); then
    the batch is staged again (new files, new UNIQ_KEYs: a restarted query re-running it) and committed in
    this process, as the replay would. Returns (expected bodies, outcomes)."""
    opts = parse_sink_options({"path": str(path), "topic": "C", "sinkId": "crash-test"}, stream=True)
    with MessageStore(str(path)):
        pass
    expected, outcomes = [], []
    duration = None
    steps = ["moved", "intent", "torn", "appended", "cleaned", None]
    for trial in range(trials):
        bodies = [f"t{trial}-{i}".encode() for i in range(rows_per_batch)]
        expected += bodies
        msgs = _stage(opts, trial, bodies)
        kill_at = steps[trial] if trial < len(steps) else None
        args = {"path": opts.path, "sink_dir": opts.sink_dir, "sink_id": opts.sink_id, "batch_id": trial,
                "paths": [m.receipt.path for m in msgs], "topics": ["C"], "kill_at": kill_at, "atomic": atomic}
        child = _child(args)
        assert child.stdout.readline().strip() == "ready"
        t0 = time.monotonic()
        child.stdin.write("go\n")
        child.stdin.flush()
        if kill_at is None and duration is not None:
            time.sleep(rng.uniform(0, duration * 1.2))
            child.kill()
        child.wait()
        if kill_at is None and duration is None:
            duration = time.monotonic() - t0  # the first uninterrupted commit sets the window for the others
        replay = _stage(opts, trial, bodies)
        outcomes.append(commit_batch(opts.path, opts.sink_dir, opts.sink_id, trial, [m.receipt.path for m in replay],
                                     ["C"]))
    return expected, outcomes


def test_sigkill_inside_the_commit_then_replay_gives_each_row_once(tmp_path):
    seed = random.randrange(1 << 30)
    path = tmp_path / "store"
    expected, outcomes = sigkill_trials(path, trials=8, rows_per_batch=2000, rng=random.Random(seed))
    assert counts(path, "C", expected) == (len(expected), len(expected), 0, 0), f"seed {seed}: {outcomes}"
    assert outcomes[:5] == ["committed", "resumed", "resumed", "already", "already"], outcomes  # named steps
    assert sorted(m[1] for m in markers(path, "crash-test")) == list(range(8))
    report = check_store(str(path))
    assert report.ok, report


def test_sigkill_inside_a_plain_append_the_replay_completes_the_prefix(tmp_path, monkeypatch, caplog):
    """Without the store's atomic put_batch a killed append leaves a prefix of the batch; the replay finds it
    by UNIQ_KEY past the intent's queue ends and appends only the rest."""
    from rmq_log import store_commit

    monkeypatch.setattr(store_commit, "supports_atomic", lambda store: False)
    seed = random.randrange(1 << 30)
    path = tmp_path / "store"
    expected, outcomes = sigkill_trials(path, trials=5, rows_per_batch=2000, rng=random.Random(seed), atomic=False)
    assert counts(path, "C", expected) == (len(expected), len(expected), 0, 0), f"seed {seed}: {outcomes}"
    # the torn trial left half its batch in the store, visible, and the replay appended only the rest
    assert "resuming the interrupted commit of batch 2 (1000 of 2000 rows were appended)" in caplog.text
    assert check_store(str(path)).ok


def test_two_streaming_queries_write_different_topics_of_one_store(spark, tmp_path):
    src = str(tmp_path / "src")
    fill(src, "A", n=300, queues=2)
    fill(src, "B", n=200, queues=2)
    dst = str(tmp_path / "dst")
    queries = []
    for topic, out in (("A", "OA"), ("B", "OB")):
        stream = (spark.readStream.format("rmq").option("topic", topic).option("startingOffsets", "earliest")
                  .option("maxMessagesPerTrigger", 60).load(src).select("body"))
        queries.append(stream.writeStream.format("rmq").option("topic", out)
                       .option("checkpointLocation", str(tmp_path / f"cp-{out}")).trigger(availableNow=True)
                       .start(dst))
    for q in queries:
        q.awaitTermination()
        assert q.exception() is None
    assert counts(dst, "OA", _bodies("A", 300)) == (300, 300, 0, 0)
    assert counts(dst, "OB", _bodies("B", 200)) == (200, 200, 0, 0)
    assert len({m[0] for m in markers(dst)}) == 2
    assert check_store(dst).ok
