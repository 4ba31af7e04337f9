"""`rmq doctor` says what the installation has: the compiled kernels or the fallbacks in use, pyspark, Java,
whether Spark's workers will run an interpreter that has rmq-spark, and what a Spark settings file gives them."""
from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def doctor(*args, cwd=None, **env_changes):
    env = dict(os.environ, PYTHONPATH=ROOT)
    for name in ("PYSPARK_PYTHON", "SPARK_CONF_DIR", "SPARK_HOME", "JAVA_TOOL_OPTIONS", "JE_ARROW_MALLOC_CONF"):
        env.pop(name, None)
    env.update(env_changes)
    return subprocess.run([sys.executable, "-m", "rmq_cli", "doctor", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=120)


def test_doctor_reports_each_part_and_the_worker_interpreter():
    from rmq_common import native
    proc = doctor(PYSPARK_PYTHON=sys.executable)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = {line.split()[1]: line for line in proc.stdout.splitlines()}
    assert set(lines) >= {"python", "rmq_common._native", "rmq_common._encode", "pyspark", "java", "PYSPARK_PYTHON",
                          "arrow-java-checks", "python-daemon"}
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


def _daemon_line(proc, code=0) -> str:
    assert proc.returncode == code, proc.stdout + proc.stderr
    return next(line for line in proc.stdout.splitlines() if line.split()[1] == "python-daemon")


def test_doctor_says_whether_sparks_workers_are_forked_from_rmq_spark_daemon(tmp_path):
    shipped = os.path.join(ROOT, "conf", "spark-defaults.conf")
    line = _daemon_line(doctor("--spark-conf", shipped, PYSPARK_PYTHON=sys.executable))
    assert line.startswith("ok") and shipped in line and "forks with one thread" in line

    conf = tmp_path / "spark-defaults.conf"
    conf.write_text("spark.master local[2]\n")
    unset = _daemon_line(doctor("--spark-conf", str(conf), PYSPARK_PYTHON=sys.executable))
    assert unset.startswith("warn") and "spark.python.daemon.module is not set" in unset
    # the hint names the setting's value and where its figure is, without a figure of its own
    assert "set spark.python.daemon.module rmq_spark.daemon" in unset and "docs/benchmarks.md" in unset

    conf.write_text("spark.python.daemon.module=pyspark.daemon\n")
    other = _daemon_line(doctor(PYSPARK_PYTHON=sys.executable, SPARK_CONF_DIR=str(tmp_path)))  # Spark's own lookup
    assert other.startswith("warn") and "is pyspark.daemon, not rmq_spark.daemon" in other

    # the jemalloc linked into pyarrow starts a thread at import when told to: the daemon would not fork with it
    threads = _daemon_line(doctor("--spark-conf", shipped, PYSPARK_PYTHON=sys.executable,
                                  JE_ARROW_MALLOC_CONF="background_thread:true"))
    assert threads.startswith("warn") and "threads after the imports" in threads and "pyspark's own" in threads


def test_doctor_fails_when_the_workers_python_cannot_import_the_daemon_it_is_given(tmp_path):
    bare = tmp_path / "bare"  # a Python without rmq-spark
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120)
    python = str(bare / "bin" / "python")
    # the doctor from this venv's install of the project; neither the environment nor the directory offers it
    line = _daemon_line(doctor("--spark-conf", os.path.join(ROOT, "conf", "spark-defaults.conf"), cwd=str(tmp_path),
                               PYTHONPATH="", PYSPARK_PYTHON=python), code=1)
    assert line.startswith("FAIL") and python in line and "cannot be imported" in line
    assert "every Python task fails" in line
