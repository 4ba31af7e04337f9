"""A class data sharing archive of the tests' Spark drivers (JDK's AppCDS): the classes a Spark driver loads to read,
stream and write format("rmq"), parsed and verified once and mapped by every later driver of the suite.

Measured on the 2-core machine (load 4-5): a driver's start and first query took 19 s of JVM CPU without it and
9.5 s with it. The archive is written by one small Spark job run with -XX:ArchiveClassesAtExit, in the background
while the suite's first tests run (conftest.py), under build/, named by the Java version and the jars on Spark's
class path: the JVM maps it only for that same class path (a directory on it must be empty or missing, which is
why the tests give their drivers' flags through PYSPARK_SUBMIT_ARGS, not a SPARK_CONF_DIR), and ignores it on its
own if the jars change.

Run as a script it is that job (the driver's classes are what it loads)."""
from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from typing import Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The tests' drivers' JIT and collector (the same as the stock peers' JVMs, tests/peers/stock_peers.py): their jobs
# are small and short, and C2's compiler threads and G1's workers took a third of a driver's CPU on 2 cores
# (measured: 6 batch reads and 2 streams of 20,000 messages, JVM CPU 47-53 s with the defaults, 27-30 s with these).
JIT_FLAGS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
DUMP_TIMEOUT_S = 600


def _spark_jars() -> str:
    import pyspark

    return os.path.join(os.path.dirname(pyspark.__file__), "jars")


def archive_path() -> str:
    """build/spark-cds/<hash of the Java version and Spark's jars>.jsa"""
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    jars = _spark_jars()
    listing = "\n".join(f"{n} {os.path.getsize(os.path.join(jars, n))}" for n in sorted(os.listdir(jars)))
    key = hashlib.sha256((java + listing).encode()).hexdigest()[:16]
    return os.path.join(ROOT, "build", "spark-cds", f"{key}.jsa")


def submit_args(java_options: str) -> str:
    """PYSPARK_SUBMIT_ARGS giving a driver these JVM flags before its own spark.driver.extraJavaOptions."""
    return f'--conf "spark.driver.defaultJavaOptions={java_options}" pyspark-shell'


def start_archive() -> tuple[str, Optional[subprocess.Popen]]:
    """The archive's path, and the job writing it when it is missing (30-120 s), started in the background: drivers
    started before it is written run without it (a JVM given a missing archive says nothing and loads its classes
    as usual), later ones map it. stop_archive() ends the job."""
    path = archive_path()
    if os.path.exists(path):
        return path, None
    os.makedirs(os.path.dirname(path), exist_ok=True)
    partial = f"{path}.{os.getpid()}.tmp"
    env = {k: v for k, v in os.environ.items() if k != "SPARK_CONF_DIR"}
    env.update(PYSPARK_PYTHON=sys.executable,
               PYSPARK_SUBMIT_ARGS=submit_args(f"{JIT_FLAGS} -XX:ArchiveClassesAtExit={partial}"))
    work = tempfile.mkdtemp(prefix="spark-cds-")
    log = open(os.path.join(work, "job.log"), "w")
    try:
        # niced: it runs beside the first tests, whose Spark workers must connect back within Spark's fixed 10 s
        job = subprocess.Popen(["nice", "-n", "19", sys.executable, os.path.abspath(__file__), work, partial, path],
                               env=env, cwd=work,
                               stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    finally:
        log.close()
    job.work = work  # type: ignore[attr-defined]
    return path, job


def stop_archive(job: Optional[subprocess.Popen], wait_s: float = DUMP_TIMEOUT_S) -> None:
    """Wait for the job (it ends by itself once the archive is written), killed after wait_s; its log is shown
    when it wrote no archive."""
    if job is None:
        return
    try:
        job.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
    work = job.work  # type: ignore[attr-defined]
    if job.returncode != 0:
        with open(os.path.join(work, "job.log")) as f:
            print(f"spark_cds: no class data sharing archive for the tests' Spark drivers (exit {job.returncode}): "
                  f"{f.read()[-2000:]}", file=sys.stderr)
    shutil.rmtree(work, ignore_errors=True)


def _driver_job(work: str, partial: str, path: str) -> None:
    """What the tests' drivers do, small: a store read in batch and as a stream (Python data source, Arrow) and an
    exactly-once write into another topic; once the driver's JVM has exited (writing the archive to `partial`),
    the archive is moved to `path` whole."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    from store import MessageStore

    src = os.path.join(work, "store")
    with MessageStore(src) as s:
        s.create_topic("In", 2)
        for q in (0, 1):
            s.put_batch("In", [b"m-%d" % i for i in range(200)], queue_id=q, tags="T", keys="k")
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").config("spark.sql.shuffle.partitions", "2")
             .getOrCreate())
    read = spark.read.format("rmq").option("topic", "In").load(src)
    read.where("tags = 'T'").groupBy("queue_id").count().collect()
    read.select("body", "tags").write.format("rmq").option("topic", "Out").mode("append").save(src)
    stream = (spark.readStream.format("rmq").option("subscribe", "In").option("startingOffsets", "earliest")
              .load(src).select("body", "tags")
              .writeStream.format("rmq").option("topic", "Out2")
              .option("checkpointLocation", os.path.join(work, "cp")).trigger(availableNow=True).start(src))
    stream.awaitTermination()
    spark.stop()
    gateway = SparkContext._gateway
    if gateway is not None:
        gateway.shutdown()
        proc = getattr(gateway, "proc", None)
        if proc is not None:  # the JVM writes the archive as it exits: wait for it
            proc.stdin.close()
            proc.wait(timeout=DUMP_TIMEOUT_S)
    if not os.path.exists(partial):
        raise SystemExit(f"the driver's JVM wrote no archive at {partial}")
    os.replace(partial, path)


if __name__ == "__main__":
    _driver_job(*sys.argv[1:4])
