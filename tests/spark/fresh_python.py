"""A script run as Spark runs its Python worker or planner processes: in a fresh interpreter, the project
importable; what it prints last is its answer, one JSON line."""
from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_fresh(script: str, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", script, *args], env=env, capture_output=True, text=True,
                          timeout=120)


def fresh_json(script: str, *args: str) -> dict:
    """The last line the script printed, as JSON; the script's stderr if it failed."""
    proc = run_fresh(script, *args)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])
