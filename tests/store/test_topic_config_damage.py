"""A corrupt config/topics.json: the .bak with a warning, else an error naming the file and what is wrong (and
how to rediscover the topics); `rmq check` reports it as a finding; the CLI never blames a --config not given."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from store import MessageStore, TopicConfigError, TopicConfigWarning
from store.store_check import check_store


@pytest.fixture
def path(tmp_path):
    with MessageStore(tmp_path) as s:
        s.create_topic("A", 2)
        s.put("A", b"a", queue_id=1)
        s.create_topic("B", 3)  # the second write leaves the first version as topics.json.bak
    return tmp_path


def _rmq(path, *args):
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    return subprocess.run([sys.executable, "-m", "rmq_cli", "-s", str(path), *args], capture_output=True,
                          timeout=60, env=env)


BAD = [("garbage{", "is not JSON"), ('{"topicConfigTable": [1]}', "has a topicConfigTable that is a JSON list"),
       ('{"topicConfigTable": {"A": {"readQueueNums": "x"}}}', "has topic 'A' with a bad field"),
       ("[]", "holds a JSON list")]


@pytest.mark.parametrize("text, what", BAD)
def test_a_corrupt_file_falls_back_to_the_bak_with_a_warning(path, text, what):
    (path / "config" / "topics.json").write_text(text)
    with pytest.warns(TopicConfigWarning, match=f"topics.json {what}.*loaded topics from .*topics.json.bak"):
        with MessageStore(path, read_only=True) as s:
            assert s.topics() == ["A", "B"] or s.topics() == ["A"]  # the .bak is the version before the last
            assert s.queues("A") == [0, 1]


@pytest.mark.parametrize("text, what", BAD)
def test_with_no_good_copy_the_error_names_the_file_and_the_way_out(path, text, what):
    (path / "config" / "topics.json").write_text(text)
    (path / "config" / "topics.json.bak").write_text("{")
    with pytest.raises(TopicConfigError) as e:
        MessageStore(path, read_only=True)
    assert f"{path}/config/topics.json {what}" in str(e.value)
    assert "rediscovered from consumequeue/" in str(e.value)
    out = _rmq(path, "topics")
    assert out.returncode == 1 and b"--config" not in out.stderr and b"topics.json" in out.stderr, out.stderr
    report = check_store(str(path))
    assert not report.ok
    assert any("topics.json" in p.file and what in p.message for p in report.problems)
    check = _rmq(path, "check")
    assert check.returncode == 1 and b"ERROR config/topics.json at byte 0" in check.stdout
    os.rename(path / "config" / "topics.json", path / "topics.json.broken")
    os.rename(path / "config" / "topics.json.bak", path / "topics.json.bak.broken")
    with MessageStore(path) as s:  # as the error says: rediscovered from consumequeue/
        assert "A" in s.topics() and s.queues("A") == [0, 1]


def test_a_store_path_that_is_a_file(tmp_path):
    f = tmp_path / "f"
    f.write_text("x")
    for ro in (True, False):
        with pytest.raises(NotADirectoryError, match="is a file, not a store directory"):
            MessageStore(f, read_only=ro)
    out = _rmq(f, "topics")
    assert out.returncode == 2 and b"is a file, not a store directory" in out.stderr
