"""AdminBrokerProcessor, the broker and its topics: a queue's offsets (GET_MAX_OFFSET 30, GET_MIN_OFFSET 31,
SEARCH_OFFSET_BY_TIMESTAMP 29, GET_EARLIEST_MSG_STORETIME 32), orderly consumers' queue locks (LOCK_BATCH_MQ 41,
UNLOCK_BATCH_MQ 42), the stats mqadmin and consoles read (GET_TOPIC_STATS_INFO 202, GET_CONSUME_STATS 208,
GET_BROKER_RUNTIME_INFO 28, GET_BROKER_CONFIG 26), the topics (UPDATE_AND_CREATE_TOPIC 17, DELETE_TOPIC_IN_BROKER
215, GET_ALL_TOPIC_CONFIG 21). The consumer groups' requests are AdminGroupProcessor's."""
from __future__ import annotations

import dataclasses
import json
import shutil
import time

from remoting import RemotingCommand, RequestCode, ResponseCode
from remoting import remoting_serializable as rs
from remoting.admin_bodies import ConsumeStats, MessageQueue, OffsetWrapper, TopicOffset, TopicStatsTable
from remoting.broker_headers import (
    CreateTopicRequestHeader,
    DeleteTopicRequestHeader,
    GetBrokerConfigResponseHeader,
    GetConsumeStatsRequestHeader,
    GetEarliestMsgStoretimeResponseHeader,
    GetTopicStatsInfoRequestHeader,
    OffsetResponseHeader,
    QueueRequestHeader,
    SearchOffsetRequestHeader,
)
from rmq_common import message_codec as codec
from store.offset_store import check_group

from ..bad_request import BadRequest
from ..topic_validator import refuse_system_topic
from .request_processor import RequestProcessor, handles


class AdminBrokerProcessor(RequestProcessor):
    def __init__(self, broker):
        super().__init__()
        self.broker = broker
        self.store = broker.store

    def _offset_answer(self, cmd: RemotingCommand, offset: int) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, ext_fields=OffsetResponseHeader(offset).to_ext_fields())

    @handles(RequestCode.GET_MAX_OFFSET, header=QueueRequestHeader)
    async def max_offset(self, h: QueueRequestHeader, cmd: RemotingCommand, channel) -> RemotingCommand:
        self.broker.topics.check_queue(h.topic, h.queue_id)
        return self._offset_answer(cmd, self.store.max_offset(h.topic, h.queue_id))

    @handles(RequestCode.GET_MIN_OFFSET, header=QueueRequestHeader)
    async def min_offset(self, h: QueueRequestHeader, cmd: RemotingCommand, channel) -> RemotingCommand:
        self.broker.topics.check_queue(h.topic, h.queue_id)
        return self._offset_answer(cmd, self.store.min_offset(h.topic, h.queue_id))

    @handles(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, header=SearchOffsetRequestHeader)
    async def search_offset(self, h: SearchOffsetRequestHeader, cmd: RemotingCommand, channel) -> RemotingCommand:
        self.broker.topics.check_queue(h.topic, h.queue_id)
        return self._offset_answer(cmd, self.store.offset_for_timestamp(h.topic, h.queue_id, h.timestamp))

    def _store_time_at(self, topic: str, queue_id: int, offset: int, missing: int = 0) -> int:
        """The store timestamp of the message at a queue offset, `missing` when it is gone
        (getMessageStoreTimeStamp)."""
        got = self.store.get_message("stats", topic, queue_id, offset, 1)
        return got.messages[0].store_timestamp if got.messages else missing

    @handles(RequestCode.GET_EARLIEST_MSG_STORETIME, header=QueueRequestHeader)
    async def earliest_store_time(self, h: QueueRequestHeader, cmd: RemotingCommand, channel) -> RemotingCommand:
        self.broker.topics.check_queue(h.topic, h.queue_id)
        stamp = self._store_time_at(h.topic, h.queue_id, self.store.min_offset(h.topic, h.queue_id), -1)
        return cmd.response(ResponseCode.SUCCESS,
                            ext_fields=GetEarliestMsgStoretimeResponseHeader(stamp).to_ext_fields())

    @staticmethod
    def _lock_body(cmd: RemotingCommand) -> tuple[str, str, list, list]:
        """LockBatchRequestBody / UnlockBatchRequestBody: group, client id, the queues, and the queues as sent."""
        try:
            data = json.loads(cmd.body)
            group, client, mqs = str(data["consumerGroup"]), str(data["clientId"]), list(data.get("mqSet") or [])
            queues = [(str(m["topic"]), int(m["queueId"])) for m in mqs]
        except (ValueError, KeyError, TypeError) as e:
            raise BadRequest(f"the lock request body: {e}") from None
        return group, client, queues, mqs

    @handles(RequestCode.LOCK_BATCH_MQ)
    async def lock_batch(self, h: None, cmd: RemotingCommand, channel) -> RemotingCommand:
        """An orderly consumer locks its queues (RebalanceLockManager)."""
        group, client, queues, mqs = self._lock_body(cmd)
        locked = [mqs[i] for i in self.broker.locks.try_lock_batch(group, client, queues)]
        return cmd.response(ResponseCode.SUCCESS, body=json.dumps({"lockOKMQSet": locked}).encode())

    @handles(RequestCode.UNLOCK_BATCH_MQ)
    async def unlock_batch(self, h: None, cmd: RemotingCommand, channel) -> RemotingCommand:
        group, client, queues, _ = self._lock_body(cmd)
        self.broker.locks.unlock_batch(group, client, queues)
        return cmd.response(ResponseCode.SUCCESS)

    @handles(RequestCode.GET_TOPIC_STATS_INFO, header=GetTopicStatsInfoRequestHeader)
    async def topic_stats(self, h: GetTopicStatsInfoRequestHeader, cmd: RemotingCommand,
                          channel) -> RemotingCommand:
        """Each queue's min and max offset and the store time of its last message."""
        topic, broker_name = h.topic, self.broker.broker_name
        if not self.store.has_topic(topic):
            raise BadRequest(f"topic[{topic}] not exist", ResponseCode.TOPIC_NOT_EXIST)
        table = TopicStatsTable()
        for q in self.store.queues(topic):
            max_offset = self.store.max_offset(topic, q)
            table.offsetTable[MessageQueue(topic, broker_name, q)] = TopicOffset(
                self.store.min_offset(topic, q), max_offset,
                self._store_time_at(topic, q, max_offset - 1) if max_offset > 0 else 0)
        return cmd.response(ResponseCode.SUCCESS, body=table.encode())

    @handles(RequestCode.GET_CONSUME_STATS, header=GetConsumeStatsRequestHeader)
    async def consume_stats(self, h: GetConsumeStatsRequestHeader, cmd: RemotingCommand,
                            channel) -> RemotingCommand:
        """Per queue of the group's topics (the one asked, else every topic it has offsets of), the broker's max
        offset, the group's committed offset, and the store time of the last message it consumed; topics the
        group's online members do not subscribe to are left out, as RocketMQ does."""
        group, topic = h.consumer_group, h.topic
        try:
            check_group(group)
        except ValueError as e:
            raise BadRequest(str(e)) from None
        offsets = self.broker.offsets.offsets(group)
        offsets.load()
        online = bool(self.broker.consumers.member_ids(group))
        subscribed = self.broker.consumers.subscribed_topics(group)
        stats = ConsumeStats()
        for t in ([topic] if topic else offsets.topics()):
            if not self.store.has_topic(t) or (online and t not in subscribed):
                continue
            for q in self.store.queues(t):
                consumer = max(0, offsets.read_offset((t, q)))
                stats.offsetTable[MessageQueue(t, self.broker.broker_name, q)] = OffsetWrapper(
                    max(0, self.store.max_offset(t, q)), consumer, consumer,
                    self._store_time_at(t, q, consumer - 1) if consumer > 0 else 0)
        return cmd.response(ResponseCode.SUCCESS, body=stats.encode())

    @handles(RequestCode.UPDATE_AND_CREATE_TOPIC, header=CreateTopicRequestHeader)
    async def create_topic(self, h: CreateTopicRequestHeader, cmd: RemotingCommand, channel) -> RemotingCommand:
        """mqadmin updateTopic, DefaultMQProducer.createTopic: the topic with writeQueueNums queues, registered with
        the name server at once."""
        await self.broker.topics.create_topic(h.topic, h.read_queue_nums or 0, h.write_queue_nums or 0, h.perm)
        return cmd.response(ResponseCode.SUCCESS)

    @handles(RequestCode.DELETE_TOPIC_IN_BROKER, header=DeleteTopicRequestHeader)
    async def delete_topic(self, h: DeleteTopicRequestHeader, cmd: RemotingCommand, channel) -> RemotingCommand:
        """mqadmin deleteTopic: the topic's config and consume queues go, and every group's offsets of it (its
        messages stay in the commitlog until retention); registered with the name server at once."""
        try:
            codec.check_topic(h.topic)
        except ValueError as e:
            raise BadRequest(str(e)) from None
        refuse_system_topic(h.topic)
        if self.store.delete_topic(h.topic):
            self.broker.offsets.remove_topic(h.topic)
            if self.broker.outer_api is not None and self.broker.outer_api.connected:
                await self.broker.register()
        return cmd.response(ResponseCode.SUCCESS)

    @handles(RequestCode.GET_ALL_TOPIC_CONFIG)
    async def all_topic_config(self, h: None, cmd: RemotingCommand, channel) -> RemotingCommand:
        """TopicConfigSerializeWrapper: every topic's config and the table's data version."""
        table = {name: dataclasses.asdict(cfg) for name, cfg in sorted(self.store.topic_config.table.items())}
        return cmd.response(ResponseCode.SUCCESS, body=rs.encode(
            {"dataVersion": self.store.topic_config.data_version, "topicConfigTable": table}))

    @handles(RequestCode.GET_BROKER_CONFIG)
    async def broker_config(self, h: None, cmd: RemotingCommand, channel) -> RemotingCommand:
        """Every key of broker.conf this broker reads (its own and the store's) as `key=value` lines, as
        Configuration.getAllConfigsFormatString writes them."""
        values = {**dataclasses.asdict(self.broker.store_config), **dataclasses.asdict(self.broker.broker_config)}
        values["storePathRootDir"] = self.store.path
        values["brokerIP1"], values["listenPort"] = self.broker.address.rsplit(":", 1)  # as RocketMQ fills them in
        text = "".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}\n" for k, v in sorted(values.items()))
        version = json.dumps(self.store.topic_config.data_version, separators=(",", ":"))
        return cmd.response(ResponseCode.SUCCESS, body=text.encode(),
                            ext_fields=GetBrokerConfigResponseHeader(version).to_ext_fields())

    @handles(RequestCode.GET_BROKER_RUNTIME_INFO)
    async def runtime_info(self, h: None, cmd: RemotingCommand, channel) -> RemotingCommand:
        """KVTable of the runtime figures mqadmin brokerStatus and clusterList print, those this broker keeps."""
        stats, store = self.broker.stats, self.store
        disk = shutil.disk_usage(store.path)
        server = self.broker.server
        earliest = self._earliest_store_time()
        table = {
            "brokerVersionDesc": "V4_9_7", "brokerVersion": "407",  # the protocol this broker speaks
            "msgPutTotalTodayNow": stats.put_total, "msgPutTotalTodayMorning": stats.put_this_morning,
            "msgPutTotalYesterdayMorning": stats.put_yesterday_morning,
            "msgGetTotalTodayNow": stats.get_total, "msgGetTotalTodayMorning": stats.get_this_morning,
            "msgGetTotalYesterdayMorning": stats.get_yesterday_morning,
            "putTps": stats.tps(0), "getTransferedTps": stats.tps(1),
            "commitLogMinOffset": store.commit_log_min_offset(), "commitLogMaxOffset": store.commit_log_max_offset(),
            "earliestMessageTimeStamp": earliest,
            "commitLogDiskRatio": f"{(disk.total - disk.free) / disk.total if disk.total else 0.0:.4f}",
            "commitLogDirCapacity": f"Total : {_human(disk.total)}, Free : {_human(disk.free)}.",
            # requests are processed as they come: what waits is the requests being processed
            "sendThreadPoolQueueSize": server.busy, "pullThreadPoolQueueSize": 0, "queryThreadPoolQueueSize": 0,
            "sendThreadPoolQueueHeadWaitTimeMills": 0, "pullThreadPoolQueueHeadWaitTimeMills": 0,
            "queryThreadPoolQueueHeadWaitTimeMills": 0, "pageCacheLockTimeMills": 0, "dispatchBehindBytes": 0,
            "bootTimestamp": self.broker.started_ms,
            "runtime": _uptime(int(time.time() * 1000) - self.broker.started_ms),
        }
        body = rs.encode({"table": {k: str(v) for k, v in sorted(table.items())}})
        return cmd.response(ResponseCode.SUCCESS, body=body)

    def _earliest_store_time(self) -> int:
        """The store time of the oldest message still in the commitlog (getEarliestMessageTime), 0 when none."""
        if self.store.commit_log_max_offset() <= self.store.commit_log_min_offset():
            return 0
        found = self.store.look_message_by_offset(self.store.commit_log_min_offset())
        return found[0].store_timestamp if found is not None else 0


def _human(n: int) -> str:
    """MixAll.humanReadableByteCount(n, false)."""
    if n < 1024:
        return f"{n} B"
    units = "KMGTPE"
    value, exp = float(n), 0
    while value >= 1024 and exp < len(units):
        value /= 1024
        exp += 1
    return f"{value:.1f} {units[exp - 1]}iB"


def _uptime(ms: int) -> str:
    """As the store's runtime info writes it: ' [ 0 days, 0 hours, 1 minutes, 5 seconds ]'."""
    s = ms // 1000
    return f"[ {s // 86400} days, {s // 3600 % 24} hours, {s // 60 % 60} minutes, {s % 60} seconds ]"
