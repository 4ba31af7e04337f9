"""`rmq doctor`: what this installation has and lacks, one line each: Python, the compiled kernels (or the slower
fallbacks in use), pyspark, Java, which interpreter Spark's Python workers will run, whether the Spark settings
file turns Arrow Java's per-value checks off, and whether it has the workers forked from rmq_spark.daemon (and
their interpreter can run it). Exit 0 when everything needed for Spark is there, 1 otherwise (the compiled kernels,
the Arrow settings and the daemon are optional: a missing one is a warning; a daemon set that the workers'
interpreter cannot import fails every Python task, and fails the check)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

from .python_daemon_check import python_daemon_report
from .spark_java_options import arrow_checks_report


def add_doctor_command(sub, common) -> None:
    p = sub.add_parser("doctor", help="check this installation (kernels, pyspark, Java, worker interpreter)",
                       description=__doc__.split("\n\n")[0].replace("`rmq doctor`: ", ""))
    p.add_argument("--spark-conf", metavar="FILE", default=None,
                   help="the Spark properties file your jobs use (spark-submit --properties-file); default: "
                        "$SPARK_CONF_DIR/spark-defaults.conf, else $SPARK_HOME's, else pyspark's")
    p.set_defaults(run=cmd_doctor)


def _line(status: str, what: str, detail: str) -> None:
    print(f"{status:<4} {what:<24} {detail}")


def cmd_doctor(args) -> int:
    failures = 0
    py = sys.version.split()[0]
    ok = sys.version_info >= (3, 10)
    failures += not ok
    _line("ok" if ok else "FAIL", "python", f"{py} at {sys.executable}" + ("" if ok else " (3.10 or newer needed)"))

    from rmq_common import native
    from store import record_encoder
    for name, have, what in (("rmq_common._native", native.available(), "scan decoder, CRC32, properties kernels"),
                             ("rmq_common._encode", record_encoder.available(), "record encoder and writers")):
        _line("ok" if have else "warn", name, f"compiled ({what})" if have else
              f"not built: numpy/zlib fallbacks in use, several times slower ({what}); reinstall with a C "
              "compiler present (pip install --force-reinstall --no-deps .)")

    try:
        import pyspark
        _line("ok", "pyspark", f"{pyspark.__version__}")
    except ImportError as e:
        failures += 1
        _line("FAIL", "pyspark", f"cannot be imported ({e})")

    java = shutil.which("java", path=os.path.join(os.environ["JAVA_HOME"], "bin")) if os.environ.get("JAVA_HOME") \
        else shutil.which("java")
    if java is None:
        failures += 1
        _line("FAIL", "java", "not found on PATH or in $JAVA_HOME/bin (Spark 4 needs Java 17 or 21)")
    else:
        try:
            out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
            version = (out.stderr or out.stdout).splitlines()[0] if (out.stderr or out.stdout) else "?"
            _line("ok", "java", f"{version} ({java})")
        except (OSError, subprocess.TimeoutExpired) as e:
            failures += 1
            _line("FAIL", "java", f"{java} does not run ({e})")

    worker = os.environ.get("PYSPARK_PYTHON")
    if worker is None:
        _line("warn", "PYSPARK_PYTHON", f"not set: Spark's workers run 'python3' from PATH, which may lack rmq-spark "
              f"(DATA_SOURCE_NOT_FOUND); set it to {sys.executable} (the spark.pyspark.python conf key does "
              "not reach the worker that looks data sources up)")
    else:
        found = shutil.which(worker) or worker
        same = os.path.realpath(found) == os.path.realpath(sys.executable)
        _line("ok" if same else "warn", "PYSPARK_PYTHON", f"{worker}" + ("" if same else
              f" is not this interpreter ({sys.executable}): it must have rmq-spark installed too"))

    ok, detail = arrow_checks_report(getattr(args, "spark_conf", None))
    _line("ok" if ok else "warn", "arrow-java-checks", detail)

    status, detail = python_daemon_report(getattr(args, "spark_conf", None),
                                          worker if worker is not None else shutil.which("python3") or "python3")
    failures += status == "FAIL"
    _line(status, "python-daemon", detail)
    return 1 if failures else 0
