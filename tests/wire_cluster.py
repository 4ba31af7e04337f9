"""A RocketMQ cluster of real processes for tests: one `rmq namesrv` and brokers (`rmq serve`, each with its own
store directory and broker.conf), stopped whatever happens (use it as a context manager); or one store directory
served by one `rmq serve` with its name server in the same process."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from typing import Iterator, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Large pulls, as a Spark job wants them (RocketMQ's defaults: 32 messages, 256 KiB)
PULL_LIMITS = "maxTransferCountOnMessageInMemory = 4096\nmaxTransferBytesOnMessageInMemory = 8388608\n"


def _start(args: list[str], log_path: str) -> tuple[subprocess.Popen, dict]:
    log = open(log_path, "ab")
    proc = subprocess.Popen([sys.executable, "-m", "rmq_cli", *args], env=dict(os.environ, PYTHONPATH=ROOT),
                            stdout=subprocess.PIPE, stderr=log, text=True)
    log.close()
    line = proc.stdout.readline() if proc.stdout else ""
    if not line:
        proc.kill()
        proc.wait()
        raise AssertionError(f"rmq {' '.join(args)} did not start; see {log_path}")
    return proc, json.loads(line)


class WireCluster:
    def __init__(self, root, brokers=("broker-a",), conf: str = PULL_LIMITS, host: str = "127.0.0.1"):
        self.root, self.conf, self.host = str(root), conf, host
        os.makedirs(self.root, exist_ok=True)
        self.names = list(brokers)
        self.procs: dict[str, subprocess.Popen] = {}
        self.addresses: dict[str, str] = {}
        self.namesrv = ""

    def __enter__(self) -> "WireCluster":
        try:
            proc, out = _start(["namesrv", "--listen", f"{self.host}:0"], os.path.join(self.root, "namesrv.log"))
            self.procs["namesrv"] = proc
            self.namesrv = out["namesrv"]
            for name in self.names:
                self.start(name)
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def store(self, name: str) -> str:
        return os.path.join(self.root, name)

    def start(self, name: str) -> str:
        """Start (or start again, on its former address) the broker `name`."""
        conf = os.path.join(self.root, f"{name}.conf")
        with open(conf, "w") as f:
            f.write(self.conf)
        listen = self.addresses.get(name, f"{self.host}:0")
        proc, out = _start(["-s", self.store(name), "serve", "--config", conf, "--listen", listen, "--namesrv",
                            self.namesrv, "--broker-name", name], os.path.join(self.root, f"{name}.log"))
        self.procs[name] = proc
        self.addresses[name] = out["broker"]
        return out["broker"]

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        proc = self.procs.pop(name, None)
        if proc is not None and proc.poll() is None:
            proc.send_signal(sig)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def stop(self) -> None:
        for name in [n for n in self.procs if n != "namesrv"] + ["namesrv"]:
            self.kill(name, signal.SIGTERM)


@contextlib.contextmanager
def serve_store(store_dir, broker: str = "broker-a", conf: str = PULL_LIMITS) -> Iterator[dict]:
    """`rmq serve` of store_dir as `broker`, its name server in the same process (one process to start, where a
    WireCluster starts two): what it printed ({"namesrv", "broker", "brokerName"}); stopped on leaving. Its
    broker.conf and log are beside the directory."""
    base = os.path.abspath(store_dir)
    with open(f"{base}.conf", "w") as f:
        f.write(conf)
    proc, out = _start(["-s", base, "serve", "--config", f"{base}.conf", "--listen", "127.0.0.1:0", "--namesrv-listen",
                        "127.0.0.1:0", "--broker-name", broker], f"{base}.log")
    try:
        yield out
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_until(check, timeout: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    last: Optional[BaseException] = None
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except Exception as e:  # not yet: the cluster is still starting
            last = e
        time.sleep(0.1)
    raise AssertionError(f"{what} not reached within {timeout} s (last error: {last})")
