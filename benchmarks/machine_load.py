"""The load a benchmark measured under: the 1-minute load average, and the CPU the rest of the machine used while
a case ran (all CPU time in /proc/stat minus the benchmark's own process tree: this process, Spark's JVM, its
Python workers, the brokers it started). A ratio of two cases is only a figure when the rest of the machine was
quiet: the others' CPU, in cores, says whether it was."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

HZ = os.sysconf("SC_CLK_TCK")
CORES = os.cpu_count() or 1


def _busy_jiffies() -> int:
    """Every CPU's time not idle or waiting for I/O, since boot."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return sum(fields) - fields[3] - fields[4]


def _stat_fields(pid: int) -> Optional[list[str]]:
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()  # the command name may hold spaces and parentheses


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


SPLIT = ("jvm_tasks", "jvm_gc", "jvm_jit", "jvm_other", "py_workers", "brokers", "bench")
# Spark's JVM threads by name (/proc's comm: the first 15 characters): its task threads, the garbage collector's,
# the JIT compilers'; the rest (netty, the streaming query's thread, heartbeats...) are jvm_other.
JVM_THREADS = (("jvm_tasks", ("Executor task",)), ("jvm_gc", ("GC Thread", "G1 ")),
               ("jvm_jit", ("C1 Compiler", "C2 Compiler")))


def _jvm_threads(pid: int) -> dict[str, int]:
    """CPU jiffies of a JVM's live threads by JVM_THREADS' parts."""
    parts: dict[str, int] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return parts
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                text = f.read()
        except OSError:
            continue
        comm = text[text.index("(") + 1:text.rindex(")")]
        rest = text[text.rindex(")") + 2:].split()
        part = next((p for p, marks in JVM_THREADS if comm.startswith(marks)), None)
        if part is not None:
            parts[part] = parts.get(part, 0) + int(rest[11]) + int(rest[12])
    return parts


def tree_split(root: int) -> dict[str, int]:
    """CPU jiffies of root's process tree by part: Spark's JVM (its own threads, by JVM_THREADS), the Python
    processes Spark starts (its workers, the source's planners and streaming runner: every Python process below the
    JVM, and those the JVM has waited for), the brokers the benchmark started (any other descendant), and the
    benchmark's own process."""
    stats = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            rest = _stat_fields(int(name))
            if rest is not None:
                stats[int(name)] = (int(rest[1]), int(rest[11]) + int(rest[12]), int(rest[13]) + int(rest[14]))
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    split = dict.fromkeys(SPLIT, 0)
    todo = [(root, "bench")]
    while todo:
        pid, part = todo.pop()
        if pid not in stats:
            continue
        _, own, waited = stats[pid]
        if part == "bench" and pid != root:
            part = "spark_jvm" if "SparkSubmit" in _cmdline(pid) else "brokers"
        if part == "spark_jvm":
            threads = _jvm_threads(pid)
            for name, jiffies in threads.items():
                split[name] += jiffies
            split["jvm_other"] += max(own - sum(threads.values()), 0)
            split["py_workers"] += waited
            todo.extend((c, "py_workers") for c in children.get(pid, ()))
        else:
            split[part] += own + waited
            todo.extend((c, "bench" if part == "bench" else part) for c in children.get(pid, ()))
    return split


@dataclass
class Load:
    seconds: float
    others_cores: float     # CPU cores the processes outside the benchmark kept busy, on average
    own_cores: float        # the same for the benchmark's own processes
    loadavg: float          # the 1-minute load average at the end
    cpu: Optional[dict] = None  # CPU seconds of the benchmark's own processes by part (tree_split)

    def text(self) -> str:
        return f"load {self.loadavg:.1f}, others {self.others_cores:.2f} of {CORES} cores"

    def cpu_text(self, rows: int) -> str:
        """The benchmark's CPU by part, in ns a row."""
        if not self.cpu or not rows:
            return ""
        return ", ".join(f"{part} {secs * 1e9 / rows:,.0f}" for part, secs in self.cpu.items()) + " ns/row of CPU"


class Interval:
    """One measured interval: begin() before a case, end() after it."""

    def __init__(self, root: Optional[int] = None):
        self.root = os.getpid() if root is None else root
        self._t0 = 0.0
        self._busy0 = 0
        self._split0: dict[str, int] = {}

    def begin(self) -> "Interval":
        import time
        self._t0 = time.monotonic()
        self._busy0, self._split0 = _busy_jiffies(), tree_split(self.root)
        return self

    def end(self) -> Load:
        import time
        seconds = max(time.monotonic() - self._t0, 1e-6)
        busy, split = _busy_jiffies() - self._busy0, tree_split(self.root)
        own = sum(split.values()) - sum(self._split0.values())  # the tree's CPU: its parts add up to it
        cpu = {part: max(split[part] - self._split0[part], 0) / HZ for part in SPLIT}
        return Load(seconds, max(busy - own, 0) / HZ / seconds, own / HZ / seconds, os.getloadavg()[0], cpu)

