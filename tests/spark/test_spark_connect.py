"""format("rmq") from Spark Connect clients: a Connect server this module starts (its Python workers run this
interpreter), remote("local[2]") in a child process, and the error a client gets from a server whose Python lacks
rmq-spark."""
import contextlib
import glob
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time

import pyarrow.parquet as pq
import pyspark
import pytest
from source_testkit import fill

pytest.importorskip("grpc", reason="Spark Connect needs pyspark[connect] (pip install 'rmq-spark[connect]')")

SPARK_CONF_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "spark_conf")
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
START_BOUND = 180.0  # seconds a server may take to listen (a loaded 2-core machine)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        return True
    return False


@contextlib.contextmanager
def connect_server(tmp, python):
    """A Spark Connect server on a free port whose Python workers run `python`; stopped whatever happens."""
    port = _free_port()
    os.makedirs(tmp, exist_ok=True)
    env = dict(os.environ, PYSPARK_PYTHON=python, SPARK_CONF_DIR=SPARK_CONF_DIR, SPARK_LOCAL_DIRS=str(tmp),
               SPARK_LOG_DIR=str(tmp), SPARK_PID_DIR=str(tmp))
    env.pop("PYSPARK_DRIVER_PYTHON", None)
    spark_submit = os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-submit")
    log = open(os.path.join(tmp, "server.log"), "wb")
    proc = subprocess.Popen(
        [spark_submit, "--master", "local[2]", "--class", SERVER_CLASS,
         "--conf", f"spark.connect.grpc.binding.port={port}",
         "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
         "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=2",
         "--conf", "spark.sql.session.timeZone=UTC", "--conf", f"spark.local.dir={tmp}",
         "spark-internal"],
        cwd=tmp, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + START_BOUND
        while not _listening(port):
            if proc.poll() is not None:
                raise RuntimeError(f"the Connect server exited ({proc.returncode}): {_tail(tmp)}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Connect server did not listen within {START_BOUND} s: {_tail(tmp)}")
            time.sleep(0.2)
        yield f"sc://127.0.0.1:{port}"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 15)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
        log.close()


def _tail(tmp) -> str:
    with open(os.path.join(tmp, "server.log"), "rb") as f:
        return f.read()[-3000:].decode(errors="replace")


@pytest.fixture(scope="module")
def remote(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("connect-server")
    with connect_server(str(tmp), sys.executable) as url:
        from pyspark.sql import SparkSession

        session = SparkSession.builder.remote(url).create()
        try:
            yield session
        finally:
            session.stop()


def test_connect_server_batch_read(remote, tmp_path):
    import rmq_spark

    store = fill(tmp_path / "store", "T", n=30, queues=3)
    rmq_spark.register(remote)
    df = remote.read.format("rmq").option("subscribe", "T").load(store)
    rows = df.select("queue_id", "queue_offset", "body").collect()
    assert sorted((r.queue_id, r.queue_offset) for r in rows) == sorted((i % 3, i // 3) for i in range(30))
    assert {bytes(r.body) for r in rows} == {f"body-T-{i}".encode() for i in range(30)}


def test_connect_server_stream_to_parquet(remote, tmp_path):
    store = fill(tmp_path / "store", "S", n=40, queues=2)
    out, chk = str(tmp_path / "out"), str(tmp_path / "chk")
    q = (remote.readStream.format("rmq").option("subscribe", "S").option("startingOffsets", "earliest")
         .load(store)
         .select("queue_id", "queue_offset", "body")
         .writeStream.format("parquet").option("path", out).option("checkpointLocation", chk)
         .trigger(availableNow=True).start())
    assert q.awaitTermination(300), "the availableNow stream did not finish within 300 s"
    assert q.exception() is None
    table = pq.read_table([f for f in glob.glob(os.path.join(out, "*.parquet"))])
    assert sorted(zip(table["queue_id"].to_pylist(), table["queue_offset"].to_pylist())) == \
        sorted((i % 2, i // 2) for i in range(40))


def test_connect_server_write(remote, tmp_path):
    dst = str(tmp_path / "dst")
    rows = remote.range(25).selectExpr("'OUT' AS topic", "CAST(concat('m', id) AS BINARY) AS body",
                                       "'TagW' AS tags")
    rows.write.format("rmq").mode("append").save(dst)
    back = remote.read.format("rmq").option("subscribe", "OUT").load(dst).select("body", "tags").collect()
    assert sorted(bytes(r.body) for r in back) == sorted(f"m{i}".encode() for i in range(25))
    assert {r.tags for r in back} == {"TagW"}


def test_remote_local_session_in_a_child(tmp_path):
    """remote("local[2]") starts its own Connect server in the client's process: a child, beside this process's
    classic session."""
    store = fill(tmp_path / "store", "L", n=12, queues=2)
    code = textwrap.dedent(f"""
        from pyspark.sql import SparkSession
        import rmq_spark
        spark = SparkSession.builder.remote("local[2]").config("spark.ui.enabled", "false").getOrCreate()
        rmq_spark.register(spark)
        n = spark.read.format("rmq").option("subscribe", "L").load({store!r}).count()
        print("COUNT", n)
        spark.stop()
    """)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_CONF_DIR=SPARK_CONF_DIR)
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "COUNT 12" in done.stdout


def test_server_python_without_rmq_spark_names_the_fix(tmp_path):
    """A server whose Python workers run an interpreter without rmq-spark (the base interpreter of this venv):
    register() on the client says the server's Python needs rmq-spark and PYSPARK_PYTHON."""
    import rmq_spark
    from rmq_spark.register import RmqConnectServerError

    bare = os.path.realpath(shutil.which("python3", path=os.path.join(sys.base_prefix, "bin")) or "")
    if not bare or subprocess.run([bare, "-c", "import rmq_spark"], cwd="/", capture_output=True).returncode == 0:
        pytest.skip("no interpreter without rmq-spark on this machine")
    with connect_server(str(tmp_path / "server"), bare) as url:
        from pyspark.sql import SparkSession

        session = SparkSession.builder.remote(url).create()
        try:
            with pytest.raises(RmqConnectServerError) as err:
                rmq_spark.register(session)
            msg = str(err.value)
            assert "Spark Connect server" in msg and "PYSPARK_PYTHON" in msg and bare in msg
        finally:
            session.stop()
