"""Separate test hosts made by the suite: one network namespace per host, each joined by a veth pair to a bridge
in a namespace of its own (the switch), with addresses of a private range (10.237.N.0/24 and fd37:0:0:N::/64,
N from the process id). Every process on a host is started with `ip netns exec`; nothing of it is in the machine's
own namespace, so a host reaches the others only through its link, which a test can take down.

Names carry the process id (rmqhost-<tag>-<pid>-<host>; tag from RMQ_NETNS_TAG, default "t"): namespaces left
by a run that was killed are removed by the next run (their process is gone)."""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from typing import Optional

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TAG = os.environ.get("RMQ_NETNS_TAG", "t")
PREFIX = f"rmqhost-{TAG}-"


def why_not() -> Optional[str]:
    """None when this process can make test hosts; else the reason, for the test's failure."""
    if os.geteuid() != 0:
        return ("separate test hosts are network namespaces (ip netns add), which need root: run the suite as "
                "root (CI's .ci/run does)")
    if shutil.which("ip") is None:
        return "iproute2's `ip` is missing: apt-get install -y iproute2 (.ci/run installs it when it can)"
    return None


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and proc.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {proc.stderr.strip()}")
    return proc


def remove_stale() -> list[str]:
    """Delete the namespaces of runs whose process is gone (a run killed before its finalizers ran)."""
    gone = []
    for line in _ip("netns", "list").stdout.splitlines():
        m = re.match(re.escape(PREFIX) + r"(\d+)-\S+", line.split()[0] if line.split() else "")
        if m is None:
            continue
        try:
            os.kill(int(m.group(1)), 0)
            continue
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        _ip("netns", "del", m.group(0), check=False)
        gone.append(m.group(0))
    return gone


class TestHosts:
    __test__ = False  # not a test class

    def __init__(self, names: list[str], ipv6: bool = True):
        self.pid = os.getpid()
        self.net = 1 + self.pid % 250
        self.names = list(names)
        self.ipv6 = ipv6
        self.switch = f"{PREFIX}{self.pid}-switch"
        self.namespaces: list[str] = []
        self.procs: list[subprocess.Popen] = []

    def ns(self, host: str) -> str:
        return f"{PREFIX}{self.pid}-{host}"

    def ip4(self, host: str) -> str:
        return f"10.237.{self.net}.{10 + self.names.index(host)}"

    def ip6(self, host: str) -> str:
        return f"fd37:0:0:{self.net:x}::{10 + self.names.index(host):x}"

    def __enter__(self) -> "TestHosts":
        try:
            self._make()
        except BaseException:
            self.remove()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.remove()

    def _make(self) -> None:
        remove_stale()
        _ip("netns", "add", self.switch)
        self.namespaces.append(self.switch)
        _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.switch, "link", "set", "br0", "up")
        for i, host in enumerate(self.names):
            ns = self.ns(host)
            _ip("netns", "add", ns)
            self.namespaces.append(ns)
            port = f"p{i}"
            _ip("link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", port, "netns", self.switch)
            _ip("-n", self.switch, "link", "set", port, "master", "br0")
            _ip("-n", self.switch, "link", "set", port, "up")
            _ip("-n", ns, "addr", "add", f"{self.ip4(host)}/24", "dev", "eth0")
            if self.ipv6:
                _ip("-n", ns, "addr", "add", f"{self.ip6(host)}/64", "dev", "eth0", "nodad")
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", ns, "link", "set", "eth0", "up")

    def link(self, host: str, up: bool) -> None:
        """Take a host's link down (nothing reaches it or leaves it; its connections are not closed) or up."""
        _ip("-n", self.ns(host), "link", "set", "eth0", "up" if up else "down")
        if up and self.ipv6:  # a link taken down loses its IPv6 addresses (keep_addr_on_down=0): given back
            _ip("-n", self.ns(host), "addr", "replace", f"{self.ip6(host)}/64", "dev", "eth0", "nodad")

    def tc(self, host: str, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["ip", "netns", "exec", self.ns(host), "tc", *args], capture_output=True, text=True,
                              timeout=30)

    def popen(self, host: str, argv: list[str], **kwargs) -> subprocess.Popen:
        """A process on the host (stopped by remove() if still running); the project first on its PYTHONPATH,
        after what `env` puts there."""
        given = kwargs.pop("env", None)
        env = dict(os.environ if given is None else given)
        env["PYTHONPATH"] = os.pathsep.join(p for p in ((given or {}).get("PYTHONPATH"), ROOT) if p)
        proc = subprocess.Popen(["ip", "netns", "exec", self.ns(host), *argv], env=env, **kwargs)
        self.procs.append(proc)
        return proc

    def run(self, host: str, argv: list[str], timeout: float = 120, **kwargs) -> subprocess.CompletedProcess:
        proc = self.popen(host, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            raise AssertionError(f"{argv[:4]} on host {host} did not finish in {timeout} s: {err[-2000:]}")
        return subprocess.CompletedProcess(argv, proc.returncode, out, err)

    @staticmethod
    def stop(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 20) -> None:
        if proc.poll() is None:
            proc.send_signal(sig)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def remove(self) -> None:
        for proc in reversed(self.procs):
            self.stop(proc)
        for ns in reversed(self.namespaces):  # a namespace's veth ends go with it
            _ip("netns", "del", ns, check=False)
        self.namespaces.clear()


def rmq(hosts: TestHosts, host: str, args: list[str], log_path: str) -> tuple[subprocess.Popen, dict]:
    """`python -m rmq_cli ARGS` on a host; (the process, its ready line)."""
    import json
    with open(log_path, "ab") as log:
        proc = hosts.popen(host, [sys.executable, "-m", "rmq_cli", *args], stdout=subprocess.PIPE, stderr=log,
                           text=True)
    line = proc.stdout.readline() if proc.stdout else ""
    if not line:
        hosts.stop(proc, signal.SIGKILL)
        raise AssertionError(f"rmq {' '.join(args)} on host {host} did not start: "
                             f"{open(log_path, errors='replace').read()[-3000:]}")
    return proc, json.loads(line)


def wait_for(check, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"{what}: not within {timeout} s")
