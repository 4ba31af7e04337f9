"""The `rmq` command line on small rolling stores.

Commands run through `rmq_cli.cli.main` (what the console script calls) in this process, with stdin, stdout and
stderr replaced, because a subprocess costs ~0.5 s of imports; the tests marked `real=True` run the installed
`rmq` script (or `python -m rmq_cli`) as a subprocess, to prove the entry point itself.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from rmq_cli.cli import main
from store import MessageStore, OffsetStore

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_SCRIPT = os.path.join(os.path.dirname(sys.executable), "rmq")
RMQ = [_SCRIPT] if os.access(_SCRIPT, os.X_OK) else [sys.executable, "-m", "rmq_cli"]


def run_in_process(argv, input=None):
    out, err = io.StringIO(), io.StringIO()
    stdin = io.TextIOWrapper(io.BytesIO((input or "").encode()), encoding="utf-8")
    saved = sys.stdin
    sys.stdin = stdin
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as e:  # argparse's own usage errors and --help
                code = e.code
    finally:
        sys.stdin = saved
    return SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())


@pytest.fixture
def conf(tmp_path):
    # Small files so that a few dozen messages roll over several commitlog and consume-queue files.
    path = tmp_path / "store.conf"
    path.write_text("mappedFileSizeCommitLog=4096\nmappedFileSizeConsumeQueue=160\ndefaultTopicQueueNums=4\n")
    return path


@pytest.fixture
def rmq(tmp_path, conf):
    store = tmp_path / "store"

    def run(*args, input=None, check=True, real=False):
        argv = ["--store", str(store), "--config", str(conf), *args]
        if real:
            proc = subprocess.run(RMQ + argv, input=input, capture_output=True, text=True, cwd=ROOT, timeout=60)
        else:
            proc = run_in_process(argv, input)
        if check and proc.returncode != 0:
            raise AssertionError(f"rmq {' '.join(args)} exited {proc.returncode}: {proc.stderr}")
        return proc

    run.store = store
    return run


def lines(proc):
    return [json.loads(x) for x in proc.stdout.splitlines()]


def test_produce_arguments_then_consume_round_trips(rmq):
    out = rmq("produce", "--topic", "Orders", "--tags", "TagA", "--keys", "k1 k2", "-p", "region=EU",
              "-p", "amount=5", "--queue", "2", "--json", "hello", "wörld", real=True)
    results = lines(out)
    assert [r["queue_offset"] for r in results] == [0, 1]
    assert all(r["status"] == "PUT_OK" and r["queue_id"] == 2 for r in results)
    got = lines(rmq("consume", "--topic", "Orders", "--json", real=True))
    assert [m["body"] for m in got] == ["hello", "wörld"]
    for m, r in zip(got, results):
        assert (m["topic"], m["queue_id"], m["queue_offset"], m["msg_id"]) == ("Orders", 2, r["queue_offset"],
                                                                               r["msg_id"])
        assert m["tags"] == "TagA" and m["keys"] == ["k1", "k2"]
        assert m["properties"]["region"] == "EU" and m["properties"]["amount"] == "5"
        assert m["properties"]["UNIQ_KEY"] == r["uniq_key"]
        assert m["store_timestamp"] >= m["born_timestamp"] > 0


def test_json_lines_produce_rolls_files_and_consume_copies_them(rmq, tmp_path):
    n = 60
    src = tmp_path / "in.jsonl"
    with open(src, "w") as f:
        for i in range(n):
            f.write(json.dumps({"body": f"message number {i} " + "x" * 40, "tags": f"T{i % 3}",
                                "keys": [f"key-{i}"], "properties": {"i": i, "even": i % 2 == 0},
                                "queue_id": i % 4, "topic": "Orders"}) + "\n")
        f.write("\n")  # blank lines are skipped
        f.write(json.dumps({"body": "AAEC/w==", "body_base64": True, "topic": "Bin"}) + "\n")
    out = rmq("produce", "--file", str(src), "--batch-size", "7")  # no --topic: each line's topic
    assert out.stdout.strip() == f"produced {n + 1} messages (Bin: 1, Orders: {n})"
    assert len(os.listdir(rmq.store / "commitlog")) > 1  # rolled
    assert len(os.listdir(rmq.store / "consumequeue" / "Orders" / "0")) > 1
    got = lines(rmq("consume", "--topic", "Orders", "--json"))
    assert len(got) == n
    by_i = {int(m["properties"]["i"]): m for m in got}
    for i in range(n):
        m = by_i[i]
        assert m["body"] == f"message number {i} " + "x" * 40
        assert (m["tags"], m["keys"], m["queue_id"]) == (f"T{i % 3}", [f"key-{i}"], i % 4)
        assert m["properties"]["even"] == ("true" if i % 2 == 0 else "false")
    binary = lines(rmq("consume", "--topic", "Bin", "--json"))
    assert binary[0]["body"] == "AAEC/w==" and binary[0]["body_base64"] is True
    # consume --json output is valid produce --file input: copy a queue into another topic
    copied = rmq("produce", "--topic", "Copy", "--file", "-", input="\n".join(
        json.dumps({**m, "topic": "Copy"}) for m in got if m["queue_id"] == 1) + "\n")
    assert copied.returncode == 0
    again = lines(rmq("consume", "--topic", "Copy", "--json"))
    assert sorted(m["body"] for m in again) == sorted(m["body"] for m in got if m["queue_id"] == 1)
    assert all(m["properties"].get("KEYS") == " ".join(m["keys"]) for m in again)


def test_the_readme_copy_recipe_copies_into_the_topic_given_and_leaves_the_source_alone(tmp_path):
    """`rmq consume --topic Orders --json ... | rmq produce --topic Copy --file -`, as docs/cli.md gives it: a
    --topic on the command line wins over each line's "topic"."""
    store = tmp_path / "s"
    env = dict(os.environ, PYTHONPATH=ROOT, RMQ_STORE=str(store))
    cmd = " ".join(RMQ)
    subprocess.run(f"{cmd} produce --topic Orders a-message && {cmd} produce --topic Orders another", shell=True,
                   check=True, env=env, cwd=ROOT, capture_output=True, timeout=120)
    copy = subprocess.run(f"{cmd} consume --topic Orders --json | {cmd} produce --topic Copy --file -", shell=True,
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert copy.returncode == 0, copy.stderr
    assert "produced 2 messages" in copy.stdout and "Copy: 2" in copy.stdout
    orders = subprocess.run(f"{cmd} consume --topic Orders --json", shell=True, env=env, cwd=ROOT,
                            capture_output=True, text=True, timeout=120).stdout.splitlines()
    copied = subprocess.run(f"{cmd} consume --topic Copy --json", shell=True, env=env, cwd=ROOT,
                            capture_output=True, text=True, timeout=120).stdout.splitlines()
    assert sorted(json.loads(m)["body"] for m in copied) == ["a-message", "another"]
    assert len(orders) == 2  # the source is unchanged


def test_bad_json_line_is_refused_by_line_number_before_anything_is_written(rmq, tmp_path):
    src = tmp_path / "bad.jsonl"
    src.write_text('{"body": "fine"}\n{"body": "also fine", "tags": "A"}\n{"body": oops}\n')
    proc = rmq("produce", "--topic", "Orders", "--file", str(src), check=False)
    assert proc.returncode == 2
    assert "line 3" in proc.stderr and "not valid JSON" in proc.stderr
    src.write_text('{"body": "fine"}\n{"body": "x", "queue_id": 9}\n')
    proc = rmq("produce", "--topic", "Orders", "--file", str(src), check=False)
    assert proc.returncode == 2 and "line 2" in proc.stderr and "queue_id 9" in proc.stderr
    src.write_text('{"body": "x", "colour": "red"}\n')
    proc = rmq("produce", "--topic", "Orders", "--file", str(src), check=False)
    assert proc.returncode == 2 and "line 1" in proc.stderr and "'colour'" in proc.stderr
    with MessageStore(rmq.store, read_only=True) as store:
        assert store.topics() == [] or all(
            store.max_offset(t, q) == 0 for t in store.topics() for q in store.queues(t))


def test_usage_errors_exit_2_with_a_message(rmq):
    rmq("produce", "--topic", "Orders", "one")
    cases = [
        (("consume", "--topic", "Nope"), "unknown topic 'Nope'"),
        (("consume", "--topic", "Orders", "--queue", "9"), "--queue 9"),
        (("consume", "--topic", "Orders", "--sql", "a >"), "--sql: invalid selector"),
        (("consume", "--topic", "Orders", "--from", "yesterday"), "--from 'yesterday'"),
        (("produce", "--topic", "bad/topic", "x"), "--topic"),
        (("produce", "--topic", "Orders", "--queue", "4", "x"), "--queue 4"),
    ]
    for args, expected in cases:
        proc = rmq(*args, check=False)
        assert proc.returncode == 2, (args, proc.stderr)
        assert expected in proc.stderr, (args, proc.stderr)
        assert proc.stdout == ""


def test_consume_with_tag_and_sql_selectors_returns_exactly_the_matches(rmq, tmp_path):
    src = tmp_path / "in.jsonl"
    rows = []
    tags = ["TagA", "TagB", "TagC", "Aa", "BB", None]  # "Aa" and "BB" share String.hashCode 2112
    for i in range(48):
        row = {"body": f"m{i}", "properties": {"n": i, "region": ["EU", "US", "APAC"][i % 3]}, "queue_id": i % 4}
        if tags[i % 6] is not None:
            row["tags"] = tags[i % 6]
        rows.append(row)
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    rmq("produce", "--topic", "Orders", "--file", str(src))

    def bodies(*args):
        return sorted(m["body"] for m in lines(rmq("consume", "--topic", "Orders", "--json", *args)))

    assert bodies("--tags", "TagA || TagC") == sorted(
        r["body"] for r in rows if r.get("tags") in ("TagA", "TagC"))
    assert bodies("--tags", "Aa") == sorted(r["body"] for r in rows if r.get("tags") == "Aa")
    assert bodies("--tags", "BB", "--queue", "0") == sorted(
        r["body"] for r in rows if r.get("tags") == "BB" and r["queue_id"] == 0)
    assert bodies("--sql", "region = 'EU' AND n > 20") == sorted(
        r["body"] for r in rows if r["properties"]["region"] == "EU" and r["properties"]["n"] > 20)
    assert bodies("--tags", "TagB", "--sql", "n < 30") == sorted(
        r["body"] for r in rows if r.get("tags") == "TagB" and r["properties"]["n"] < 30)


def test_consume_positions_max_group_commit_and_stat_lag(rmq):
    rmq("produce", "--topic", "Orders", "--queue", "1", *[f"b{i}" for i in range(10)])
    rmq("produce", "--topic", "Orders", "--queue", "3", *[f"c{i}" for i in range(4)])
    first = lines(rmq("consume", "--topic", "Orders", "--queue", "1", "--from", "6", "--json"))
    assert [m["queue_offset"] for m in first] == [6, 7, 8, 9]
    assert rmq("consume", "--topic", "Orders", "--from", "latest").stdout == ""
    got = lines(rmq("consume", "--topic", "Orders", "--group", "G1", "--commit", "--max", "7", "--json"))
    assert [(m["queue_id"], m["queue_offset"]) for m in got] == [(1, i) for i in range(7)]
    offsets = OffsetStore(rmq.store, "G1")
    assert offsets.read_offset(("Orders", 1)) == 7
    stat = json.loads(rmq("stat", "--group", "G1", "--json").stdout)
    rows = {r["queue_id"]: r for r in stat["queues"]}
    assert (rows[1]["min_offset"], rows[1]["max_offset"], rows[1]["messages"]) == (0, 10, 10)
    assert (rows[1]["committed_offset"], rows[1]["lag"]) == (7, 3)
    assert rows[3]["messages"] == 4 and rows[0]["messages"] == 0
    # the next run of the group resumes where it committed
    rest = lines(rmq("consume", "--topic", "Orders", "--group", "G1", "--commit", "--json"))
    assert [(m["queue_id"], m["queue_offset"]) for m in rest] == [(1, 7), (1, 8), (1, 9)] + [(3, i) for i in range(4)]
    stat = json.loads(rmq("stat", "--topic", "Orders", "--group", "G1", "--json").stdout)
    assert stat["total_lag"] == 0
    text = rmq("stat", "--group", "G1").stdout
    assert "COMMITTED" in text and "LAG" in text and "total: 14 messages in 4 queues" in text
    topics = json.loads(rmq("topics", "--json").stdout)
    assert topics == [{"topic": "Orders", "queues": 4, "read_queue_nums": 4, "write_queue_nums": 4,
                       "messages": 14}]


def test_follow_waits_for_new_messages(rmq):
    rmq("produce", "--topic", "Orders", "--queue", "0", "old")
    follower = subprocess.Popen(
        RMQ + ["--store", str(rmq.store), "consume", "--topic", "Orders", "--from", "latest", "--follow",
               "--max", "1", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        # The follower resolves "latest" when it has started, which takes a while on a loaded machine: keep
        # producing until it has received one message (a message sent before it started is not "new" to it).
        out = err = None
        for attempt in range(30):
            time.sleep(1.0)
            rmq("produce", "--topic", "Orders", "--queue", "2", f"new-{attempt}")
            try:
                out, err = follower.communicate(timeout=1.0)
                break
            except subprocess.TimeoutExpired:
                continue
    finally:
        if follower.poll() is None:
            follower.kill()
    assert follower.returncode == 0, err
    (body,) = [m["body"] for m in lines(type("P", (), {"stdout": out}))]
    assert body.startswith("new-")


def test_check_passes_then_fails_on_a_flipped_body_byte(rmq):
    rmq("produce", "--topic", "Orders", *[f"payload-{i:03d}" for i in range(40)])
    ok = rmq("check")
    assert "check OK" in ok.stdout
    report = json.loads(rmq("check", "--json").stdout)
    assert report["ok"] and report["records"] == 40 and report["units"] == 40 and report["commit_log_files"] > 1
    # flip one byte of one body in the second commitlog file
    target = lines(rmq("consume", "--topic", "Orders", "--json"))[-1]
    off = target["commit_log_offset"]
    name = f"{off - off % 4096:020d}"
    path = rmq.store / "commitlog" / name
    data = bytearray(path.read_bytes())
    rel = data.index(target["body"].encode(), off % 4096)
    data[rel] ^= 0x01
    path.write_bytes(bytes(data))
    bad = rmq("check", check=False, real=True)
    assert bad.returncode == 1
    assert f"commitlog/{name} at byte {off % 4096}" in bad.stdout and "body CRC mismatch" in bad.stdout
    assert "check FAILED" in bad.stdout
    # the pull path refuses the record too, with file and offset, and a non-zero exit
    pull = rmq("consume", "--topic", "Orders", "--queue", str(target["queue_id"]), check=False)
    assert pull.returncode == 1 and name in pull.stderr


def test_check_fails_on_a_corrupt_consume_queue_unit(rmq):
    rmq("produce", "--topic", "Orders", "--queue", "0", "--tags", "TagA", *[f"m{i}" for i in range(12)])
    # unit 9 lives in the second consume-queue file (8 units per file): damage its tagsCode
    path = rmq.store / "consumequeue" / "Orders" / "0" / f"{160:020d}"
    data = bytearray(path.read_bytes())
    data[20 + 12:20 + 20] = (12345).to_bytes(8, "big")
    path.write_bytes(bytes(data))
    bad = rmq("check", check=False)
    assert bad.returncode == 1
    assert f"consumequeue/Orders/0/{160:020d} at byte 20" in bad.stdout
    assert "queue offset 9" in bad.stdout and "tagsCode 12345" in bad.stdout


def test_store_option_from_environment_and_missing_store(tmp_path, monkeypatch):
    monkeypatch.setenv("RMQ_STORE", str(tmp_path / "env-store"))
    proc = run_in_process(["produce", "--topic", "T", "x"])
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "env-store" / "commitlog").is_dir()
    proc = run_in_process(["--store", str(tmp_path / "missing"), "topics"])
    assert proc.returncode == 2 and "no such store directory" in proc.stderr
    monkeypatch.delenv("RMQ_STORE")
    proc = run_in_process(["topics"])
    assert proc.returncode == 2 and "--store" in proc.stderr
    proc = run_in_process(["consume"])  # argparse: --topic is required
    assert proc.returncode == 2 and "--topic" in proc.stderr


def test_a_misspelled_option_is_named_with_a_did_you_mean(tmp_path):
    import contextlib
    import io

    from rmq_cli.cli import main
    for argv, want in ((["consume", "--topik", "X"], "unrecognized argument --topik; did you mean --topic?"),
                       (["produce", "--topicc", "X", "hi"], "unrecognized argument --topicc; did you mean --topic?"),
                       (["stat", "--grop", "g"], "unrecognized argument --grop; did you mean --group?")):
        err = io.StringIO()
        with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as e:
            main(["-s", str(tmp_path / "s"), *argv])
        assert e.value.code == 2 and want in err.getvalue(), err.getvalue()
        assert "required" not in err.getvalue()


def test_every_option_of_every_command_has_help():
    import argparse

    from rmq_cli.cli import build_parser
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    missing = [(name, a.option_strings) for name, p in commands.items() for a in p._actions
               if a.option_strings and not a.help]
    assert not missing


def test_counts_are_pluralised(rmq):
    out = rmq("produce", "--topic", "One", "--file", "-", input='{"body": "a"}\n').stdout.strip()
    assert out == "produced 1 message (One: 1)"
    out = rmq("produce", "--topic", "Two", "--file", "-", input='{"body": "a"}\n{"body": "b"}\n').stdout.strip()
    assert out == "produced 2 messages (Two: 2)"
    assert "total: 3 messages in 8 queues" in rmq("stat").stdout  # the test config: 4 queues a topic


def test_stat_shows_a_dash_for_queues_a_group_never_committed(rmq):
    rmq("produce", "--topic", "T", "-q", "0", "hi")
    rmq("produce", "--topic", "T", "-q", "1", "there")
    rmq("consume", "--topic", "T", "-q", "0", "--group", "g", "--commit")
    rows = [line.split() for line in rmq("stat", "--group", "g").stdout.splitlines() if line.startswith("T ")]
    assert rows[0][-2:] == ["1", "0"]  # queue 0: committed 1, lag 0
    assert rows[1][-2:] == ["-", "-"]  # queue 1: never committed


def test_a_start_past_the_end_of_an_empty_queue_is_clamped_with_a_warning_as_for_a_non_empty_one(rmq):
    rmq("produce", "--topic", "T", "--queue", "1", "a")
    for qid, end in ((0, 0), (1, 1)):  # queue 0 is empty, queue 1 is not: the same warning, the same clamp
        out = rmq("consume", "--topic", "T", "--queue", str(qid), "--from", "99999", "--group", "g", "--commit")
        assert f"rmq: warning: offset 99999 is past the end of T/{qid} (max offset {end})" in out.stderr
        assert OffsetStore(rmq.store, "g").read_offset(("T", qid)) == end
    rmq("produce", "--topic", "T", "--queue", "0", "later")
    got = lines(rmq("consume", "--topic", "T", "--queue", "0", "--group", "g", "--json"))
    assert [m["body"] for m in got] == ["later"]  # the group does not skip what comes to the empty queue
