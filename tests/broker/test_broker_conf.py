"""broker.conf: conf/broker.conf is the defaults; a real RocketMQ broker's file loads (its unused keys logged once
as ignored); a key nobody defines is refused by name with a did-you-mean; and each broker key changes what a
client sees over the wire."""
from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from broker_testkit import ROOT, pull, send

from remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from rmq_broker import Broker
from rmq_broker.broker_config import BrokerConfig, load_broker_conf
from store import MessageStore, StoreConfig

CONF = Path(ROOT) / "conf"

# the broker.conf Apache RocketMQ 4.9 ships (conf/2m-2s-async/broker-a.properties, conf/broker.conf) plus a few
# keys operators commonly set
ROCKETMQ_BROKER_CONF = """\
brokerClusterName = DefaultCluster
brokerName = broker-a
brokerId = 0
deleteWhen = 04
fileReservedTime = 48
brokerRole = ASYNC_MASTER
flushDiskType = ASYNC_FLUSH
storePathRootDir = /data/rocketmq/store
sendMessageThreadPoolNums = 16
serverWorkerThreads = 8
clientWorkerThreads = 4
autoCreateTopicEnable = false
"""


def test_conf_broker_conf_is_the_defaults_each_key_with_a_comment():
    text = (CONF / "broker.conf").read_text(encoding="utf-8")
    keys, comment = [], False
    for line in text.splitlines():
        if line.startswith("#"):
            comment = True
        elif line.strip():
            key = line.split("=", 1)[0].strip()
            assert comment or keys, f"{key} has no comment above it"
            keys.append(key)
        else:
            comment = False
    assert set(BrokerConfig.keys()) <= set(keys), set(BrokerConfig.keys()) - set(keys)
    served = StoreConfig().replace(maxTransferCountOnMessageInMemory=4096, maxTransferBytesOnMessageInMemory=8 << 20)
    assert load_broker_conf(CONF / "broker.conf") == (BrokerConfig(), served) == load_broker_conf(None)
    assert BrokerConfig().enablePropertyFilter is True  # ours; RocketMQ's default is false


def test_a_real_brokers_file_loads_and_its_unused_keys_are_logged_once(tmp_path, caplog):
    path = tmp_path / "broker.conf"
    path.write_text(ROCKETMQ_BROKER_CONF)
    with caplog.at_level(logging.INFO, logger="rmq.config"):
        broker_config, store_config = load_broker_conf(path)
    assert broker_config.autoCreateTopicEnable is False and broker_config.brokerName == "broker-a"
    assert store_config.fileReservedTime == 48
    ignored = [r.getMessage() for r in caplog.records if "ignored" in r.getMessage()]
    assert len(ignored) == 1
    for key in ("brokerRole (MessageStoreConfig)", "storePathRootDir (MessageStoreConfig)",
                "sendMessageThreadPoolNums (BrokerConfig)", "serverWorkerThreads (NettyServerConfig)",
                "clientWorkerThreads (NettyClientConfig)"):
        assert key in ignored[0]
    assert "brokerName" not in ignored[0] and "fileReservedTime" not in ignored[0]


@pytest.mark.parametrize("line, message", [
    ("autoCreateTopicEnabled = true", "unknown config key 'autoCreateTopicEnabled'; did you mean "
                                      "'autoCreateTopicEnable'?"),
    ("mappedFileSizeCommitlog = 1024", "did you mean 'mappedFileSizeCommitLog'?"),
    ("noSuchThing = 1", "unknown config key 'noSuchThing'"),
    ("longPollingEnable = yes", "longPollingEnable must be true or false, got 'yes'"),
    ("brokerId = 1", "only a master (brokerId=0)"),
    ("aclEnable = true", "aclEnable=true but no accounts file: set aclFilePath"),
    ("aclEnable = true\naclFilePath = nowhere.yml", "nowhere.yml does not exist"),
    ("messageDelayLevel = 1s 5x", "messageDelayLevel: '5x' is not a number"),
])
def test_a_bad_key_is_refused_by_name(tmp_path, line, message):
    path = tmp_path / "broker.conf"
    path.write_text(line + "\n")
    with pytest.raises(ValueError) as e:
        load_broker_conf(path)
    assert message in str(e.value)
    # and `rmq serve --config` exits 2 with the same words, before it creates anything
    proc = subprocess.run([sys.executable, "-m", "rmq_cli", "-s", str(tmp_path / "s"), "serve", "--config",
                           str(path), "--listen", "127.0.0.1:0", "--namesrv-listen", "127.0.0.1:0"],
                          env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert not (tmp_path / "s").exists()


def test_rmq_serve_takes_the_broker_name_and_keys_from_the_file(tmp_path):
    path = tmp_path / "broker.conf"
    path.write_text("brokerName = broker-x\nbrokerClusterName = C1\nautoCreateTopicEnable = false\n"
                    "brokerRole = ASYNC_MASTER\n")
    proc = subprocess.Popen([sys.executable, "-m", "rmq_cli", "-s", str(tmp_path / "s"), "serve", "--config",
                             str(path), "--listen", "127.0.0.1:0", "--namesrv-listen", "127.0.0.1:0"],
                            env=dict(os.environ, PYTHONPATH=ROOT), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        line = json.loads(proc.stdout.readline())
        assert line["brokerName"] == "broker-x"

        async def use():
            async with RemotingClient(line["broker"]) as client:
                answer = await client.invoke(send("NewTopic", b"x"))
                assert answer.code == ResponseCode.TOPIC_NOT_EXIST and "autoCreateTopicEnable" in answer.remark
            async with RemotingClient(line["namesrv"]) as names:
                r = await names.invoke(RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))
                assert b"C1" in r.body and b"broker-x" in r.body
        asyncio.run(use())
        proc.terminate()
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = proc.stderr.read()
    assert "ignored: brokerRole (MessageStoreConfig)" in err
    with MessageStore(tmp_path / "s", read_only=True) as s:
        assert "NewTopic" not in s.topics() and "TBW102" not in s.topics()


def _run(tmp_path, broker_config: BrokerConfig, use):
    async def main():
        async with Broker(tmp_path / "s", "127.0.0.1:0", broker_config=broker_config) as b:
            async with RemotingClient(b.address) as client:
                await use(client)
    asyncio.run(main())


def test_enable_property_filter_false_refuses_sql92_as_rocketmq_does(tmp_path):
    async def use(client):
        assert (await client.invoke(send("T", b"a", tags="A"))).code == ResponseCode.SUCCESS
        answer = await client.invoke(pull("T", 0, "TAGS = 'A'", kind="SQL92"))
        assert answer.code == ResponseCode.SYSTEM_ERROR
        assert "does not support consumer to filter message by SQL92" in answer.remark
        assert (await client.invoke(pull("T", 0, "A"))).code == ResponseCode.SUCCESS
    _run(tmp_path, BrokerConfig(enablePropertyFilter=False), use)


def test_groups_must_exist_without_auto_create_subscription_group(tmp_path):
    async def use(client):
        await client.invoke(send("T", b"a"))
        answer = await client.invoke(pull("T", 0, group="unknown"))
        assert answer.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST and "[unknown]" in answer.remark
    _run(tmp_path, BrokerConfig(autoCreateSubscriptionGroup=False), use)

    # a group created on first use is kept in RocketMQ's subscriptionGroup.json, and is served from then on
    async def use_auto(client):
        assert (await client.invoke(pull("T", 0, group="known"))).code == ResponseCode.SUCCESS
    _run(tmp_path, BrokerConfig(), use_auto)
    table = json.loads((tmp_path / "s" / "config" / "subscriptionGroup.json").read_text())["subscriptionGroupTable"]
    assert table["known"]["retryMaxTimes"] == 16 and table["known"]["consumeEnable"] is True

    async def use_known(client):
        assert (await client.invoke(pull("T", 0, group="known"))).code == ResponseCode.SUCCESS
        assert (await client.invoke(pull("T", 0, group="other"))).code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
    _run(tmp_path, BrokerConfig(autoCreateSubscriptionGroup=False), use_known)


def test_without_long_polling_an_empty_pull_waits_the_short_polling_time(tmp_path):
    async def use(client):
        await client.invoke(send("T", b"a"))
        started = time.monotonic()
        answer = await client.invoke(pull("T", 1, suspend_ms=20_000), timeout=30)
        waited = time.monotonic() - started
        assert answer.code == ResponseCode.PULL_NOT_FOUND
        assert 0.2 <= waited < 10, waited  # shortPollingTimeMills, not the client's 20 s
    _run(tmp_path, BrokerConfig(longPollingEnable=False, shortPollingTimeMills=300), use)


def test_keyword_arguments_override_single_keys():
    b = BrokerConfig(brokerName="x").replace(brokerName=None, maxReconsumeTimes=3)
    assert dataclasses.astuple(b) == dataclasses.astuple(BrokerConfig(brokerName="x", maxReconsumeTimes=3))


def test_rmq_serve_ships_pull_limits_for_spark_and_a_file_can_lower_them(tmp_path):
    from wire_cluster import WireCluster

    from rmq_client import MessageQueue, Producer, PullConsumer

    for conf, expected in (("", 1024), ("maxTransferCountOnMessageInMemory = 32\n", 32)):
        with WireCluster(tmp_path / str(expected), conf=conf) as c:
            with Producer(c.namesrv) as p:
                p.create_topic("Big", 1)
                p.send_batch("Big", [b"x" * 100] * 2000, queue=MessageQueue("Big", "broker-a", 0))
            with PullConsumer(c.namesrv, "g") as pc:
                assert pc.pull(MessageQueue("Big", "broker-a", 0), 0, max_nums=1024).messages.num_rows == expected
