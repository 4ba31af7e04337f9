"""Explicit registration, for sessions where the package is not on the Python workers' import path at
start-up (format("rmq") is otherwise discovered through the top-level module pyspark_rmq)."""
from __future__ import annotations

CONNECT_FIX = (
    "rmq-spark is not installed in the Python of the Spark Connect server ({python}): the data source runs there, "
    "not in this client. Install rmq-spark into the server's Python (pip install rmq-spark) and start the server "
    "with PYSPARK_PYTHON set to that interpreter (e.g. PYSPARK_PYTHON=/path/to/venv/bin/python "
    "start-connect-server.sh); see docs/spark-connect.md"
)


class RmqConnectServerError(RuntimeError):
    """The Spark Connect server's Python workers cannot import rmq_spark."""


def _is_connect(spark) -> bool:
    return type(spark).__module__.startswith("pyspark.sql.connect")


def _server_python(spark) -> tuple[str, bool]:
    """(the server's Python worker interpreter, whether it imports rmq_spark), asked of one Python worker."""
    from pyspark.sql.functions import udf

    def probe(_):  # a local function: cloudpickle sends it by value, so the worker needs no rmq_spark to run it
        import importlib.util
        import sys

        return sys.executable + "\t" + ("1" if importlib.util.find_spec("rmq_spark") is not None else "0")

    # not Arrow-optimized: the probe must run on a worker whose interpreter has none of pyarrow, pandas, rmq_spark
    answer = spark.range(1).select(udf(probe, "string", useArrow=False)("id")).first()[0]
    python, _, found = answer.rpartition("\t")
    return python, found == "1"


def register(spark) -> None:
    """Registers the "rmq" data source on `spark`. On a Spark Connect session it first checks that the server's
    Python workers import rmq_spark, and raises RmqConnectServerError naming the fix when they do not."""
    from .source import RmqDataSource

    if _is_connect(spark):
        python, found = _server_python(spark)
        if not found:
            raise RmqConnectServerError(CONNECT_FIX.format(python=python))
    spark.dataSource.register(RmqDataSource)
