"""rmq produce / consume / topics / stat with --namesrv: the same commands through two real brokers."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from wire_cluster import ROOT, WireCluster


def rmq(*args, check=True):
    env = {k: v for k, v in os.environ.items() if k != "RMQ_STORE"}
    p = subprocess.run([sys.executable, "-m", "rmq_cli", *args], capture_output=True, text=True, timeout=120,
                       env=dict(env, PYTHONPATH=ROOT))
    if check:
        assert p.returncode == 0, p.stderr
    return p


def test_the_cli_produces_consumes_and_reports_lag_through_brokers(tmp_path):
    with WireCluster(tmp_path, brokers=("broker-a", "broker-b")) as c:
        ns = c.namesrv
        out = rmq("produce", "--namesrv", ns, "-t", "Cli", "--tags", "TagA", "-p", "region=EU", "m1", "m2", "m3",
                  "m4").stdout
        assert out.count("SEND_OK Cli/broker-") == 4
        rmq("produce", "--namesrv", ns, "-t", "Cli", "--tags", "TagB", "m5", "m6")
        topics = json.loads(rmq("topics", "--namesrv", ns, "--json").stdout)
        assert {"topic": "Cli", "messages": 6} == {k: v for t in topics if t["topic"] == "Cli" for k, v in t.items()
                                                   if k in ("topic", "messages")}
        lines = rmq("consume", "--namesrv", ns, "-t", "Cli", "--tags", "TagA", "--json", "-g", "cg",
                    "--commit").stdout.splitlines()
        got = [json.loads(line) for line in lines]
        assert sorted(m["body"] for m in got) == ["m1", "m2", "m3", "m4"]
        assert all(m["properties"]["region"] == "EU" and m["broker_name"].startswith("broker-") for m in got)
        sql = rmq("consume", "--namesrv", ns, "-t", "Cli", "--sql", "region = 'EU'", "--json").stdout.splitlines()
        assert len(sql) == 4
        stat = json.loads(rmq("stat", "--namesrv", ns, "-t", "Cli", "-g", "cg", "--json").stdout)
        assert stat["total_lag"] == 0 and sum(q["messages"] for q in stat["queues"]) == 6
        text = rmq("stat", "--namesrv", ns, "-t", "Cli", "-g", "cg").stdout
        assert "broker-a:0" in text and "total: 6 messages" in text and "group cg lag 0" in text
        bad = rmq("consume", "--namesrv", ns, "-t", "NoSuch", check=False)
        assert bad.returncode == 1 and "NoSuch" in bad.stderr


ACL_SECRET = "cli-Secret-77"
ACL_ACCOUNTS = f"""
accounts:
- accessKey: cliwriter
  secretKey: "{ACL_SECRET}"
  defaultTopicPerm: DENY
  defaultGroupPerm: SUB
  topicPerms:
  - Locked=PUB|SUB
"""


def test_the_cli_signs_with_access_key_and_secret_key_or_the_environment(tmp_path):
    """Brokers with aclEnable=true and plain_acl.yml beside their broker.conf: --access-key/--secret-key, or
    RMQ_ACCESS_KEY/RMQ_SECRET_KEY, sign every request; a wrong secret or none is exit 1 with NO_PERMISSION and
    the broker's reason, never the secret."""
    (tmp_path / "plain_acl.yml").write_text(ACL_ACCOUNTS)
    with WireCluster(tmp_path, conf="aclEnable = true\n") as c:
        ns = c.namesrv
        out = rmq("produce", "--namesrv", ns, "-t", "Locked", "--access-key", "cliwriter", "--secret-key",
                  ACL_SECRET, "m1", "m2").stdout
        assert out.count("SEND_OK Locked/broker-a") == 2
        env = dict(os.environ, RMQ_ACCESS_KEY="cliwriter", RMQ_SECRET_KEY=ACL_SECRET, PYTHONPATH=ROOT)
        got = subprocess.run([sys.executable, "-m", "rmq_cli", "consume", "--namesrv", ns, "-t", "Locked", "--json"],
                             capture_output=True, text=True, timeout=120, env=env)
        assert got.returncode == 0 and [json.loads(x)["body"] for x in got.stdout.splitlines()] == ["m1", "m2"]
        wrong = rmq("produce", "--namesrv", ns, "-t", "Locked", "--access-key", "cliwriter", "--secret-key",
                    "not-the-secret", "m3", check=False)
        assert wrong.returncode == 1 and "NO_PERMISSION (16)" in wrong.stderr
        assert "Check signature failed for accessKey=cliwriter" in wrong.stderr and "not-the-secret" not in wrong.stderr
        unsigned = rmq("consume", "--namesrv", ns, "-t", "Locked", check=False)
        assert unsigned.returncode == 1 and "No accessKey is configured" in unsigned.stderr
        half = rmq("stat", "--namesrv", ns, "--secret-key", ACL_SECRET, check=False)
        assert half.returncode == 2 and "--secret-key is given without --access-key" in half.stderr
    log = (tmp_path / "broker-a.log").read_text()
    assert f"ACL: {tmp_path / 'plain_acl.yml'} in force (1 accounts" in log and ACL_SECRET not in log


def test_a_start_past_the_end_of_an_empty_queue_is_clamped_through_brokers_as_in_a_store(tmp_path):
    """RocketMQ's PullMessageProcessor answers PULL_OFFSET_MOVED to a pull past the end of an empty queue (not
    PULL_NOT_FOUND, which left the CLI committing the offset asked for): the group's offset is the queue's end."""
    with WireCluster(tmp_path) as c:
        ns = c.namesrv
        rmq("produce", "--namesrv", ns, "-t", "Empty", "a")
        out = rmq("consume", "--namesrv", ns, "-t", "Empty", "--from", "99999", "-g", "g", "--commit")
        stat = json.loads(rmq("stat", "--namesrv", ns, "-t", "Empty", "-g", "g", "--json").stdout)["queues"]
        assert len(stat) > 1 and sum(q["max_offset"] for q in stat) == 1  # queues that are empty, and one that is not
        assert out.stderr.count("is outside Empty/broker-a:") == len(stat), out.stderr
        assert [q["committed_offset"] for q in stat] == [q["max_offset"] for q in stat]
        rmq("produce", "--namesrv", ns, "-t", "Empty", *[f"later{i}" for i in range(8)])
        got = rmq("consume", "--namesrv", ns, "-t", "Empty", "-g", "g", "--json").stdout.splitlines()
        assert sorted(json.loads(x)["body"] for x in got) == [f"later{i}" for i in range(8)]
