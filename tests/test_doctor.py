"""`rmq doctor` says what the installation has: the compiled kernels or the fallbacks in use, pyspark, Java, and
whether Spark's workers will run an interpreter that has rmq-spark."""
from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def doctor(*args, **env_changes):
    env = dict(os.environ, PYTHONPATH=ROOT)
    for name in ("PYSPARK_PYTHON", "SPARK_CONF_DIR", "SPARK_HOME", "JAVA_TOOL_OPTIONS"):
        env.pop(name, None)
    env.update(env_changes)
    return subprocess.run([sys.executable, "-m", "rmq_cli", "doctor", *args], env=env, capture_output=True, text=True,
                          timeout=120)


def test_doctor_reports_each_part_and_the_worker_interpreter():
    from rmq_common import native
    proc = doctor(PYSPARK_PYTHON=sys.executable)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = {line.split()[1]: line for line in proc.stdout.splitlines()}
    assert set(lines) >= {"python", "rmq_common._native", "rmq_common._encode", "pyspark", "java", "PYSPARK_PYTHON",
                          "arrow-java-checks"}
    assert lines["rmq_common._native"].startswith("ok" if native.available() else "warn")
    assert lines["PYSPARK_PYTHON"].startswith("ok")
    unset = doctor()
    assert "warn PYSPARK_PYTHON" in unset.stdout and "DATA_SOURCE_NOT_FOUND" in unset.stdout
    assert f"set it to {sys.executable}" in unset.stdout


def test_doctor_fails_without_java():
    proc = doctor(PATH="/nonexistent", JAVA_HOME="/nonexistent")
    assert proc.returncode == 1 and "FAIL java" in proc.stdout


def _arrow_line(proc) -> str:
    assert proc.returncode == 0, proc.stdout + proc.stderr  # a warning, not a failure
    return next(line for line in proc.stdout.splitlines() if line.split()[1] == "arrow-java-checks")


def test_doctor_says_whether_the_spark_settings_turn_arrow_javas_checks_off(tmp_path):
    shipped = os.path.join(ROOT, "conf", "spark-defaults.conf")
    line = _arrow_line(doctor("--spark-conf", shipped, PYSPARK_PYTHON=sys.executable))
    assert line.startswith("ok") and shipped in line

    driver_only = tmp_path / "spark-defaults.conf"
    driver_only.write_text("spark.master local[2]\n"
                           "spark.driver.extraJavaOptions -Darrow.enable_unsafe_memory_access=true "
                           "-Darrow.enable_null_check_for_get=false\n")
    line = _arrow_line(doctor(PYSPARK_PYTHON=sys.executable, SPARK_CONF_DIR=str(tmp_path)))  # Spark's own lookup
    assert line.startswith("warn") and "spark.executor.extraJavaOptions lack them" in line
    assert "spark.driver.extraJavaOptions lack" not in line

    # Spark puts defaultJavaOptions before extraJavaOptions: there they count too; a later -D=...true undoes one
    driver_only.write_text("spark.driver.defaultJavaOptions=-Darrow.enable_unsafe_memory_access=true "
                           "-Darrow.enable_null_check_for_get=false\n"
                           "spark.executor.defaultJavaOptions: -Darrow.enable_unsafe_memory_access=true "
                           "-Darrow.enable_null_check_for_get=false\n"
                           "spark.executor.extraJavaOptions -Darrow.enable_null_check_for_get=true\n")
    line = _arrow_line(doctor("--spark-conf", str(driver_only), PYSPARK_PYTHON=sys.executable))
    assert line.startswith("warn") and "spark.executor.extraJavaOptions lack them" in line

    missing = _arrow_line(doctor("--spark-conf", str(tmp_path / "none.conf"), PYSPARK_PYTHON=sys.executable))
    assert missing.startswith("warn") and "does not exist" in missing
    assert "-Darrow.enable_unsafe_memory_access=true -Darrow.enable_null_check_for_get=false" in missing

    every_jvm = _arrow_line(doctor("--spark-conf", str(tmp_path / "none.conf"), PYSPARK_PYTHON=sys.executable,
                                   JAVA_TOOL_OPTIONS="-Darrow.enable_unsafe_memory_access=true "
                                                     "-Darrow.enable_null_check_for_get=false"))
    assert every_jvm.startswith("ok") and "JAVA_TOOL_OPTIONS" in every_jvm
