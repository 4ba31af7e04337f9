"""A Spark Python worker's first read of a store directory or through a broker: it imports what the read needs and
never pandas (pyarrow imports it on its first pa.array of numpy values, pa.scalar or RecordBatch.from_pylist,
0.5-1.3 s that every fresh worker paid in its first microbatch). Run as a worker runs it, in a fresh interpreter:
the stream reader planned on the driver, pickled, then one partition read from the unpickled copy; no Spark
needed for that."""
from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys

from rmq_spark.source import RmqDataSource
from store import MessageStore

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

WORKER = """
import json, pickle, sys
with open(sys.argv[1], "rb") as f:
    reader, partition = pickle.load(f)
batches = list(reader.read(partition))
print(json.dumps({"rows": sum(b.num_rows for b in batches), "columns": batches[0].schema.names if batches else [],
                  "pandas": "pandas" in sys.modules}))
"""


def _read_in_fresh_worker(options: dict, tmp_path) -> dict:
    """The driver's part here (plan one microbatch, pickle the reader and its first partition), the worker's in
    a fresh interpreter."""
    ds = RmqDataSource(options)
    reader = ds.streamReader(ds.schema())
    start = reader.initialOffset()
    parts = reader.partitions(start, reader.latestOffset(start, reader.getDefaultReadLimit()))
    shipped = tmp_path / "partition.pickle"
    shipped.write_bytes(pickle.dumps((reader, parts[0])))
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", WORKER, str(shipped)], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_workers_first_read_of_every_column_and_through_selectors_never_imports_pandas(tmp_path):
    path = str(tmp_path / "store")
    with MessageStore(path) as store:
        store.create_topic("T", 1)
        n = 300
        store.put_batch("T", [f"order-{i}".encode() for i in range(n)], tags=["a" if i % 3 else "b" for i in range(n)],
                        keys=[[f"k{i}", "shared"] for i in range(n)],
                        properties=[{"region": "EU" if i % 2 else "US", "amount": str(i)} for i in range(n)])
    base = {"path": path, "subscribe": "T", "startingOffsets": "earliest"}

    every = _read_in_fresh_worker(base, tmp_path)
    assert every["rows"] == n and {"keys", "properties", "body", "store_host", "msg_id"} <= set(every["columns"])
    assert not every["pandas"]

    selected = _read_in_fresh_worker({**base, "tags": "a", "sql": "region = 'EU' AND amount > 100"}, tmp_path)
    assert selected["rows"] == sum(1 for i in range(n) if i % 3 and i % 2 and i > 100)
    assert not selected["pandas"]


def test_a_workers_first_read_through_a_broker_never_imports_pandas(tmp_path):
    from wire_cluster import WireCluster

    from rmq_client import MessageQueue, Producer

    with WireCluster(tmp_path / "c", brokers=("broker-a",)) as c:
        with Producer(c.namesrv) as p:
            p.create_topic("T", 1)
            p.send_batch("T", [f"order-{i}".encode() for i in range(50)], tags=["a"] * 50,
                         properties=[{"region": "EU"}] * 50, queue=MessageQueue("T", "broker-a", 0))
        got = _read_in_fresh_worker({"namesrvAddr": c.namesrv, "subscribe": "T", "startingOffsets": "earliest",
                                     "commitOffsets": "false"}, tmp_path)
    assert got["rows"] == 50 and {"keys", "properties", "body"} <= set(got["columns"])
    assert not got["pandas"]
