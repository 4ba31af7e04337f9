"""A fresh Spark session's first read of format("rmq"): the CPU of the Python worker that runs its task, and of
the daemon that forked that worker, with pyspark's daemon (`spark.python.daemon.module pyspark.daemon`) and with
rmq_spark.daemon (conf/spark-defaults.conf), taking turns in fresh drivers.

    .venv/bin/python benchmarks/worker_start_bench.py --rounds 3

Each run is a new driver with conf/spark-defaults.conf but the daemon, reading a one-queue topic (one partition,
one task, one worker) with spark.read...count(). The CPU figures come from /proc once the read has returned:
the worker stays, idle, for Spark to reuse it. A worker's CPU starts at the fork, so it is what the task cost it,
imports included when its daemon had not made them; the daemon's is its start-up. Their memory: resident, and the
part of it no other process shares (a worker shares the pages its daemon had at the fork until it writes them).
The Spark planners' own Python processes (pyspark.daemon whatever the setting) are not counted.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

DAEMONS = ("pyspark.daemon", "rmq_spark.daemon")
TOPIC = "T"


def _stat(pid: int) -> tuple[int, float]:
    """(parent pid, user + system CPU seconds) of a process."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cmdline(pid: int) -> list[str]:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]


def memory_mb(pid: int) -> dict:
    """A process's resident memory and the part of it no other process shares (MB)."""
    fields = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3 and parts[2] == "kB":
                fields[parts[0].rstrip(":")] = int(parts[1]) / 1024
    private = fields.get("Private_Clean", 0.0) + fields.get("Private_Dirty", 0.0)
    return {"rss": fields.get("Rss", 0.0), "private": private}


def python_processes() -> dict[int, tuple[int, float, list[str]]]:
    """{pid: (parent pid, CPU seconds, command)} of every process on the machine (a Spark driver's are told by
    their parents)."""
    found = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                parent, cpu = _stat(int(name))
                found[int(name)] = (parent, cpu, _cmdline(int(name)))
            except OSError:
                continue
    return found


def child(daemon: str, store: str) -> None:
    """One driver: the first read, then the task daemon's and its workers' CPU, as JSON on the last line."""
    from rmq_spark.demo import spark_defaults, spark_session

    conf = spark_defaults()
    conf["spark.python.daemon.module"] = daemon
    spark = spark_session("worker-start-bench", conf)
    jvm = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    t0 = time.monotonic()
    rows = spark.read.format("rmq").option("subscribe", TOPIC).load(store).count()
    seconds = time.monotonic() - t0
    procs = python_processes()
    task_daemon = [p for p, (parent, _, cmd) in procs.items()
                   if parent == jvm and cmd[1:4] == ["-m", daemon, "pyspark.worker"]]
    workers = sorted(p for p, (parent, _, _) in procs.items() if parent in task_daemon)
    print(json.dumps({"rows": rows, "read_s": seconds, "daemon_cpu": sum(procs[p][1] for p in task_daemon),
                      "daemons": len(task_daemon), "workers_cpu": [procs[p][1] for p in workers],
                      "daemon_mb": [memory_mb(p) for p in task_daemon], "workers_mb": [memory_mb(p) for p in workers]}))
    spark.stop()


def build_store(path: str, n: int) -> None:
    from store import MessageStore

    shutil.rmtree(path, ignore_errors=True)
    with MessageStore(path) as s:
        s.create_topic(TOPIC, 1)
        s.put_batch(TOPIC, [b"x" * 100] * n, tags=["a"] * n, keys=[["k"]] * n,
                    properties=[{"region": "EU"}] * n)


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--messages", type=int, default=2000)
    ap.add_argument("--dir", default="/tmp/rmq-worker-start")
    ap.add_argument("--child", choices=DAEMONS, help=argparse.SUPPRESS)
    args = ap.parse_args()
    store = os.path.join(args.dir, "store")
    if args.child:
        child(args.child, store)
        return 0
    build_store(store, args.messages)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    for r in range(args.rounds):
        for daemon in DAEMONS:
            load = " ".join(f"{x:.1f}" for x in os.getloadavg())
            proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", daemon, "--dir", args.dir],
                                  env=env, cwd=args.dir, capture_output=True, text=True, timeout=600)
            if proc.returncode != 0:
                print(f"round {r + 1} {daemon}: failed\n{proc.stderr[-2000:]}")
                continue
            got = json.loads(proc.stdout.strip().splitlines()[-1])
            workers = ", ".join(f"{c:.2f}" for c in got["workers_cpu"])
            memory = "; ".join(f"{what} {m['rss']:.0f} MB resident, {m['private']:.0f} MB its own"
                               for what, ms in (("daemon", got["daemon_mb"]), ("worker", got["workers_mb"]))
                               for m in ms)
            print(f"round {r + 1} {daemon:<17} first read {got['read_s']:.2f} s ({got['rows']} rows); "
                  f"the worker's CPU {workers} s, its daemon's {got['daemon_cpu']:.2f} s ({got['daemons']}); "
                  f"{memory}; load {load}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
