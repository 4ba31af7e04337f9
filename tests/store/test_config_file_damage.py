"""A corrupt file under config/: RocketMQ's ConfigManager falls back to the .bak copy (the version before the last
write), and says so in the log; when that fails too, the error names the file and what is wrong with it (it said
`--config None: ...` for the broker's files, and consumer offsets were silently dropped)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from rmq_broker.subscription_group_manager import SubscriptionGroupManager
from store import ConfigFileError, MessageStore, OffsetStore

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TORN = '{"subscriptionGroupTable": {"g1": {"groupName": "g1"'


def serve(path, timeout=60):
    """`rmq serve` on the store: (its first stdout line or None, its stderr, its exit code); stopped either way."""
    proc = subprocess.Popen([sys.executable, "-m", "rmq_cli", "-s", str(path), "serve", "--listen", "127.0.0.1:0",
                             "--namesrv-listen", "127.0.0.1:0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=dict(os.environ, PYTHONPATH=ROOT))
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        if line:
            proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return (json.loads(line) if line else None), err, proc.returncode


@pytest.fixture
def store(tmp_path):
    with MessageStore(tmp_path / "s") as s:
        s.put("T", b"x")
    return tmp_path / "s"


def test_the_store_keeps_the_previous_version_as_bak_as_mixall_string2file(store):
    groups = SubscriptionGroupManager(store, auto_create=True)
    groups.find("first")
    groups.find("second")
    bak = json.loads((store / "config" / "subscriptionGroup.json.bak").read_text())
    assert list(bak["subscriptionGroupTable"]) == ["first"]


@pytest.mark.parametrize("name", ["subscriptionGroup.json", "delayOffset.json"])
def test_a_corrupt_config_file_without_a_good_bak_stops_serve_naming_the_file_and_the_fault(store, name):
    path = store / "config" / name
    path.write_text(TORN)
    started, err, code = serve(store)
    assert started is None and code == 1, err
    assert f"rmq serve: error: {path}: is not valid JSON (" in err and "line 1 column" in err, err
    assert "it has no .bak copy" in err and "--config" not in err
    (store / "config" / (name + ".bak")).write_text("[1, 2]")
    _, err, code = serve(store)
    assert code == 1 and f"and its backup {path}.bak holds a JSON list, not an object" in err, err


@pytest.mark.parametrize("name, good", [
    ("subscriptionGroup.json", {"subscriptionGroupTable": {"g1": {"groupName": "g1"}}}),
    ("delayOffset.json", {"offsetTable": {"1": 0}}),
])
def test_a_corrupt_config_file_falls_back_to_its_bak_and_says_so(store, name, good):
    path = store / "config" / name
    path.write_text(TORN)
    (store / "config" / (name + ".bak")).write_text(json.dumps(good))
    started, err, code = serve(store)
    assert started is not None and code == 0, err
    assert f"{path} is not valid JSON" in err and f"loaded its backup {path}.bak instead" in err, err
    assert (store / "config" / (name + ".corrupt")).read_text() == TORN  # kept for a look, never made the .bak


def test_consumer_offsets_are_never_dropped_silently(store):
    offsets = OffsetStore(store, "g")
    offsets.update_offset(("T", 0), 1)
    offsets.persist_all()
    path = store / "config" / "consumerOffset.json"
    path.write_text('{"offsetTable": {"T@g": {"0": 1')
    with pytest.raises(ConfigFileError, match=f"{path}: is not valid JSON .*, and it has no .bak copy"):
        OffsetStore(store, "g").load()
    stat = subprocess.run([sys.executable, "-m", "rmq_cli", "-s", str(store), "stat", "--group", "g"],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ, PYTHONPATH=ROOT))
    assert stat.returncode == 1 and f"{path}: is not valid JSON" in stat.stderr, stat.stderr
