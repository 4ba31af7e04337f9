"""`rmq doctor` says what the installation has: the compiled kernels or the fallbacks in use, pyspark, Java, and
whether Spark's workers will run an interpreter that has rmq-spark."""
from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def doctor(**env_changes):
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("PYSPARK_PYTHON", None)
    env.update(env_changes)
    return subprocess.run([sys.executable, "-m", "rmq_cli", "doctor"], env=env, capture_output=True, text=True,
                          timeout=120)


def test_doctor_reports_each_part_and_the_worker_interpreter():
    from rmq_common import native
    proc = doctor(PYSPARK_PYTHON=sys.executable)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = {line.split()[1]: line for line in proc.stdout.splitlines()}
    assert set(lines) >= {"python", "rmq_common._native", "rmq_common._encode", "pyspark", "java", "PYSPARK_PYTHON"}
    assert lines["rmq_common._native"].startswith("ok" if native.available() else "warn")
    assert lines["PYSPARK_PYTHON"].startswith("ok")
    unset = doctor()
    assert "warn PYSPARK_PYTHON" in unset.stdout and "DATA_SOURCE_NOT_FOUND" in unset.stdout
    assert f"set it to {sys.executable}" in unset.stdout


def test_doctor_fails_without_java():
    proc = doctor(PATH="/nonexistent", JAVA_HOME="/nonexistent")
    assert proc.returncode == 1 and "FAIL java" in proc.stdout
