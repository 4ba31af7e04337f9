"""The JVM options Spark's driver and executors should get for the rmq source, and the check of a Spark settings file
for them (`rmq doctor`).

Spark turns a Python source's Arrow batches into rows in the JVM through Arrow Java's vectors. Every get there checks
the buffer's bounds and reference count (off with arrow.enable_unsafe_memory_access=true) and, for a value, its
validity bit once more (off with arrow.enable_null_check_for_get=false), though Spark has asked isNullAt first. With
both off, that pass took about a fifth less CPU for a stream of all columns (docs/benchmarks.md). The batches come
from pyarrow in the source's own Python workers, never from outside the job."""
from __future__ import annotations

import os
import re
from typing import Optional

ARROW_JAVA_OPTIONS = ("-Darrow.enable_unsafe_memory_access=true", "-Darrow.enable_null_check_for_get=false")
# Spark puts a JVM's defaultJavaOptions before its extraJavaOptions: either carries them.
_KEYS = {"spark.driver.extraJavaOptions": ("spark.driver.defaultJavaOptions", "spark.driver.extraJavaOptions"),
         "spark.executor.extraJavaOptions": ("spark.executor.defaultJavaOptions", "spark.executor.extraJavaOptions")}


def spark_defaults_path(given: Optional[str] = None) -> str:
    """The settings file Spark reads when no --properties-file is given: $SPARK_CONF_DIR/spark-defaults.conf, else
    $SPARK_HOME/conf/spark-defaults.conf, else the one in pyspark's own folder (its SPARK_HOME when pip-installed)."""
    if given:
        return given
    if os.environ.get("SPARK_CONF_DIR"):
        return os.path.join(os.environ["SPARK_CONF_DIR"], "spark-defaults.conf")
    home = os.environ.get("SPARK_HOME")
    if not home:
        try:
            import pyspark
            home = os.path.dirname(pyspark.__file__)
        except ImportError:
            home = ""
    return os.path.join(home, "conf", "spark-defaults.conf")


def read_properties(path: str) -> dict[str, str]:
    """A Java properties file's `key value` / `key=value` / `key: value` lines (comments start with # or !)."""
    props = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line or line[0] in "#!":
                continue
            m = re.match(r"([^\s=:]+)\s*[=:]?\s*(.*)", line)
            if m:
                props[m.group(1)] = m.group(2).strip()
    return props


def missing_options(java_options: str) -> list[str]:
    """Which of ARROW_JAVA_OPTIONS a JVM's options string lacks (a later -D of the same property wins)."""
    given: dict[str, str] = {}
    for word in java_options.split():
        if word.startswith("-D") and "=" in word:
            name, _, value = word[2:].partition("=")
            given[name] = value
    return [o for o in ARROW_JAVA_OPTIONS if given.get(o[2:].partition("=")[0]) != o.partition("=")[2]]


def arrow_checks_report(given: Optional[str] = None) -> tuple[bool, str]:
    """(whether the driver's and the executors' JVMs get ARROW_JAVA_OPTIONS from the settings file or
    JAVA_TOOL_OPTIONS, a line saying so or what to add where)."""
    path = spark_defaults_path(given)
    add = (f"give {' '.join(ARROW_JAVA_OPTIONS)} to spark.driver.extraJavaOptions and "
           "spark.executor.extraJavaOptions (conf/spark-defaults.conf does): Spark then turns the rmq source's Arrow "
           "batches into rows with about a fifth less CPU")
    tool = os.environ.get("JAVA_TOOL_OPTIONS", "")
    if not missing_options(tool):
        return True, "off in every JVM (JAVA_TOOL_OPTIONS)"
    if not os.path.isfile(path):
        return False, f"{path} does not exist (a job's own --conf or builder settings are not checked); {add}"
    props = read_properties(path)
    lacking = [key for key, keys in _KEYS.items()
               if missing_options(" ".join([tool] + [props.get(k, "") for k in keys]))]
    if not lacking:
        return True, f"off for the driver and the executors ({path})"
    return False, f"{path}: {' and '.join(lacking)} lack them; {add}"
