"""A Spark Python worker's first write to a store directory or through a broker stages its rows without importing
pandas (pyarrow imports it on its first Array.to_numpy, pa.array of numpy values or pa.scalar: 0.3-0.5 s that a
fresh worker forked from pyspark's daemon paid in its first write). Run as a worker runs it, in a fresh
interpreter: the writer made on the driver, pickled, then its write() over Arrow batches read from an IPC stream,
as Spark hands them; the commit on the driver's side afterwards, and the messages read back."""
from __future__ import annotations

import pickle

import pyarrow as pa
import pytest
from fresh_python import fresh_json
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)
from read_places import PLACES, read_place

from rmq_log import Consume, open_log
from rmq_spark.source import RmqDataSource

WORKER = """
import json, pickle, sys
import pyarrow as pa
with open(sys.argv[1], "rb") as f:
    writer = pickle.load(f)
with pa.OSFile(sys.argv[2], "rb") as f:
    batches = list(pa.ipc.open_stream(f))
message = writer.write(iter(batches))
with open(sys.argv[3], "wb") as f:
    pickle.dump(message, f)
print(json.dumps({"batches": len(batches), "pandas": "pandas" in sys.modules}))
"""

N = 90


def _input(place: str) -> tuple[StructType, pa.Table]:
    """Every column the sink takes, nulls in each optional one; a broker takes no born_timestamp."""
    fields = [StructField("body", BinaryType()), StructField("tags", StringType()),
              StructField("keys", ArrayType(StringType())),
              StructField("properties", MapType(StringType(), StringType())),
              StructField("queue_id", IntegerType()), StructField("sharding_key", StringType())]
    columns = {
        "body": pa.array([b"m-%d" % i for i in range(N)], pa.binary()),
        "tags": pa.array([f"t{i % 2}" if i % 3 else None for i in range(N)], pa.string()),
        "keys": pa.array([[f"k{i}", "shared"] if i % 4 else None for i in range(N)], pa.list_(pa.string())),
        "properties": pa.array([[("p", str(i))] if i % 5 else [("UNIQ_KEY", f"U{i:031d}")] if i % 10 else None
                                for i in range(N)], pa.map_(pa.string(), pa.string())),
        "queue_id": pa.array([0 if i % 6 == 0 else None for i in range(N)], pa.int32()),
        "sharding_key": pa.array([f"s{i % 7}" if i % 2 else None for i in range(N)], pa.string()),
    }
    if place == "directory":
        fields.append(StructField("born_timestamp", TimestampType()))
        columns["born_timestamp"] = pa.array([1_700_000_000_000_000 + i if i % 8 else None for i in range(N)],
                                             pa.timestamp("us", tz="UTC"))
    return StructType(fields), pa.table(columns)


@pytest.mark.parametrize("place", PLACES)
def test_a_workers_first_write_never_imports_pandas(tmp_path, place):
    path = tmp_path / "store"
    schema, rows = _input(place)
    with read_place(place, path) as where:
        writer = RmqDataSource({**where, "topic": "W"}).writer(schema, False)
        (tmp_path / "writer.pickle").write_bytes(pickle.dumps(writer))
        with pa.OSFile(str(tmp_path / "rows.arrows"), "wb") as f, pa.ipc.new_stream(f, rows.schema) as stream:
            for batch in rows.to_batches(max_chunksize=40):  # three batches, the last one short
                stream.write_batch(batch)
        worker = fresh_json(WORKER, str(tmp_path / "writer.pickle"), str(tmp_path / "rows.arrows"),
                            str(tmp_path / "message.pickle"))
        assert worker == {"batches": 3, "pandas": False}

        writer.commit([pickle.loads((tmp_path / "message.pickle").read_bytes())])
        log = open_log(**({"store": str(path)} if place == "directory" else {"namesrv": where["namesrvAddr"]}))
        got = []
        log.consume(Consume("W", None, ("earliest", None), None, None, None, None, False, False),
                    lambda m, q: got.append(m))
    by_body = {m.body: m for m in got}
    assert sorted(by_body) == sorted(b"m-%d" % i for i in range(N))
    for i in (0, 1, 5, 12, 13):
        props = by_body[b"m-%d" % i].properties
        assert props.get("TAGS") == (f"t{i % 2}" if i % 3 else None), i
        assert props.get("KEYS") == (f"k{i} shared" if i % 4 else None), i
        assert props.get("p") == (str(i) if i % 5 else None), i
        assert len(props["UNIQ_KEY"]) == 32 and (props["UNIQ_KEY"] == f"U{i:031d}") == (i % 5 == 0 and i % 10 != 0)
    assert sum(m.queue_id == 0 for m in got) >= N // 6  # the rows that named queue 0 are there
