"""`make demo` (python -m rmq_spark.demo): the Spark pipeline runs, reports per microbatch, and what it says
agrees with the store it leaves behind."""
from __future__ import annotations

import os
import re
import subprocess
import sys

from store import MessageStore, OffsetStore

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BATCH_LINE = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+"
                        r"q0=(\d+)\s+q1=(\d+)\s+q2=(\d+)\s+q3=(\d+)\s+total=(\d+)$", re.M)


def run_demo(cwd):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)  # and conftest's driver flags
    # Smaller than `make demo` (20000 + 6 x 2500) to keep the suite short; the same code path.
    args = ["--messages", "10000", "--bursts", "3", "--burst-size", "2000", "--max-per-trigger", "4000"]
    return subprocess.run([sys.executable, "-m", "rmq_spark.demo", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


def scan_all(store, topic, message_filter=None):
    for qid in store.queues(topic):
        yield from store.scan(topic, qid, store.min_offset(topic, qid), message_filter=message_filter)


def test_demo_streams_filters_and_writes_back_exactly_once(tmp_path):
    stale = tmp_path / "data" / "demo-store" / "consumequeue" / "Stale" / "0"
    stale.mkdir(parents=True)  # left by an earlier run: the demo starts fresh
    proc = run_demo(tmp_path)
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert not stale.exists()
    assert "Produced 10000 messages into Orders (4 queues); 3 bursts of 2000 follow" in out

    # conf/log4j2.properties is in force: no Spark INFO lines, not Spark's default profile
    assert "Using Spark's default log4j profile" not in proc.stderr
    assert not re.search(r"^\S+ INFO ", proc.stderr, re.M), proc.stderr[:2000]

    # one line per microbatch that read something; together they cover every produced offset
    batches = [tuple(map(int, m)) for m in BATCH_LINE.findall(out)]
    assert len(batches) >= 2, out
    assert [b[0] for b in batches] == sorted(b[0] for b in batches)
    assert sum(b[1] for b in batches) == 16000
    rows = sum(b[2] for b in batches)
    written = [b[6] for b in batches]
    assert written == sorted(written) and written[-1] == rows  # the sink's output grows batch by batch
    assert any(b[11] > 0 for b in batches)  # lag was visible while the query ran

    summary = re.search(r"produced\s+16000 orders into Orders; (\d+) match the selectors\n"
                        r"\s+streamed\s+(\d+) rows in (\d+) microbatches.*\n"
                        r"\s+written\s+(\d+) messages into OrdersEU", out)
    assert summary, out
    expected, streamed, n_batches, n_written = map(int, summary.groups())
    assert streamed == rows == n_written == expected and n_batches == len(batches)
    assert "exactly once  duplicates 0, missing 0" in out
    assert "lag q0=0 q1=0 q2=0 q3=0" in out
    assert "check OK" in out

    # the store agrees: OrdersEU holds each matching order of Orders exactly once, and the group is caught up
    from filters import MessageFilter
    store_dir = tmp_path / "data" / "demo-store"
    selector = MessageFilter.both(MessageFilter.by_tags("TagA || TagC"),
                                  MessageFilter.by_sql("region = 'EU' AND amount > 300"))
    with MessageStore(store_dir, read_only=True) as store:
        assert sum(store.max_offset("Orders", q) for q in range(4)) == 16000
        matching = {m for b in scan_all(store, "Orders", selector) for m in b.column("msg_id").to_pylist()}
        assert len(matching) == expected
        sources = [dict(p)["source_msg_id"] for b in scan_all(store, "OrdersEU")
                   for p in b.column("properties").to_pylist()]
        assert len(sources) == len(set(sources)) == expected
        assert set(sources) == matching
        tags = {t for b in scan_all(store, "OrdersEU") for t in b.column("tags").to_pylist()}
        assert tags == {"High", "Normal"}
        offsets = OffsetStore(store_dir, "demo-enrich")
        offsets.load()
        assert offsets.clone_offset_table("Orders") == {q: store.max_offset("Orders", q) for q in range(4)}


def test_an_installed_copy_finds_its_spark_defaults_and_checks_them_before_writing(tmp_path):
    """After `pip install` there is no conf/ beside the package: the demo reads the copy installed inside it
    (rmq_spark/conf), and a missing one stops it before any message is written."""
    import shutil
    site = tmp_path / "site"
    for package in ("rmq_spark", "store", "filters"):
        shutil.copytree(os.path.join(ROOT, package), site / package, symlinks=False,  # as a wheel holds them
                        ignore=shutil.ignore_patterns("__pycache__"))
    code = ("import rmq_spark.demo as d; print(d.CONF_DIR); "
            "print(d.spark_defaults()['spark.sql.execution.arrow.pyspark.enabled'])")
    env = dict(os.environ, PYTHONPATH=str(site))
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [str(site / "rmq_spark" / "conf"), "true"]
    shutil.rmtree(site / "rmq_spark" / "conf")
    proc = subprocess.run([sys.executable, "-m", "rmq_spark.demo"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode != 0 and "spark-defaults.conf" in proc.stderr
    assert not (tmp_path / "data").exists()  # nothing written
