"""`make demo` (python -m rmq_spark.demo) builds its store under the working directory and reports sensibly."""
from __future__ import annotations

import os
import re
import subprocess
import sys

from store import MessageStore

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_demo(cwd):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "rmq_spark.demo"], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def test_demo_builds_a_store_and_prints_summary_and_filtered_consumes(tmp_path):
    stale = tmp_path / "data" / "demo-store" / "consumequeue" / "Stale" / "0"
    stale.mkdir(parents=True)  # left by an earlier run: the demo starts fresh
    proc = run_demo(tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    store_dir = tmp_path / "data" / "demo-store"
    assert "Produced 5000 messages" in out
    # the per-queue summary agrees with the store
    rows = re.findall(r"^(Orders|Payments|Shipments)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)$", out, re.M)
    assert len(rows) == 10
    with MessageStore(store_dir, read_only=True) as store:
        for topic, qid, lo, hi, n in rows:
            assert int(hi) == store.max_offset(topic, int(qid)) and int(n) == int(hi) - int(lo)
        assert sum(int(r[4]) for r in rows) == 5000
    assert len(os.listdir(store_dir / "commitlog")) > 1
    # both filtered consumes came back with what the produced data says
    tag_line = re.search(r"Orders with tag selector `TagA \|\| TagC`: (\d+) messages \(as expected\)", out)
    sql_line = re.search(r"Orders with SQL92 selector `.*`: (\d+) messages \(as expected\)", out)
    assert tag_line and sql_line, out
    assert 0 < int(sql_line.group(1)) < int(tag_line.group(1)) < 3000
    shown = re.findall(r"^  Orders/\d+@\d+  tags=(\w+)", out, re.M)
    assert shown[:5] and all(t in ("TagA", "TagC") for t in shown[:5])
    assert "check OK" in out
    assert not stale.exists()
