"""GET_TOPIC_STATS_INFO and GET_CONSUME_STATS, as mqadmin topicStatus / consumerProgress read them: bodies in
fastjson's form (MessageQueue objects as map keys), offsets and times from the store and config/consumerOffset.json
(a group's offsets committed by the Spark source count the same as a wire client's)."""
from __future__ import annotations

import asyncio
import time

from broker_testkit import pull, send

from remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from remoting import remoting_serializable as rs
from remoting.admin_bodies import ConsumeStats, MessageQueue, OffsetWrapper, TopicStatsTable
from rmq_broker import Broker
from store import OffsetStore


def test_topic_stats_and_consume_stats(tmp_path):
    async def main():
        async with Broker(tmp_path / "s", "127.0.0.1:0", broker_name="broker-s") as b:
            async with RemotingClient(b.address) as client:
                before = int(time.time() * 1000)
                for i in range(5):
                    assert (await client.invoke(send("T", b"m%d" % i, queue_id=i % 2))).code == ResponseCode.SUCCESS
                await client.invoke(send("Other", b"o", queue_id=0))
                after = int(time.time() * 1000)
                # GET_BROKER_RUNTIME_INFO counts the messages pulls found (mqadmin brokerStatus' msgGetTotalTodayNow)
                assert (await client.invoke(pull("T", 0))).code == ResponseCode.SUCCESS
                runtime = rs.decode((await client.invoke(RemotingCommand.request(
                    RequestCode.GET_BROKER_RUNTIME_INFO))).body)["table"]
                assert (runtime["msgPutTotalTodayNow"], runtime["msgGetTotalTodayNow"]) == ("6", "3")
                answer = await client.invoke(RemotingCommand.request(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "T"}))
                assert answer.code == ResponseCode.SUCCESS
                assert answer.body.startswith(b'{"offsetTable":{{"brokerName":"broker-s","queueId":0,"topic":"T"}:')
                stats = TopicStatsTable.decode(answer.body)
                queues = {mq.queue_id: o for mq, o in stats.offsetTable.items() if mq.topic == "T"}
                assert {q: (o.minOffset, o.maxOffset) for q, o in queues.items() if o.maxOffset} == {0: (0, 3),
                                                                                                 1: (0, 2)}
                assert all(before <= o.lastUpdateTimestamp <= after for o in queues.values() if o.maxOffset)
                missing = await client.invoke(RemotingCommand.request(RequestCode.GET_TOPIC_STATS_INFO,
                                                                      {"topic": "Nope"}))
                assert missing.code == ResponseCode.TOPIC_NOT_EXIST and "Nope" in missing.remark

                # the wire client commits queue 0 up to 2; the Spark source (same file) committed queue 1 of
                # Other for another group
                await client.invoke(RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {
                    "consumerGroup": "g", "topic": "T", "queueId": 0, "commitOffset": 2}))
                spark = OffsetStore(tmp_path / "s", "spark-group")
                spark.update_offset(("Other", 0), 1)
                spark.persist_all()

                async def consume_stats(group, topic=None):
                    fields = {"consumerGroup": group, **({"topic": topic} if topic else {})}
                    r = await client.invoke(RemotingCommand.request(RequestCode.GET_CONSUME_STATS, fields))
                    assert r.code == ResponseCode.SUCCESS, r.remark
                    return ConsumeStats.decode(r.body)
                g = await consume_stats("g")
                assert g.offsetTable[MessageQueue("T", "broker-s", 0)].brokerOffset == 3
                assert g.offsetTable[MessageQueue("T", "broker-s", 0)].consumerOffset == 2
                assert before <= g.offsetTable[MessageQueue("T", "broker-s", 0)].lastTimestamp <= after
                assert g.offsetTable[MessageQueue("T", "broker-s", 1)] == OffsetWrapper(2, 0, 0, 0)
                assert {mq.topic for mq in g.offsetTable} == {"T"}
                assert g.diff_total() == 5 - 2
                s = await consume_stats("spark-group")
                assert s.offsetTable[MessageQueue("Other", "broker-s", 0)].consumerOffset == 1
                assert s.diff_total() == 0
                assert (await consume_stats("g", "Other")).offsetTable[MessageQueue("Other", "broker-s", 0)] \
                    .consumerOffset == 0
                bad = await client.invoke(RemotingCommand.request(RequestCode.GET_CONSUME_STATS,
                                                                  {"consumerGroup": "bad group"}))
                assert bad.code == ResponseCode.SYSTEM_ERROR and "bad group" in bad.remark
    asyncio.run(main())


def test_stats_bodies_round_trip_in_both_json_forms():
    stats = ConsumeStats({MessageQueue("T", "b", 1): OffsetWrapper(9, 4, 4, 123)}, 1.5)
    assert ConsumeStats.decode(stats.encode()) == stats
    standard = b'{"consumeTps":1.5,"offsetTable":{"{\\"brokerName\\":\\"b\\",\\"queueId\\":1,\\"topic\\":\\"T\\"}":' \
               b'{"brokerOffset":9,"consumerOffset":4,"lastTimestamp":123,"pullOffset":4}}}'
    assert ConsumeStats.decode(standard) == stats
