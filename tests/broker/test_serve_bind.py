"""`rmq serve` / `rmq namesrv` on an address already taken: a usage error naming the flag that sets it."""
from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
from broker_testkit import ROOT


@pytest.fixture
def taken():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield f"127.0.0.1:{s.getsockname()[1]}"


@pytest.mark.parametrize("args, flag", [
    (["serve", "--listen", "127.0.0.1:0", "--namesrv-listen", "{taken}"], "--namesrv-listen"),
    (["serve", "--listen", "{taken}", "--namesrv-listen", "127.0.0.1:0"], "--listen"),
    (["namesrv", "--listen", "{taken}"], "--listen"),
])
def test_an_address_in_use_names_the_flag_to_change(tmp_path, taken, args, flag):
    argv = [a.format(taken=taken) for a in args]
    proc = subprocess.run([sys.executable, "-m", "rmq_cli", "-s", str(tmp_path / "s"), *argv], capture_output=True,
                          text=True, timeout=60, env=dict(os.environ, PYTHONPATH=ROOT))
    assert proc.returncode == 2, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert f"{flag}: cannot listen there" in last and "address already in use" in last.lower(), last
    assert f"{flag} 127.0.0.1:0" in last and "Traceback" not in proc.stderr
