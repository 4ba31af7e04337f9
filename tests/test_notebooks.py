"""Every notebook in notebooks/ runs top to bottom, every cell in order, as a user runs it.

The kernel is "rmq-spark", which `make venv` installs into .venv (ipykernel install --sys-prefix): it runs
this interpreter, so Spark's Python workers and the notebook share the project's packages. A notebook fails
the test on any error in any cell, on a trace in any cell's output (the JVM and Spark's Python workers write to
the kernel's stderr, which the running cell shows); plots must come out as images.

The notebooks of one test run share one kernel (SharedKernel): each one starts with an empty namespace and must
leave no SparkContext behind (each ends with spark.stop()), and the next one's SparkSession is a new SparkContext
in the JVM the first notebook started. A kernel and JVM of their own for each notebook cost 20-30 s apiece
(Spark's start and its first queries' warm-up); a notebook that fails leaves its kernel, and the next one gets a
fresh kernel. The first notebook run, or one run alone (`pytest -k 03_exactly`), starts its own JVM as a user's
first run does.
"""
from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbclient.util import run_sync

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_DIR = ROOT / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
# Notebooks on a stock Apache RocketMQ cluster the test starts (RMQ_NAMESRV), not in test_notebook_runs.
STOCK = NOTEBOOK_DIR / "07_stock_cluster.ipynb"
KERNEL = "rmq-spark"
# Notebooks that must draw at least one plot.
PLOTS = {"02_filters.ipynb", "04_operations.ipynb"}


def check_kernel() -> None:
    try:
        spec = KernelSpecManager().get_kernel_spec(KERNEL)
    except NoSuchKernel:
        pytest.fail(f"no Jupyter kernel {KERNEL!r}: run `make venv` (it runs `python -m ipykernel install "
                    f"--sys-prefix --name {KERNEL}`)")
    if os.path.abspath(spec.argv[0]) != os.path.abspath(sys.executable):
        pytest.fail(f"kernel {KERNEL!r} runs {spec.argv[0]}, not this interpreter {sys.executable}: "
                    f"run `{sys.executable} -m ipykernel install --sys-prefix --name {KERNEL}`")


def test_every_notebook_is_tested():
    assert [p.name for p in NOTEBOOKS] == [
        "01_quickstart.ipynb", "02_filters.ipynb", "03_exactly_once_pipeline.ipynb", "04_operations.ipynb",
        "05_replay_a_broker_store.ipynb", "06_cluster.ipynb", "07_stock_cluster.ipynb"]


def test_notebooks_are_saved_without_outputs():
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        dirty = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and (c.outputs or c.execution_count)]
        assert not dirty, f"{path.name}: cells {dirty} hold outputs; clear them before committing"
        assert nb.metadata.kernelspec.name == KERNEL


def shown_failures(outputs) -> list[str]:
    """What a reader of the executed notebook would take for a failure: an error output, a Java stack trace (or
    the /tmp/artifacts-... deletion trace) on stderr, a Python traceback in any stream (Spark's Python workers
    and daemon print theirs to the kernel's stderr, which the cell shows)."""
    found = [f"error output: {o.get('ename')}: {o.get('evalue')}" for o in outputs if o.output_type == "error"]
    stderr = "".join(o.get("text", "") for o in outputs if o.output_type == "stream" and o.get("name") == "stderr")
    if "\tat org.apache." in stderr or "artifacts-" in stderr:
        found.append(f"Java trace: {stderr[-2000:]}")
    streams = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    if "Traceback (most recent call last)" in streams:
        found.append(f"Python traceback: {streams[-3000:]}")
    return found


def test_a_python_workers_traceback_in_a_cell_fails_the_notebook():
    """As pyspark's daemon printed it in notebook 06 when show(5) ended a Python reader's task early."""
    daemon = ('Traceback (most recent call last):\n  File ".../pyspark/daemon.py", line 264, in manager\n'
              '  File ".../pyspark/daemon.py", line 95, in worker\nBrokenPipeError: [Errno 32] Broken pipe\n')
    clean = [nbformat.v4.new_output("stream", name="stdout", text="+-----+\n|count|\n+-----+\n")]
    assert shown_failures(clean) == []
    for name in ("stderr", "stdout"):
        [found] = shown_failures(clean + [nbformat.v4.new_output("stream", name=name, text=daemon)])
        assert found.startswith("Python traceback") and "BrokenPipeError" in found
    java = "py4j.protocol.Py4JJavaError\n\tat org.apache.spark.sql.Dataset.show(Dataset.scala:1)\n"
    assert shown_failures([nbformat.v4.new_output("stream", name="stderr", text=java)])[0].startswith("Java trace")


def kernel_env() -> dict:
    """The kernel's environment: this one, whose PYSPARK_SUBMIT_ARGS gives the notebooks' driver the tests' JVM
    flags (conftest.py) as spark.driver.defaultJavaOptions, which Spark puts before the notebook's own
    extraJavaOptions: the notebooks run unchanged."""
    return dict(os.environ)


class SharedKernel:
    """One "rmq-spark" kernel for the notebooks of a test run, started by the first notebook executed in it, its
    namespace emptied (%reset -f) before each later notebook and checked to hold no SparkContext after each."""

    def __init__(self) -> None:
        self.km: AsyncKernelManager | None = None

    def _client(self, nb) -> NotebookClient:
        if self.km is None:
            self.km = AsyncKernelManager(kernel_name=KERNEL)
        return NotebookClient(nb, km=self.km, kernel_name=KERNEL, timeout=180, allow_errors=False,
                              resources={"metadata": {"path": str(NOTEBOOK_DIR)}})

    def _run(self, nb) -> list:
        """Every cell of `nb` in order (its outputs kept in `nb`); the outputs."""
        client = self._client(nb)
        try:
            client.execute(env=kernel_env())  # raises CellExecutionError, naming the cell, on any error
        except BaseException:
            self.shutdown()  # whatever the notebook left (a SparkContext, brokers): the next one starts afresh
            raise
        finally:
            if client.kc is not None:
                client.kc.stop_channels()
        return [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]

    def execute(self, nb) -> list:
        """Every cell of `nb` in order; the outputs of its cells and of the kernel's housekeeping around it (what
        the JVM wrote after the notebook's last cell is shown in the next cell the kernel runs)."""
        fresh = self.km is None or not self.km.has_kernel
        reset = [] if fresh else self._run(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("%reset -f")]))
        outputs = self._run(nb)
        check = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
            "from pyspark import SparkContext\n"
            "assert SparkContext._active_spark_context is None, 'the notebook left its SparkContext running'")])
        return reset + outputs + self._run(check)

    def shutdown(self) -> None:
        if self.km is not None and self.km.has_kernel:
            run_sync(self.km.shutdown_kernel)(now=True)
        self.km = None


@pytest.fixture(scope="module")
def kernel():
    shared = SharedKernel()
    yield shared
    shared.shutdown()


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if p != STOCK], ids=[p.stem for p in NOTEBOOKS if p != STOCK])
def test_notebook_runs(path, kernel):
    check_kernel()
    nb = nbformat.read(path, as_version=4)
    started = time.monotonic()
    outputs = kernel.execute(nb)
    print(f"{path.name}: {time.monotonic() - started:.1f} s")
    assert not shown_failures(outputs), shown_failures(outputs)
    if path.name in PLOTS:
        assert any("image/png" in o.get("data", {}) for o in outputs), f"{path.name} drew no plot"


def test_stock_cluster_notebook_runs_against_a_stock_broker(kernel, tmp_path):
    """07 against one stock broker of the oldest tested version: every cell runs; the restarted stream wrote each
    message once; the group's offsets the stream committed are at the queue ends in stock admin's consumeStats."""
    sys.path.insert(0, str(ROOT / "tests" / "peers"))
    from stock_peers import STOCK_4, StockCluster, compiled

    check_kernel()
    compiled(STOCK_4)
    nb = nbformat.read(STOCK, as_version=4)
    with StockCluster(STOCK_4, tmp_path / "stock", brokers=("broker-a",)) as cluster:
        # as a user sets it before starting Jupyter; the shared kernel may be running already
        nb.cells.insert(0, nbformat.v4.new_code_cell(f"import os; os.environ['RMQ_NAMESRV'] = {cluster.namesrv!r}"))
        started = time.monotonic()
        outputs = kernel.execute(nb)
        print(f"{STOCK.name}: {time.monotonic() - started:.1f} s")
        assert not shown_failures(outputs), shown_failures(outputs)
        shown = "".join(str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", "")) for o in outputs)
        assert "(250, 250)" in shown, "the restarted stream's Parquet rows and distinct bodies"
        [group] = set(re.findall(r"notebook-07-[0-9a-f]{8}", shown))
        stats = cluster.java().consume_stats(group)
    assert len(stats) == 4 and sum(s["brokerOffset"] for s in stats) == 250, stats
    assert [s["consumerOffset"] for s in stats] == [s["brokerOffset"] for s in stats], "lag left in stock admin"
