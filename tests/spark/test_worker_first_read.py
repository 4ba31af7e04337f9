"""A Spark Python worker's first read of a store directory or of the same store through a broker: it imports
what the read needs and never pandas (pyarrow imports it on its first pa.array of numpy values, pa.scalar or
RecordBatch.from_pylist, 0.5-1.3 s that every fresh worker paid in its first microbatch). Run as a worker runs
it, in a fresh interpreter: the stream reader planned on the driver, pickled, then one partition read from the
unpickled copy; no Spark needed for that."""
from __future__ import annotations

import pickle

import pytest
from fresh_python import fresh_json
from read_places import PLACES, read_place
from store_fill import fill_store

from rmq_spark.source import RmqDataSource

WORKER = """
import gc, json, pickle, sys
with open(sys.argv[1], "rb") as f:
    reader, partition = pickle.load(f)
batches = list(reader.read(partition))
cycle = [None]
cycle[0] = cycle  # garbage made after the read: still collected
del cycle
print(json.dumps({"rows": sum(b.num_rows for b in batches), "columns": batches[0].schema.names if batches else [],
                  "pandas": "pandas" in sys.modules, "frozen": gc.get_freeze_count(),
                  "tracked": len(gc.get_objects()), "collected": gc.collect()}))
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
    return fresh_json(WORKER, str(shipped))


@pytest.mark.parametrize("place", PLACES)
def test_a_workers_first_read_of_every_column_and_through_selectors_never_imports_pandas(tmp_path, place):
    path = str(tmp_path / "store")
    n = 300
    fill_store(path, n, body=b"order-%d", queues=1, queue_id=None, tags=["a" if i % 3 else "b" for i in range(n)],
               keys=[[f"k{i}", "shared"] for i in range(n)],
               properties=[{"region": "EU" if i % 2 else "US", "amount": str(i)} for i in range(n)])
    with read_place(place, path) as where:
        # a broker's group offsets are left alone: the worker's imports are what is tested
        base = {**where, "subscribe": "T", "startingOffsets": "earliest",
                **({"commitOffsets": "false"} if place == "cluster" else {})}

        every = _read_in_fresh_worker(base, tmp_path)
        assert every["rows"] == n and {"keys", "properties", "body", "store_host", "msg_id"} <= set(every["columns"])
        assert not every["pandas"]

        # through a broker the SQL92 selector also runs in the worker, over the properties map (numbers, IN lists)
        sql = "region = 'EU' AND amount > 100 AND region IN ('EU', 'X') AND amount BETWEEN 0 AND 1000"
        selected = _read_in_fresh_worker({**base, "tags": "a", "sql": sql}, tmp_path)
        assert selected["rows"] == sum(1 for i in range(n) if i % 3 and i % 2 and i > 100)
        assert not selected["pandas"]


def test_a_workers_first_read_freezes_what_it_imported_so_sparks_collection_after_each_task_skips_it(tmp_path):
    """Spark's daemon collects garbage after every task of a reused worker; the modules a read imports (tens of
    thousands of objects) are frozen at the first read, so those collections traverse only what came later."""
    path = str(tmp_path / "store")
    fill_store(path, 50, queues=1)
    got = _read_in_fresh_worker({"path": path, "subscribe": "T", "startingOffsets": "earliest"}, tmp_path)
    assert got["rows"] == 50
    assert got["frozen"] > 20_000, got  # pyspark's data source classes, pyarrow, numpy, the source
    assert got["tracked"] < got["frozen"] / 10, got
    assert got["collected"] >= 1, got


WRITER = """
import gc, json, pickle, sys
import pyarrow as pa
with open(sys.argv[1], "rb") as f:
    writer = pickle.load(f)
writer.write(iter([pa.RecordBatch.from_arrays([pa.array([b"x", b"y"])], names=["body"])]))
print(json.dumps({"frozen": gc.get_freeze_count()}))
"""


def test_a_workers_first_write_freezes_what_it_imported_too(tmp_path):
    """A worker that only writes (the sink's task) is collected after each task as well."""
    from pyspark.sql.types import BinaryType, StructField, StructType

    path = str(tmp_path / "store")
    fill_store(path, 1, queues=1)
    writer = RmqDataSource({"path": path, "topic": "T"}).writer(StructType([StructField("body", BinaryType())]),
                                                                False)
    shipped = tmp_path / "writer.pickle"
    shipped.write_bytes(pickle.dumps(writer))
    assert fresh_json(WRITER, str(shipped))["frozen"] > 20_000
