"""The source's rows in a Spark driver started from conf/spark-defaults.conf, as the demo and the notebooks start it:
its JVM gets Arrow Java's per-value checks off (no bounds or second null check on a get), and every value still
arrives as the store's own RocketMQ-style pull decodes it: empty and several keys, no tags (null) and an empty
one, a properties text with a repeated key, a pair without a value, one without a key, a value holding \\x01 and
non-ASCII text, an empty body. A batch read and a stream, each through Spark's Arrow-to-rows pass."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pyarrow as pa

from rmq_spark.schema import COLUMNS
from store import MessageStore

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

DRIVER = """
import json, sys
from pyspark.sql import functions as F
from rmq_spark.demo import spark_session

path, checkpoint = sys.argv[1:3]
spark = spark_session("arrow-checks-off")
system = spark.sparkContext._jvm.java.lang.System
names = ("arrow.enable_unsafe_memory_access", "arrow.enable_null_check_for_get")
out = {"jvm": {n: system.getProperty(n) for n in names}}

def rows(df):
    df = df.select(*[F.unix_millis(c).alias(c) if c.endswith("_timestamp") else F.hex(c).alias(c) if c == "body"
                     else F.col(c) for c in df.columns])
    return [[sorted(v.items()) if isinstance(v, dict) else v for v in r] for r in df.collect()]

out["batch"] = rows(spark.read.format("rmq").option("subscribe", "T").load(path))
(spark.readStream.format("rmq").option("subscribe", "T").option("startingOffsets", "earliest").load(path)
 .writeStream.format("memory").queryName("rows").option("checkpointLocation", checkpoint)
 .trigger(availableNow=True).start().awaitTermination())
out["stream"] = rows(spark.table("rows"))
spark.stop()
print(json.dumps(out))
"""


def _expected(path) -> list:
    """Every message as the store's get_message decodes it, in the source's columns (as the driver prints them)."""
    out = []
    with MessageStore(path, read_only=True) as s:
        for q in s.queues("T"):
            for m in s.get_message("test", "T", q, 0, 64).messages:
                row = [getattr(m, c) for c in COLUMNS]
                row[COLUMNS.index("body")] = m.body.hex().upper()
                row[COLUMNS.index("properties")] = sorted(m.properties.items())
                out.append(row)
    return out


def test_rows_are_the_stores_own_with_arrow_javas_checks_off(tmp_path):
    path = str(tmp_path / "store")
    texts = ["p\x011\x02p\x012\x02e\x01\x02\x01v\x02u\x01\u00e9\u20ac\x01z", None, "", "region\x01EU\x02amount\x01"
             "42\x02", "only\x01one"]
    n = len(texts) * 4
    with MessageStore(path) as store:
        store.create_topic("T", 2)
        store.put_batch("T", [b"" if i % 5 == 1 else f"body-{i}".encode() for i in range(n)],
                        tags=[[None, "TagA", "", "\u00c4", "B"][i % 5] for i in range(n)],
                        keys=[[[], ["k1", "k2"], None, [f"order-{i}"], ["a", "b", "c"]][i % 5] for i in range(n)],
                        properties=pa.array([texts[i % len(texts)] for i in range(n)], pa.string()),
                        queue_id=[i % 2 for i in range(n)])
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)  # and conftest's driver flags
    proc = subprocess.run([sys.executable, "-c", DRIVER, path, str(tmp_path / "checkpoint")], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["jvm"] == {"arrow.enable_unsafe_memory_access": "true", "arrow.enable_null_check_for_get": "false"}

    expected = json.loads(json.dumps(_expected(path)))  # tuples as lists, as the driver's JSON has them
    assert len(expected) == n
    tags = [r[COLUMNS.index("tags")] for r in expected]
    assert None in tags and "" not in tags  # an empty TAGS is no tag: null, as RocketMQ reads it
    assert [] in [r[COLUMNS.index("keys")] for r in expected]

    def key(r):
        return r[COLUMNS.index("queue_id")], r[COLUMNS.index("queue_offset")]
    for kind in ("batch", "stream"):
        assert sorted(got[kind], key=key) == sorted(expected, key=key), kind
