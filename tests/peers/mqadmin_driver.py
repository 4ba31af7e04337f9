"""RocketMQ's admin tool (`mqadmin`, rocketmq-tools) as a test peer: one JVM (tests/peers/java_admin's
MQAdminDriver) runs command after command through MQAdminStartup.main0, each against the name server its -n
names, so one JVM serves a whole module against the stock cluster and `rmq serve` alike."""
from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
from dataclasses import dataclass

from stock_peers import JVM_FLAGS, _kill_group, _live, _logback_home, classpath, compiled

JAVA_ADMIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "java_admin")


@dataclass
class Printed:
    out: str
    err: str
    ms: int

    def lines(self) -> list[str]:
        return [line for line in self.out.splitlines() if line.strip()]


class MQAdmin:
    def __init__(self, version: str, root):
        classes = compiled(version, JAVA_ADMIN)
        props, _ = _logback_home(version, "tools")
        home = os.path.join(str(root), "mqadmin")
        os.makedirs(home, exist_ok=True)
        self.proc = subprocess.Popen(
            ["java", *JVM_FLAGS, f"-Duser.home={home}", *props, "-Drocketmq.client.logLevel=WARN",
             "-cp", classpath(version, classes), "MQAdminDriver"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            start_new_session=True)
        _live.add(self.proc)
        self._lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.spent_ms = 0

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def __call__(self, *args: str, timeout: float = 90) -> Printed:
        """`mqadmin args...`: what it printed."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("\t".join(args) + "\n")
        self.proc.stdin.flush()
        while True:
            try:
                line = self._lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"mqadmin {' '.join(args)} did not finish within {timeout} s") from None
            if line is None:
                raise AssertionError(f"the mqadmin driver exited ({self.proc.poll()}) during {' '.join(args)}")
            if line.startswith("{"):
                got = json.loads(line)
                self.spent_ms += got["ms"]
                return Printed(got["out"], got["err"], got["ms"])

    def close(self) -> None:
        if self.proc.poll() is None:
            _kill_group(self.proc, 9)
            self.proc.wait(10)
        _live.discard(self.proc)
