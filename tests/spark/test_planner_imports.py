"""What Spark's lookup and create planners import of the source: each is a fresh Python process that only names
format("rmq") or asks its schema (with the read's options checked), so neither loads Arrow, numpy, the store or
the clients, which the readers import when a reader is made (0.8-1 s of CPU a process when they did)."""
from __future__ import annotations

import json

from fresh_python import fresh_json, run_fresh

PLANNER = """
import json, sys
import pyspark.sql.worker.create_data_source  # the planner's own module, as Spark starts it
before = set(sys.modules)
from pyspark_rmq import DefaultSource
schemas = [DefaultSource(json.loads(o)).schema().simpleString() for o in sys.argv[1:]]
print(json.dumps({"schemas": schemas, "loaded": sorted({m.split(".")[0] for m in set(sys.modules) - before})}))
"""

HEAVY = {"pyarrow", "numpy", "pandas", "store", "rmq_client", "remoting", "filters", "rmq_common", "asyncio"}


def _plan(*options: dict) -> dict:
    return fresh_json(PLANNER, *map(json.dumps, options))


def test_naming_the_source_and_asking_its_schema_loads_no_arrow_store_or_client(tmp_path):
    store = tmp_path / "store"
    (store / "commitlog").mkdir(parents=True)
    got = _plan({"path": str(store), "subscribe": "T"},
                {"namesrvAddr": "127.0.0.1:9876", "subscribe": "T", "accessKey": "ak", "secretKey": "sk"},
                {"path": str(store), "subscribe": "T", "includeProperties": "false"})
    assert got["schemas"][0] == got["schemas"][1] and "properties:map<string,string>" in got["schemas"][0]
    assert "properties" not in got["schemas"][2]
    assert not HEAVY & set(got["loaded"]), got["loaded"]


def test_a_bad_option_is_still_refused_when_the_schema_is_asked(tmp_path):
    proc = run_fresh(PLANNER, json.dumps({"namesrvAddr": "127.0.0.1:9876", "subscribe": "T", "pullBatchSize": "0"}))
    assert proc.returncode != 0 and "option 'pullBatchSize'" in proc.stderr
