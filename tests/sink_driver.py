"""A Spark driver of its own for the wire sink's fault tests (tests/spark/wire_sink_child.py in a child process, a
session leader, so that it can be SIGKILLed with everything it started): started, waited for at a pause of its
commit (the fault plugin tests/faults/sitecustomize.py), killed."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from wire_cluster import ROOT, wait_until

from rmq_client import PullConsumer

CHILD = os.path.join(ROOT, "tests", "spark", "wire_sink_child.py")
FAULTS = os.path.join(ROOT, "tests", "faults")


def fault_env(pause: str) -> dict[str, str]:
    """The environment of a driver whose sink commit pauses (or kills the driver) at `pause`,
    <point>@<batchId>:<seconds|kill>[,...]: the fault plugin first on its Python path."""
    return {"PYTHONPATH": os.pathsep.join((FAULTS, ROOT)), "RMQ_WIRE_SINK_TEST_PAUSE": pause}


def input_bodies(n: int) -> set[bytes]:
    """The bodies of the driver's input: topic In, two queues of n / 2 messages (in-<queue>-<i>)."""
    return {b"in-%d-%d" % (q, i) for q in (0, 1) for i in range(n // 2)}


def tally(namesrv: str, topic: str, want: set[bytes]) -> dict:
    """The topic as a consumer sees it (committed messages only), against the bodies that should be there once."""
    bodies: list[bytes] = []
    with PullConsumer(namesrv, "fault-check") as c:
        for mq, (lo, hi) in c.queue_bounds(topic).items():
            for rb in c.read_range(mq, lo, hi):
                bodies.extend(rb.column("body").to_pylist())
    return {"rows": len(bodies), "duplicates": len(bodies) - len(set(bodies)), "lost": len(want - set(bodies))}


def start_driver(src: str, namesrv: str, topic: str, checkpoint: str, pause: str = "") -> subprocess.Popen:
    """The driver streams topic In of the store directory `src` into `topic`; its stderr goes to
    <checkpoint>.driver.log, shown when it ends before a pause is reached."""
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, **fault_env(pause))
    with open(checkpoint + ".driver.log", "a") as log:
        return subprocess.Popen([sys.executable, CHILD, src, namesrv, topic, checkpoint], env=env,
                                stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True)


def wait_paused(proc: subprocess.Popen, checkpoint: str, marker: str) -> None:
    """Until the driver's commit pauses at marker; fails at once, with the driver's log, if the driver ends."""
    def paused() -> bool:
        if os.path.exists(os.path.join(checkpoint, "rmq-wire-sink", marker)):
            return True
        if proc.poll() is not None:
            if os.path.exists(os.path.join(checkpoint, "rmq-wire-sink", marker)):
                return True  # it killed itself there (`<point>@<batch>:kill`)
            with open(checkpoint + ".driver.log") as log:
                tail = log.read()[-4000:]
            pytest.fail(f"the driver ended (exit {proc.returncode}) before pausing at {marker}:\n{tail}")
        return False
    wait_until(paused, 300, f"the commit pausing at {marker}")


def resume(checkpoint: str, marker: str) -> None:
    open(os.path.join(checkpoint, "rmq-wire-sink", marker.replace("paused-", "resume-", 1)), "w").close()


def kill_driver(proc: subprocess.Popen) -> None:
    """SIGKILL the driver with everything it started (its JVM and Python workers)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(30)


def finish(proc: subprocess.Popen) -> None:
    """Wait for the driver's end: it must succeed."""
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out


def run_driver(src: str, namesrv: str, topic: str, checkpoint: str, pause: str = "", on_pause=None,
               marker: str = "") -> None:
    """One run of the driver: to its end, or until it pauses at marker, where on_pause(proc) acts (a kill)."""
    proc = start_driver(src, namesrv, topic, checkpoint, pause)
    try:
        if on_pause is not None:
            wait_paused(proc, checkpoint, marker)
            on_pause(proc)
        out, _ = proc.communicate(timeout=300)
        if on_pause is None or proc.returncode != -signal.SIGKILL:
            assert proc.returncode == 0, out
    finally:
        if proc.poll() is None:
            kill_driver(proc)
