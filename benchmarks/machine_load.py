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


def _stat(pid: int) -> Optional[tuple[int, int]]:
    """(parent pid, CPU jiffies of the process and of its children it has waited for)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    rest = text[text.rindex(")") + 2:].split()  # the command name may hold spaces and parentheses
    return int(rest[1]), sum(int(x) for x in rest[11:15])  # ppid; utime, stime, cutime, cstime


def _tree_jiffies(root: int) -> int:
    """CPU of root and every live descendant (a descendant that exited and was waited for is in its parent's
    cutime/cstime, so nothing is counted twice)."""
    stats = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            s = _stat(int(name))
            if s is not None:
                stats[int(name)] = s
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        if pid in stats:
            total += stats[pid][1]
        todo.extend(children.get(pid, ()))
    return total


@dataclass
class Load:
    seconds: float
    others_cores: float     # CPU cores the processes outside the benchmark kept busy, on average
    own_cores: float        # the same for the benchmark's own processes
    loadavg: float          # the 1-minute load average at the end

    def text(self) -> str:
        return f"load {self.loadavg:.1f}, others {self.others_cores:.2f} of {CORES} cores"


class Interval:
    """One measured interval: begin() before a case, end() after it."""

    def __init__(self, root: Optional[int] = None):
        self.root = os.getpid() if root is None else root
        self._t0 = 0.0
        self._busy0 = self._own0 = 0

    def begin(self) -> "Interval":
        import time
        self._t0 = time.monotonic()
        self._busy0, self._own0 = _busy_jiffies(), _tree_jiffies(self.root)
        return self

    def end(self) -> Load:
        import time
        seconds = max(time.monotonic() - self._t0, 1e-6)
        busy, own = _busy_jiffies() - self._busy0, _tree_jiffies(self.root) - self._own0
        return Load(seconds, max(busy - own, 0) / HZ / seconds, own / HZ / seconds, os.getloadavg()[0])
