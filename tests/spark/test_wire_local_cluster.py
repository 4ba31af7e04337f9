"""Across machines, as far as one host allows: Spark with master local-cluster[2,1,1024] (separate executor JVMs
and Python workers) streams a topic spread over two brokers, with a tag and a SQL92 filter, into Parquet while
the Apache RocketMQ C++ producer sends; the executors are never given a store path. Then the wire sink writes
that stream back through both brokers from the executors, exactly once with transactional messages. Runs in a
child process (its own SparkContext) with a timeout."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def test_two_brokers_two_executor_jvms_cpp_producer_exactly_once(tmp_path):
    pytest.importorskip("rocketmq.client", reason="the rocketmq==0.4.4 test extra (the Apache RocketMQ C++ client)")
    proc = subprocess.run([sys.executable, os.path.join(HERE, "wire_local_cluster_child.py"), str(tmp_path)],
                          capture_output=True, text=True, timeout=600)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert proc.returncode == 0 and lines, proc.stderr[-4000:]
    out = json.loads(lines[-1])
    for name, rows in (("tags", 100), ("sql", 100)):
        r = out[name]
        assert (r["rows"], r["duplicates"], r["lost"], r["extra"], r["wrong_tags"]) == (rows, 0, 0, 0, 0), r
        assert r["store_hosts"] == out["hosts"], "messages of both brokers"
        assert r["brokers"] == ["broker-a", "broker-b"] and r["offsets_at_end"], r
    # the wire sink on the executor JVMs, read back by a pull and by the C++ push consumer
    sink = out["sink"]
    assert sink["before_commit"] == {"cpp": 0, "pull": 0}, sink  # nothing of the microbatch before its commit
    assert (sink["rows"], sink["duplicates"], sink["lost"]) == (400, 0, 0), sink
    assert (sink["cpp_rows"], sink["cpp_lost"]) == (400, 0), sink  # all of it after
    assert sink["brokers"] == ["broker-a", "broker-b"], sink
