"""One SparkSession for the whole test session (Spark start-up costs ~10 s; CI has 2 cores)."""
import os
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


def pytest_configure(config):
    config.addinivalue_line("markers", "xdist_group(name): tests that pytest-xdist's loadgroup runs on one worker")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own, which reads the groups
def pytest_collection_modifyitems(config, items):
    """`make test` runs two pytest-xdist workers with --dist loadgroup: a module runs whole on one worker (its module
    fixtures are set up once), and every test of one stock RocketMQ version on one worker (one stock cluster per
    version for the session, tests/peers/conftest.py)."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        version = callspec.params.get("stock_version") if callspec else None
        group = f"stock-{version}" if version else item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group(group))
