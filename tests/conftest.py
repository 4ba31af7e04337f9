"""One SparkSession for the whole test session (Spark start-up costs ~10 s; CI has 2 cores)."""
import os
import re
import sys

import pytest

# Python workers must run this interpreter, or they fail with "Python worker failed to connect back".
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable


# Spark's key=value for its Python workers' daemon (tests/spark/test_python_daemon.py)
PYTHON_DAEMON = "spark.python.daemon.module=rmq_spark.daemon"


def pytest_configure(config) -> None:
    """The JVM flags of every Spark driver the tests start, in PYSPARK_SUBMIT_ARGS (which pyspark hands to
    spark-submit, and every child process inherits): the client compiler and the serial collector
    (tests/spark_cds.py JIT_FLAGS), and the suite's class data sharing archive, whose job the controller starts in
    the background when it is missing (drivers started before it is written do without it). Also their Python
    workers' daemon, rmq_spark.daemon as conf/spark-defaults.conf gives it: the workers start with the source
    imported (the suite starts hundreds of them).
    RMQ_TEST_SPARK_JAVA_OPTIONS holds the same flags for drivers that set their own spark.driver options."""
    import spark_cds  # tests/ is on the path: this conftest's folder

    if hasattr(config, "workerinput"):
        archive = spark_cds.archive_path()
    else:
        archive, config._spark_cds_job = spark_cds.start_archive()
    flags = f"{spark_cds.JIT_FLAGS} -XX:SharedArchiveFile={archive}"
    os.environ["RMQ_TEST_SPARK_JAVA_OPTIONS"] = flags
    os.environ["PYSPARK_SUBMIT_ARGS"] = f"--conf {PYTHON_DAEMON} {spark_cds.submit_args(flags)}"
    os.environ.pop("SPARK_CONF_DIR", None)  # a directory on the drivers' class path: the archive would not map


def pytest_unconfigure(config) -> None:
    import spark_cds

    spark_cds.stop_archive(getattr(config, "_spark_cds_job", None))


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


# Seconds per work unit in a full run on two workers (fresh clone, loaded 2-core machine: the slowest tests'
# durations summed per unit, rounded up); units not named here take a few seconds and weigh by their number of tests.
# Only the order in which units are dealt depends on these figures.
UNIT_SECONDS = {
    "tests/test_notebooks.py": 400,  # 07_stock_cluster starts a stock broker of its own
    "tests/hosts/test_across_hosts.py": 180,
    "stock-5.5.0": 460,  # test_mqadmin_matrix.py and test_stock_sink_faults.py are in it
    "stock-4.9.7": 240,
    "tests/spark/test_wire_sink_faults.py": 200,
    "tests/spark/test_spark_connect.py": 190,  # two Connect servers and a remote("local[2]") child
    "tests/peers/test_stock_store.py": 75,
    "tests/peers/test_java_client_matrix.py": 90,
    "tests/peers/test_stock_failover.py": 310,  # two stock 4.9.7 clusters of three brokers
    "tests/peers/test_stock_controller_failover.py": 130,  # three stock 5.5.0 brokers in controller mode
    "tests/broker/test_broker.py": 80,
    "tests/spark/test_wire_broker_away.py": 100,
    "tests/spark/test_source_columns.py": 90,
    "tests/spark/test_source_batch.py": 30,
    "tests/spark/test_wire_sink.py": 85,
    "tests/spark/test_source_discovery.py": 65,
    "tests/test_demo.py": 80,
    "tests/spark/test_sink_exactly_once.py": 100,
    "tests/spark/test_wire_acl.py": 55,
    "tests/store/test_recovery.py": 50,
    "tests/test_docs.py": 90,  # README's runnable blocks start a Spark driver
    "tests/spark/test_source_stream.py": 30,
    "tests/spark/test_sink_errors.py": 25,
    "tests/spark/test_sink_roundtrip.py": 20,
    "tests/spark/test_source_offsets_past_end.py": 20,
    "tests/spark/test_wire_source.py": 80,
    "tests/client/test_cli_wire.py": 75,
}


def unit_of(nodeid: str) -> str:
    """A test's work unit: its module, or every test of one stock RocketMQ version (one stock cluster per version
    for the session, tests/peers/conftest.py)."""
    stock = re.search(r"\[rocketmq-(\d[\d.]*\d)", nodeid)
    return f"stock-{stock.group(1)}" if stock else nodeid.split("::")[0]


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`make test` runs two pytest-xdist workers. A work unit is a module (its module fixtures are set up once), or
    every test of one stock RocketMQ version (unit_of). pytest-xdist's own --dist loadgroup cannot do this under
    pytest 9 (it renames items through an attribute pytest no longer reads). Units are dealt longest first
    (UNIT_SECONDS): xdist's own order (most tests first) left the 3-minute one-test units to the end, one worker
    running them while the other idled."""
    from collections import OrderedDict

    from xdist.scheduler import LoadScopeScheduling

    class LongestUnitFirst(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

        def _assign_work_unit(self, node) -> None:
            def seconds(unit: tuple[str, dict]) -> float:
                return UNIT_SECONDS.get(unit[0], 0.3 * len(unit[1]))
            self.workqueue = OrderedDict(sorted(self.workqueue.items(), key=seconds, reverse=True))
            super()._assign_work_unit(node)

    return LongestUnitFirst(config, log)


_unit_seconds: dict[str, float] = {}


def pytest_runtest_logreport(report) -> None:
    """Seconds per work unit (setup, call and teardown of its tests), summed on the controller (pytest-xdist sends
    it every worker's reports): what UNIT_SECONDS is kept from."""
    _unit_seconds[unit_of(report.nodeid)] = _unit_seconds.get(unit_of(report.nodeid), 0.0) + report.duration


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if not _unit_seconds or hasattr(config, "workerinput"):
        return
    slowest = sorted(_unit_seconds.items(), key=lambda kv: kv[1], reverse=True)[:20]
    terminalreporter.write_sep("=", "slowest work units (seconds, summed over their tests)")
    for unit, seconds in slowest:
        terminalreporter.write_line(f"{seconds:8.1f}  {unit}")
