"""One rule for a new topic's queues over the wire: the creating producer's defaultTopicQueueNums (4, as
DefaultMQProducer's) on every broker the route offers, unless a count is given."""
from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter

from wire_cluster import ROOT, WireCluster

from rmq_client import Producer, PullConsumer


def _queues_per_broker(namesrv: str, topic: str) -> dict:
    with PullConsumer(namesrv, "g") as pc:
        return dict(Counter(q.broker_name for q in pc.queues(topic)))


def test_a_new_topic_gets_the_producers_default_queue_count_on_every_broker(tmp_path):
    with WireCluster(tmp_path, brokers=("broker-a", "broker-b")) as c:
        with Producer(c.namesrv) as p:
            p.send("First", b"one message")
            p.create_topic("Given", 2)
        cli = subprocess.run([sys.executable, "-m", "rmq_cli", "produce", "--namesrv", c.namesrv, "-t", "ByCli", "x"],
                             capture_output=True, text=True, timeout=120, env=dict(os.environ, PYTHONPATH=ROOT))
        assert cli.returncode == 0, cli.stderr
        assert _queues_per_broker(c.namesrv, "First") == {"broker-a": 4, "broker-b": 4}
        assert _queues_per_broker(c.namesrv, "ByCli") == {"broker-a": 4, "broker-b": 4}
        assert _queues_per_broker(c.namesrv, "Given") == {"broker-a": 2, "broker-b": 2}
