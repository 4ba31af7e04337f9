"""Helpers shared by the durability tests (imported explicitly; not a conftest plugin)."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Small files: several commitlog files and consume-queue files after a few hundred messages.
# Small files, the IndexFile's too: RocketMQ's default geometry makes a 420 MB (sparse) index file, which a test
# that copies a store reads in full at every copy (measured: 33 of the torn-record test's 48 s).
SMALL = dict(mappedFileSizeCommitLog=4096, mappedFileSizeConsumeQueue=20 * 16, defaultTopicQueueNums=2,
             maxHashSlotNum=1024, maxIndexNum=4096)


def load_crash_bench():
    spec = importlib.util.spec_from_file_location("crash_bench", os.path.join(ROOT, "benchmarks", "crash_bench.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules["crash_bench"] = mod  # dataclasses look their module up by name
    spec.loader.exec_module(mod)
    return mod


def run_python(code: str, *args, timeout: float = 60, check: bool = True, **kw) -> subprocess.CompletedProcess:
    """Run code in a fresh interpreter with the project importable."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *map(str, args)], env=env,
                          capture_output=True, timeout=timeout, check=check, **kw)


def start_python(code: str, *args, **kw) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *map(str, args)], env=env, **kw)


def all_messages(store, topic=None):
    """[(topic, queue_id, queue_offset, properties dict, body)] of every queue, via scan."""
    out = []
    for t in ([topic] if topic else store.topics()):
        for q in store.queues(t):
            for b in store.scan(t, q, 0):
                for row in b.select(["queue_offset", "properties", "body"]).to_pylist():
                    out.append((t, q, row["queue_offset"], dict(row["properties"]), row["body"]))
    return out


def tree_snapshot(path: str) -> dict:
    """{relative path: (size, mtime_ns, content)} of every file under path."""
    snap = {}
    for d, _, files in os.walk(path):
        for f in files:
            p = os.path.join(d, f)
            st = os.stat(p)
            with open(p, "rb") as fh:
                snap[os.path.relpath(p, path)] = (st.st_size, st.st_mtime_ns, fh.read())
    return snap
