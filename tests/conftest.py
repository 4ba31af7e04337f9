"""One SparkSession for the whole test session (Spark start-up costs ~10 s; CI has 2 cores)."""
import os
import re
import sys

import pytest

# Python workers must run this interpreter, or they fail with "Python worker failed to connect back".
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable


@pytest.fixture(scope="session")
def spark():
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2,2]")  # 2 attempts per task: the sink tests need a retry
        .appName("rmq-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", "-Dlog4j2.level=WARN")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("WARN")
    yield session
    session.stop()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`make test` runs two pytest-xdist workers. A work unit is a module (its module fixtures are set up once), and
    every test of one stock RocketMQ version (one stock cluster per version for the session, tests/peers/conftest.py).
    pytest-xdist's own --dist loadgroup cannot do this under pytest 9 (it renames items through an attribute pytest
    no longer reads)."""
    from xdist.scheduler import LoadScopeScheduling

    class ModuleOrStockVersion(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            stock = re.search(r"\[rocketmq-(\d[\d.]*\d)", nodeid)
            return f"stock-{stock.group(1)}" if stock else nodeid.split("::")[0]

    return ModuleOrStockVersion(config, log)
