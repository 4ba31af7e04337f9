"""The wire sink's fault plugin: with this directory first on PYTHONPATH, every Python process of a Spark driver
(its daemons and the workers that run the sink's commit) imports this module at start-up. With
RMQ_WIRE_SINK_TEST_PAUSE=<point>@<batchId>:<seconds>[,...] in the environment, it adds an observer to the commit's
named steps (rmq_log.cluster_writes.COMMIT_STEPS) once that module is imported: at <point> of batch
<batchId> the commit writes paused-<point>-<batchId> into the decisions directory and waits until the test
writes resume-<point>-<batchId> beside it, or for the seconds at most; with `kill` for the seconds it SIGKILLs
the driver's session there (for a driver started as a session leader: a kill from outside comes late, and
meanwhile the still-living checker may answer the brokers' checks).

The sink module is not imported here: Spark's daemon forks its workers and must hold no threads when it does
(pyarrow starts some), so the observer is added by an import hook when a worker imports the sink."""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import signal
import sys
import time

SINK = "rmq_log.cluster_writes"
SPECS = [s for s in os.environ.get("RMQ_WIRE_SINK_TEST_PAUSE", "").split(",") if s]


def pause(directory: str, point: str, batch_id: int) -> None:
    for spec in SPECS:
        where, _, seconds = spec.partition(":")
        if where != f"{point}@{batch_id}":
            continue
        os.makedirs(directory, exist_ok=True)
        open(os.path.join(directory, f"paused-{point}-{batch_id}"), "w").close()
        if seconds == "kill":
            os.killpg(os.getsid(0), signal.SIGKILL)  # the driver's group; Spark's daemon has its own
            os.kill(os.getpid(), signal.SIGKILL)
        resume = os.path.join(directory, f"resume-{point}-{batch_id}")
        until = time.monotonic() + float(seconds)
        while time.monotonic() < until and not os.path.exists(resume):
            time.sleep(0.05)


class _AddObserver(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the sink module as the other finders do, and adds `pause` to its steps once it has run."""

    def find_spec(self, name, path, target=None):
        if name != SINK:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        self.inner = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module) -> None:
        self.inner.exec_module(module)
        module.COMMIT_STEPS.append(pause)


if SPECS:
    sys.meta_path.insert(0, _AddObserver())
