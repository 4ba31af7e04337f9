"""Names are checked whole: a trailing newline (which `^...$` lets through) is refused at every entry point."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from store import MessageStore, OffsetStore


@pytest.mark.parametrize("name", ["abc\n", "a\nb", "\nabc"])
def test_put_refuses_a_topic_with_a_newline(tmp_path, name):
    with MessageStore(tmp_path) as s:
        with pytest.raises(ValueError, match="characters outside"):
            s.put(name, b"x")
        with pytest.raises(ValueError, match="characters outside"):
            s.create_topic(name)
    assert os.listdir(tmp_path / "consumequeue") == []


def test_cli_produce_refuses_a_topic_with_a_newline(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    out = subprocess.run([sys.executable, "-m", "rmq_cli", "-s", str(tmp_path), "produce", "--topic", "abc\n",
                          "hi"], capture_output=True, timeout=60, env=env)
    assert out.returncode == 2 and b"characters outside" in out.stderr, out.stderr
    assert not (tmp_path / "consumequeue").exists() or os.listdir(tmp_path / "consumequeue") == []


def test_a_group_with_a_newline_is_refused(tmp_path):
    with pytest.raises(ValueError, match="group"):
        OffsetStore(tmp_path, "gg\n")


def test_produce_from_stdin_that_fails_part_way_says_how_many_lines_were_written(tmp_path):
    good = "".join(f'{{"body": "m{i}"}}\n' for i in range(5))
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    out = subprocess.run([sys.executable, "-m", "rmq_cli", "-s", str(tmp_path), "produce", "--topic", "T",
                          "--file", "-", "--batch-size", "2"], input=(good + "not json\n").encode(),
                         capture_output=True, timeout=60, env=env)
    assert out.returncode == 2, out.stderr
    assert b"line 6" in out.stderr
    assert b"(4 messages, lines 1-4, were written before the failure; lines from 5 on were not)" in out.stderr
    with MessageStore(tmp_path, read_only=True) as s:
        assert sum(s.max_offset("T", q) for q in s.queues("T")) == 4
