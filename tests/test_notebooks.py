"""Every notebook in notebooks/ runs top to bottom in a fresh kernel, as a user's first run would.

The kernel is "rmq-spark", which `make venv` installs into .venv (ipykernel install --sys-prefix): it runs
this interpreter, so Spark's Python workers and the notebook share the project's packages. A notebook fails
the test on any error in any cell; plots must come out as images.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_DIR = ROOT / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
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
        "05_replay_a_broker_store.ipynb", "06_cluster.ipynb"]


def test_notebooks_are_saved_without_outputs():
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        dirty = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and (c.outputs or c.execution_count)]
        assert not dirty, f"{path.name}: cells {dirty} hold outputs; clear them before committing"
        assert nb.metadata.kernelspec.name == KERNEL


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path):
    check_kernel()
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, kernel_name=KERNEL, timeout=180, allow_errors=False,
                            resources={"metadata": {"path": str(NOTEBOOK_DIR)}})
    started = time.monotonic()
    client.execute()  # raises CellExecutionError, naming the cell, on any error
    print(f"{path.name}: {time.monotonic() - started:.1f} s")
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    stderr = "".join(o.get("text", "") for o in outputs if o.output_type == "stream" and o.get("name") == "stderr")
    assert "\tat org.apache." not in stderr and "artifacts-" not in stderr, stderr[-2000:]  # no Java trace shown
    streams = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "Traceback (most recent call last)" not in streams, streams[-3000:]  # nor a Python one (a worker's)
    if path.name in PLOTS:
        assert any("image/png" in o.get("data", {}) for o in outputs), f"{path.name} drew no plot"
