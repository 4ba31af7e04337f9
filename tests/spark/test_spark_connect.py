"""format("rmq") from Spark Connect clients: a Connect server this module starts (its Python workers run this
interpreter), remote("local[2]") in a child process, and the error a client gets from a server whose Python lacks
rmq-spark."""
import contextlib
import glob
import json
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
from source_testkit import fill, get_message_rows

from store import MessageStore

try:
    import grpc  # noqa: F401  (what pyspark[connect] adds)
except ImportError:
    pytest.fail("Spark Connect needs pyspark[connect]: pip install 'rmq-spark[connect]' (make test installs it)",
                pytrace=False)

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
    env = dict(os.environ, PYSPARK_PYTHON=python, SPARK_LOCAL_DIRS=str(tmp),
               SPARK_LOG_DIR=str(tmp), SPARK_PID_DIR=str(tmp))
    env.pop("PYSPARK_DRIVER_PYTHON", None)
    spark_submit = os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-submit")
    log = open(os.path.join(tmp, "server.log"), "wb")
    proc = subprocess.Popen(
        [spark_submit, "--master", "local[2]", "--class", SERVER_CLASS,
         "--conf", f"spark.connect.grpc.binding.port={port}",
         "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
         "--conf", f"spark.driver.defaultJavaOptions={os.environ['RMQ_TEST_SPARK_JAVA_OPTIONS']}",  # conftest
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


def run_client(code: str, tmp, **env_extra) -> dict:
    """Run a Spark Connect client in a child process and return the JSON its last line prints. A Connect session
    switches the whole Python process to Connect mode (pyspark's Column and functions then build Connect plans), so
    a client never shares the test worker with the classic session the other modules use."""
    os.makedirs(tmp, exist_ok=True)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, **env_extra)
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=tmp, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def remote(tmp_path_factory):
    """The URL of a Connect server whose Python workers run this interpreter."""
    tmp = tmp_path_factory.mktemp("connect-server")
    with connect_server(str(tmp), sys.executable) as url:
        yield url


def test_connect_server_batch_read(remote, tmp_path):
    store = fill(tmp_path / "store", "T", n=30, queues=3)
    got = run_client(f"""
        import json
        from pyspark.sql import SparkSession
        import rmq_spark
        spark = SparkSession.builder.remote({remote!r}).create()
        rmq_spark.register(spark)
        rows = spark.read.format("rmq").option("subscribe", "T").load({store!r}) \\
            .select("queue_id", "queue_offset", "body").collect()
        print(json.dumps([[r.queue_id, r.queue_offset, bytes(r.body).decode()] for r in rows]))
        spark.stop()
    """, tmp_path / "client")
    assert sorted((q, o) for q, o, _ in got) == sorted((i % 3, i // 3) for i in range(30))
    assert {b for _, _, b in got} == {f"body-T-{i}" for i in range(30)}


def test_connect_server_stream_to_parquet(remote, tmp_path):
    store = fill(tmp_path / "store", "S", n=40, queues=2)
    out, chk = str(tmp_path / "out"), str(tmp_path / "chk")
    got = run_client(f"""
        import json
        from pyspark.sql import SparkSession
        spark = SparkSession.builder.remote({remote!r}).create()
        q = (spark.readStream.format("rmq").option("subscribe", "S").option("startingOffsets", "earliest")
             .load({store!r}).select("queue_id", "queue_offset", "body")
             .writeStream.format("parquet").option("path", {out!r}).option("checkpointLocation", {chk!r})
             .trigger(availableNow=True).start())
        finished = q.awaitTermination(300)
        print(json.dumps({{"finished": finished, "error": str(q.exception()) if q.exception() else None}}))
        spark.stop()
    """, tmp_path / "client")
    assert got == {"finished": True, "error": None}, got
    table = pq.read_table(glob.glob(os.path.join(out, "*.parquet")))
    assert sorted(zip(table["queue_id"].to_pylist(), table["queue_offset"].to_pylist())) == \
        sorted((i % 2, i // 2) for i in range(40))


def test_connect_server_write(remote, tmp_path):
    dst = str(tmp_path / "dst")
    got = run_client(f"""
        import json
        from pyspark.sql import SparkSession
        spark = SparkSession.builder.remote({remote!r}).create()
        rows = spark.range(25).selectExpr("'OUT' AS topic", "CAST(concat('m', id) AS BINARY) AS body",
                                          "'TagW' AS tags")
        rows.write.format("rmq").mode("append").save({dst!r})
        spark.stop()
        print(json.dumps("written"))
    """, tmp_path / "client")
    assert got == "written"
    from rmq_spark.schema import COLUMNS

    with MessageStore(dst, read_only=True) as s:
        queues = s.queue_count("OUT")
    back = [dict(zip(COLUMNS, r)) for q in range(queues) for r in get_message_rows(dst, "OUT", q)]
    assert sorted(bytes(r["body"]) for r in back) == sorted(f"m{i}".encode() for i in range(25))
    assert {r["tags"] for r in back} == {"TagW"}


def test_remote_local_session_in_a_child(tmp_path):
    """remote("local[2]") starts its own Connect server inside the client's process."""
    store = fill(tmp_path / "store", "L", n=12, queues=2)
    got = run_client(f"""
        import json
        from pyspark.sql import SparkSession
        import rmq_spark
        spark = SparkSession.builder.remote("local[2]").config("spark.ui.enabled", "false").getOrCreate()
        rmq_spark.register(spark)
        print(json.dumps(spark.read.format("rmq").option("subscribe", "L").load({store!r}).count()))
        spark.stop()
    """, tmp_path / "client")
    assert got == 12


def test_server_python_without_rmq_spark_names_the_fix(tmp_path):
    """A server whose Python workers run an interpreter without rmq-spark (the base interpreter of this venv):
    register() on the client says the server's Python needs rmq-spark and PYSPARK_PYTHON."""
    bare = os.path.realpath(shutil.which("python3", path=os.path.join(sys.base_prefix, "bin")) or "")
    assert bare and subprocess.run([bare, "-c", "import rmq_spark"], cwd="/", capture_output=True).returncode, \
        f"this test needs an interpreter without rmq-spark; the venv's base interpreter {bare!r} has it"
    with connect_server(str(tmp_path / "server"), bare) as url:
        got = run_client(f"""
            import json
            from pyspark.sql import SparkSession
            import rmq_spark
            from rmq_spark.register import RmqConnectServerError
            spark = SparkSession.builder.remote({url!r}).create()
            try:
                rmq_spark.register(spark)
                print(json.dumps(None))
            except RmqConnectServerError as e:
                print(json.dumps(str(e)))
            finally:
                spark.stop()
        """, tmp_path / "client")
    assert got is not None, "register() accepted a server whose Python lacks rmq-spark"
    assert "Spark Connect server" in got and "PYSPARK_PYTHON" in got and bare in got
