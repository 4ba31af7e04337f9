"""The check of a Spark settings file's `spark.python.daemon.module` for `rmq doctor`: whether Spark's Python workers
are forked from rmq_spark.daemon, and whether the workers' Python can run it.

Spark starts the module named there, in the workers' interpreter, to fork the Python workers of its tasks.
rmq_spark.daemon imports the source's read and write paths first, so a fresh worker's first task does not
(docs/benchmarks.md, "A worker's first task"). Where that interpreter cannot import the module, the daemon does not
start and every Python task fails; where the read path fails to import or a library starts a thread, the daemon
runs as pyspark's own."""
from __future__ import annotations

import json
import os
import subprocess
from typing import Optional

from .spark_java_options import read_properties, spark_defaults_path

KEY = "spark.python.daemon.module"
MODULE = "rmq_spark.daemon"

# Run by the workers' interpreter: what the daemon does before it forks, and the reason it would not.
_PROBE = """
import json, sys
try:
    from rmq_spark import daemon
    why = daemon.prepare()
except Exception as e:
    print(json.dumps({"module": f"{type(e).__name__}: {e}"}))
else:
    print(json.dumps({"why": why}))
"""


def _hint() -> str:
    return (f"set {KEY} {MODULE} (conf/spark-defaults.conf does): Spark's Python workers then start with the rmq "
            "source imported, and a fresh worker's first task takes less CPU (docs/benchmarks.md, \"A worker's "
            "first task\"), for more memory in the daemon, once per executor")


def python_daemon_report(given: Optional[str], worker: str) -> tuple[str, str]:
    """("ok", "warn" or "FAIL", a line saying whether the settings file sets rmq_spark.daemon and whether
    `worker`, the interpreter Spark's workers run, forks with it)."""
    path = spark_defaults_path(given)
    if not os.path.isfile(path):
        return "warn", f"{path} does not exist (a job's own --conf or builder settings are not checked); {_hint()}"
    value = read_properties(path).get(KEY)
    if value != MODULE:
        now = "is not set (pyspark.daemon: each worker imports the read path in its first task)" if value is None \
            else f"is {value}, not {MODULE}"
        return "warn", f"{path}: {KEY} {now}; {_hint()}"
    try:
        done = subprocess.run([worker, "-c", _PROBE], capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        return "FAIL", f"{MODULE} ({path}), but the workers' Python {worker} does not run ({e})"
    lines = done.stdout.strip().splitlines()
    try:
        got = json.loads(lines[-1])
    except (IndexError, ValueError):
        got = {"module": (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]}
    if "module" in got:
        return "FAIL", (f"{MODULE} ({path}) cannot be imported by the workers' Python {worker} ({got['module']}): "
                        f"Spark's daemon does not start and every Python task fails; install rmq-spark there or "
                        f"remove {KEY}")
    if got.get("why"):
        return "warn", (f"{MODULE} ({path}) in {worker}: {got['why']}, so the daemon runs as pyspark's own, "
                        "without the imports (it says so on the executor's stderr)")
    return "ok", f"{MODULE} ({path}): {worker} imports the read path and forks with one thread"
