"""The checks PullMessageProcessor and SendMessageProcessor make before touching the store: the topic's perm
(NO_PERMISSION) and a pull that names a newer subscription than the consumer's last heartbeat
(SUBSCRIPTION_NOT_LATEST)."""
from __future__ import annotations

import asyncio
import json

from broker_testkit import pull, send

from remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from rmq_broker import Broker


def test_topic_permissions_and_subscription_versions(tmp_path):
    async def main():
        async with Broker(tmp_path / "s", "127.0.0.1:0") as b:
            async with RemotingClient(b.address) as client:
                for topic in ("WriteOnly", "ReadOnly", "T"):
                    assert (await client.invoke(send(topic, b"x"))).code == ResponseCode.SUCCESS
                b.store.topic_config.table["WriteOnly"].perm = 2
                b.store.topic_config.table["ReadOnly"].perm = 4
                b.store.topic_config.persist()
                refused = await client.invoke(pull("WriteOnly", 0))
                assert refused.code == ResponseCode.NO_PERMISSION
                assert "topic[WriteOnly] pulling message is forbidden" in refused.remark
                refused = await client.invoke(send("ReadOnly", b"y"))
                assert refused.code == ResponseCode.NO_PERMISSION
                assert "topic[ReadOnly] sending message is forbidden" in refused.remark
                assert (await client.invoke(pull("ReadOnly", 0))).code == ResponseCode.SUCCESS
                assert (await client.invoke(send("WriteOnly", b"y"))).code == ResponseCode.SUCCESS

                await client.invoke(RemotingCommand.request(RequestCode.HEART_BEAT, body=json.dumps({
                    "clientID": "c1", "producerDataSet": [], "consumerDataSet": [{
                        "groupName": "g", "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
                        "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "unitMode": False,
                        "subscriptionDataSet": [{"topic": "T", "subString": "*", "tagsSet": [], "codeSet": [],
                                                 "subVersion": 5, "expressionType": "TAG"}]}]}).encode()))

                def pull_by_heartbeat(sub_version):
                    cmd = pull("T", 0)
                    cmd.ext_fields.update(sysFlag="0", subVersion=str(sub_version))  # no subscription in the pull
                    return cmd
                stale = await client.invoke(pull_by_heartbeat(6))
                assert stale.code == ResponseCode.SUBSCRIPTION_NOT_LATEST and "not the latest" in stale.remark
                assert (await client.invoke(pull_by_heartbeat(5))).code == ResponseCode.SUCCESS
    asyncio.run(main())


def test_a_member_that_joins_later_pulls_with_its_newer_subscription_version(tmp_path):
    """Each member's heartbeat carries its own subVersion (its subscribe time); the group's subscription is the newest
    of them, so the later member's pulls are not refused SUBSCRIPTION_NOT_LATEST while the first member stays (the
    Java client would retry every 3 s until the first member left)."""
    def heartbeat(client_id, sub_version):
        return RemotingCommand.request(RequestCode.HEART_BEAT, body=json.dumps({
            "clientID": client_id, "producerDataSet": [], "consumerDataSet": [{
                "groupName": "g", "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
                "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "unitMode": False,
                "subscriptionDataSet": [{"topic": "T", "subString": "*", "tagsSet": [], "codeSet": [],
                                         "subVersion": sub_version, "expressionType": "TAG"}]}]}).encode())

    def pull_by_heartbeat(sub_version):
        cmd = pull("T", 0)
        cmd.ext_fields.update(sysFlag="0", subVersion=str(sub_version))
        return cmd

    async def main():
        async with Broker(tmp_path / "s", "127.0.0.1:0") as b:
            async with RemotingClient(b.address) as first, RemotingClient(b.address) as later:
                assert (await first.invoke(send("T", b"x"))).code == ResponseCode.SUCCESS
                await first.invoke(heartbeat("first", 100))
                await later.invoke(heartbeat("later", 200))
                await first.invoke(heartbeat("first", 100))  # the first member's next heartbeat changes nothing
                assert (await later.invoke(pull_by_heartbeat(200))).code == ResponseCode.SUCCESS
                assert (await first.invoke(pull_by_heartbeat(100))).code == ResponseCode.SUCCESS
                assert (await later.invoke(pull_by_heartbeat(300))).code == ResponseCode.SUBSCRIPTION_NOT_LATEST
    asyncio.run(main())
