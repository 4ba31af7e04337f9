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


def _orders_file(path, n: int) -> None:
    """n orders as `produce --file` lines (tags, keys, properties; every 10th with a sharding key), then one line
    pinned to queue broker-b:2."""
    with open(path, "w") as f:
        for i in range(n):
            line = {"body": f"o-{i}", "tags": "TagA" if i % 2 else "TagB", "keys": [f"order-{i}"],
                    "properties": {"n": i, "region": "EU"}}
            if i % 10 == 0:
                line["sharding_key"] = "user-7"
            f.write(json.dumps(line) + "\n")
        f.write(json.dumps({"body": "pinned", "broker_name": "broker-b", "queue_id": 2}) + "\n")


def test_produce_file_through_brokers_sends_each_queues_lines_as_batches(tmp_path):
    """`produce --namesrv --file` takes the lines the store's --file takes: every message arrives once with its
    tags, keys and properties, a sharding key's in one queue in input order, a line's broker_name/queue_id in that
    queue; each queue's lines go as SEND_BATCH_MESSAGE batches (a batch's messages share the send's born time);
    `consume --json | produce --file -` copies them queue for queue. The text output names brokerName:queueId."""
    n = 6000
    _orders_file(tmp_path / "orders.jsonl", n)
    with WireCluster(tmp_path, brokers=("broker-a", "broker-b")) as c:
        ns = c.namesrv
        out = rmq("produce", "--namesrv", ns, "-t", "Orders", "--file", str(tmp_path / "orders.jsonl")).stdout
        assert out.strip() == f"produced {n + 1} messages (Orders: {n + 1})"
        dump = rmq("consume", "--namesrv", ns, "-t", "Orders", "--json").stdout
        got = [json.loads(x) for x in dump.splitlines()]
        assert sorted(m["body"] for m in got) == sorted([f"o-{i}" for i in range(n)] + ["pinned"])
        by_body = {m["body"]: m for m in got}
        o7 = by_body["o-7"]
        assert (o7["tags"], o7["keys"], o7["properties"]["n"], o7["properties"]["region"]) == \
            ("TagA", ["order-7"], "7", "EU")
        assert (by_body["pinned"]["broker_name"], by_body["pinned"]["queue_id"]) == ("broker-b", 2)
        sharded = [m for m in got if int(m["body"][2:] if m["body"] != "pinned" else 1) % 10 == 0]
        assert len({(m["broker_name"], m["queue_id"]) for m in sharded}) == 1
        assert [m["body"] for m in sharded] == [f"o-{i}" for i in range(0, n, 10)]  # in input order
        queues = {(m["broker_name"], m["queue_id"]) for m in got}
        assert {b for b, _ in queues} == {"broker-a", "broker-b"} and len(queues) == 8
        sends = {(m["broker_name"], m["queue_id"], m["born_timestamp"]) for m in got}
        assert len(sends) <= 40, f"{len(sends)} sends for {n + 1} messages: not batched"

        text = rmq("consume", "--namesrv", ns, "-t", "Orders", "-q", "0").stdout.splitlines()
        assert {line.split("@")[0] for line in text} == {"Orders/broker-a:0", "Orders/broker-b:0"}

        copy = subprocess.run([sys.executable, "-m", "rmq_cli", "produce", "--namesrv", ns, "--topic", "Copy",
                               "--file", "-"], input=dump, capture_output=True, text=True, timeout=120,
                              env=dict(os.environ, PYTHONPATH=ROOT))
        assert copy.returncode == 0 and copy.stdout.strip() == f"produced {n + 1} messages (Copy: {n + 1})", \
            copy.stderr
        copied = [json.loads(x) for x in rmq("consume", "--namesrv", ns, "-t", "Copy", "--json").stdout.splitlines()]
        assert [(m["broker_name"], m["queue_id"], m["queue_offset"], m["body"]) for m in copied] == \
            [(m["broker_name"], m["queue_id"], m["queue_offset"], m["body"]) for m in got]


def test_produce_file_through_brokers_refuses_a_bad_line_before_sending_anything(tmp_path):
    """A regular file is checked whole first, as for a store: a line whose queue_id is on two brokers, one naming
    a queue the topic does not have, or a bad field is exit 2 naming the line, and nothing is sent."""
    lines = tmp_path / "bad.jsonl"
    with WireCluster(tmp_path, brokers=("broker-a", "broker-b")) as c:
        ns = c.namesrv
        rmq("produce", "--namesrv", ns, "-t", "Orders", "first")
        for bad, says in (({"body": "x", "queue_id": 1}, 'line 3: topic \'Orders\' has a queue 1 on 2 brokers '
                                                         '(broker-a, broker-b); name one with "broker_name"'),
                          ({"body": "x", "queue_id": 1, "broker_name": "broker-c"},
                           "line 3: topic 'Orders' has no write queue broker-c:1 (it has broker-a:0..3, "
                           "broker-b:0..3)"),
                          ({"body": 7}, 'line 3: "body" must be a string, got int')):
            lines.write_text("\n".join(json.dumps(x) for x in ({"body": "a"}, {"body": "b"}, bad)) + "\n")
            p = rmq("produce", "--namesrv", ns, "-t", "Orders", "--file", str(lines), check=False)
            assert p.returncode == 2 and says in p.stderr, p.stderr
        stat = json.loads(rmq("stat", "--namesrv", ns, "-t", "Orders", "--json").stdout)
        assert sum(q["messages"] for q in stat["queues"]) == 1


def test_a_brokers_port_given_as_the_name_server_is_named_so(tmp_path):
    """A broker's address where the name server's belongs: the CLI says it is a broker and where name servers
    listen (Apache RocketMQ's mqnamesrv named), instead of the broker's REQUEST_CODE_NOT_SUPPORTED alone; an
    address where nothing listens names them too."""
    with WireCluster(tmp_path) as c:
        broker = c.addresses["broker-a"]
        p = rmq("produce", "--namesrv", broker, "-t", "Orders", "x", check=False)
        assert p.returncode == 1
        assert f"{broker} is a broker, not a name server (name servers usually listen on 9876: Apache RocketMQ's " \
               "`mqnamesrv`, `rmq namesrv`" in p.stderr, p.stderr
        assert "GET_ROUTEINFO_BY_TOPIC" in p.stderr
        c.kill("broker-a")
        p = rmq("topics", "--namesrv", broker, check=False)
        assert p.returncode == 1 and "Connection refused (no name server listens there; name servers usually " \
                                     "listen on 9876: Apache RocketMQ's `mqnamesrv`" in p.stderr, p.stderr
