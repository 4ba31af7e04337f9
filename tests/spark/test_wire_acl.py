"""format("rmq") through brokers with aclEnable=true (`rmq serve` with plain_acl.yml beside its broker.conf): with
accessKey and secretKey the sink writes and a stream reads and commits its group's offsets; with a wrong secret the
stream fails at start naming the option; the secret is in no checkpoint file and no error."""
from __future__ import annotations

import os

import pytest
from wire_cluster import PULL_LIMITS, WireCluster

from rmq_acl import SessionCredentials
from rmq_client import Producer, PullConsumer

SECRET = "spark-Secret-42"
WRONG = "wrong-Secret-42"
ACCOUNTS = f"""
accounts:
- accessKey: sparkreader
  secretKey: "{SECRET}"
  defaultTopicPerm: DENY
  defaultGroupPerm: SUB
  topicPerms:
  - Secure=PUB|SUB
"""


def test_with_credentials_the_sink_writes_and_a_stream_reads_and_a_wrong_secret_fails_naming_it(spark, tmp_path):
    root = tmp_path / "cluster"
    root.mkdir()
    (root / "plain_acl.yml").write_text(ACCOUNTS)  # beside each broker's .conf
    account = SessionCredentials("sparkreader", SECRET)
    with WireCluster(root, conf=PULL_LIMITS + "aclEnable = true\n") as c:
        sent = {f"m{i}" for i in range(12)}
        with Producer(c.namesrv, credentials=account) as p:
            p.send("Secure", b"m0")  # creates the topic (the account may send, not create topics: that is admin)
        rows = spark.createDataFrame([(f"m{i}",) for i in range(1, 12)], "body string")
        (rows.selectExpr("cast(body as binary) as body").write.format("rmq").option("namesrvAddr", c.namesrv)
         .option("topic", "Secure").option("accessKey", "sparkreader").option("secretKey", SECRET)
         .mode("append").save())  # the wire sink's halves and END_TRANSACTIONs, signed

        def stream(secret, checkpoint):
            return (spark.readStream.format("rmq").option("namesrvAddr", c.namesrv).option("topic", "Secure")
                    .option("consumerGroup", "secure-g").option("startingOffsets", "earliest")
                    .option("accessKey", "sparkreader").option("secretKey", secret).load()
                    .selectExpr("cast(body as string) as body").writeStream.format("parquet")
                    .option("path", str(tmp_path / checkpoint / "out"))
                    .option("checkpointLocation", str(tmp_path / checkpoint)).trigger(availableNow=True).start())

        bad = stream(WRONG, "cp-bad")
        with pytest.raises(Exception) as e:
            bad.awaitTermination(120)
        assert "option 'secretKey'" in str(e.value) and "Check signature failed" in str(e.value)
        assert WRONG not in str(e.value)

        good = stream(SECRET, "cp")
        good.awaitTermination(180)
        assert good.exception() is None
        assert {r.body for r in spark.read.parquet(str(tmp_path / "cp" / "out")).collect()} == sent
        with PullConsumer(c.namesrv, "secure-g", credentials=account) as pc:
            assert sum(pc.query_offset(mq) or 0 for mq in pc.queues("Secure")) == len(sent)
    for d, _, files in os.walk(tmp_path / "cp"):
        for name in files:
            with open(os.path.join(d, name), "rb") as f:
                assert SECRET.encode() not in f.read(), os.path.join(d, name)
