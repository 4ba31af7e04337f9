"""A RocketMQ broker over a MessageStore: SendMessageProcessor, PullMessageProcessor (with the long polling of
PullRequestHoldService), ConsumerManageProcessor, ClientManageProcessor, registered with a name server.

`async with Broker(store_path, listen="127.0.0.1:0", namesrv=ns.address) as broker:`. Processors run on the
event loop and call the store directly: an append or a pull of up to 32 messages takes well under a millisecond.
"""
from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from acl.acl_exception import AclException
from acl.permission import SUB
from acl.plain_access_validator import PlainAccessValidator
from filters import MessageFilter
from remoting import RemotingClient, RemotingCommand, RemotingServer, RequestCode, ResponseCode
from remoting.admin_bodies import ConsumeStats, MessageQueue, OffsetWrapper, TopicOffset, TopicStatsTable
from remoting.broker_headers import send_fields
from remoting.remoting_server import LARGE_BODY, Channel
from store import GetMessageResult, GetMessageStatus, MessageStore, OffsetStore, ReadOffsetType, StoreError, native
from store import message_codec as codec
from store.errors import CorruptRecordError
from store.message_properties import PropertiesText, parse_properties
from store.offset_store import check_group
from store.store_config import StoreConfig

from .broker_config import BrokerConfig
from .end_transaction_processor import EndTransactionProcessor, ProducerManager, TransactionalMessageCheckService
from .pull_request_hold_service import PullRequestHoldService
from .request_fields import BadRequest
from .request_fields import int_field as _int_field
from .schedule_message_service import PROPERTY_DELAY, ScheduleMessageService
from .selector_cache import SelectorCache
from .subscription_group_manager import SubscriptionGroupManager
from .topic_validator import refuse_illegal_queue, refuse_not_allowed_send_topic
from .transactional_message_service import (
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TRANSACTION_BATCH,
    PROPERTY_TRANSACTION_PREPARED,
    TransactionalMessageService,
)

log = logging.getLogger(__name__)

DEFAULT_TOPIC = "TBW102"
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
PERM_INHERIT = 0x1  # PermName
PERM_WRITE = 0x2
PERM_READ = 0x4

# PullSysFlag
FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4

_PULL_STATUS = {
    GetMessageStatus.FOUND: ResponseCode.SUCCESS,
    GetMessageStatus.NO_MATCHED_MESSAGE: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetMessageStatus.MESSAGE_WAS_REMOVING: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetMessageStatus.OFFSET_FOUND_NULL: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.NO_MESSAGE_IN_QUEUE: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_OVERFLOW_ONE: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_OVERFLOW_BADLY: ResponseCode.PULL_OFFSET_MOVED,
    GetMessageStatus.OFFSET_TOO_SMALL: ResponseCode.PULL_OFFSET_MOVED,
    GetMessageStatus.NO_MATCHED_LOGIC_QUEUE: ResponseCode.PULL_NOT_FOUND,
}


@dataclass
class _Client:
    channel: Channel
    last_heartbeat: float
    subscriptions: dict = field(default_factory=dict)  # topic -> subscription data (as the heartbeat sent it)



class Broker:
    def __init__(self, store_path, listen: Optional[str] = None, namesrv: Optional[str] = None,
                 broker_name: Optional[str] = None, cluster: Optional[str] = None,
                 config: Optional[StoreConfig] = None, broker_config: Optional[BrokerConfig] = None,
                 register_interval_s: float = 30.0, client_expiry_s: float = 120.0,
                 message_delay_level: Optional[str] = None, max_reconsume_times: Optional[int] = None,
                 default_topic_queues: Optional[int] = None):
        """broker_config holds broker.conf's broker keys (load_broker_conf reads a file into both configs); the
        keyword arguments override single keys of it, for tests and notebooks."""
        self.broker_config = bc = (broker_config or BrokerConfig()).replace(
            brokerName=broker_name, brokerClusterName=cluster, namesrvAddr=namesrv,
            messageDelayLevel=message_delay_level, maxReconsumeTimes=max_reconsume_times,
            defaultTopicQueueNums=default_topic_queues)
        self.acl: Optional[PlainAccessValidator] = None
        if bc.aclEnable:  # before the store is opened: accounts that do not load stop the broker here
            try:
                self.acl = PlainAccessValidator(bc.acl_file())
            except AclException as e:
                raise ValueError(f"aclEnable=true: {e}") from None
        config = config or StoreConfig()
        if config.messageDelayLevel != bc.messageDelayLevel:  # the store dates delayed messages' units with it
            config = config.replace(messageDelayLevel=bc.messageDelayLevel)
        if listen is None:
            listen = f"{config.brokerIP1 or '127.0.0.1'}:{config.listenPort}"
        host, _, port = listen.rpartition(":")
        self.store = MessageStore(store_path, config)
        self.server = RemotingServer(host or "127.0.0.1", int(port), limits=bc.server_limits())
        self.namesrv, self.broker_name, self.cluster = bc.namesrvAddr or None, bc.brokerName, bc.brokerClusterName
        self.register_interval_s = register_interval_s
        self.default_topic_queues = bc.defaultTopicQueueNums
        self.groups: dict[str, dict[str, _Client]] = {}  # consumer group -> client id -> client
        self._offsets: dict[str, OffsetStore] = {}
        self.hold = PullRequestHoldService(self.store)
        self.selectors = SelectorCache()
        self._stopping = False
        self._min_offsets: dict[tuple[str, int], tuple[int, float]] = {}  # queue -> (min offset, when read)
        self.client_expiry_s = client_expiry_s
        self.max_reconsume_times = bc.maxReconsumeTimes
        self.schedule = ScheduleMessageService(self.store, bc.messageDelayLevel, on_deliver=self._arrived)
        self.subscription_groups = SubscriptionGroupManager(self.store.path, bc.autoCreateSubscriptionGroup,
                                                            bc.maxReconsumeTimes)
        self.lock_expiry_s = 60.0  # RebalanceLockManager: a queue lock not renewed for this long is free
        self._locks: dict[str, dict[tuple[str, int], tuple[str, float]]] = {}  # group -> queue -> (client, time)
        self._registering: Optional[asyncio.Task] = None
        self._background: set[asyncio.Task] = set()
        self._namesrv_client: Optional[RemotingClient] = None
        self.transactions = TransactionalMessageService(self.store)
        self.producers = ProducerManager(client_expiry_s)
        self.end_transaction = end_transaction = EndTransactionProcessor(self.transactions, self._arrived)
        self.transaction_check = TransactionalMessageCheckService(
            self.transactions, self.producers, bc.transactionTimeOut, bc.transactionCheckMax,
            bc.transactionCheckInterval, end_transaction.end)
        for code, processor in ((RequestCode.SEND_MESSAGE, self._send), (RequestCode.SEND_MESSAGE_V2, self._send),
                                (RequestCode.END_TRANSACTION, end_transaction.process),
                                (RequestCode.PULL_MESSAGE, self._pull),
                                (RequestCode.QUERY_CONSUMER_OFFSET, self._query_offset),
                                (RequestCode.UPDATE_CONSUMER_OFFSET, self._update_offset),
                                (RequestCode.GET_MAX_OFFSET, self._max_offset),
                                (RequestCode.GET_MIN_OFFSET, self._min_offset),
                                (RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, self._search_offset),
                                (RequestCode.HEART_BEAT, self._heartbeat),
                                (RequestCode.UNREGISTER_CLIENT, self._unregister_client),
                                (RequestCode.GET_CONSUMER_LIST_BY_GROUP, self._consumer_list),
                                (RequestCode.CONSUMER_SEND_MSG_BACK, self._send_back),
                                (RequestCode.SEND_BATCH_MESSAGE, self._send_batch),
                                (RequestCode.GET_EARLIEST_MSG_STORETIME, self._earliest_store_time),
                                (RequestCode.VIEW_MESSAGE_BY_ID, self._view_message),
                                (RequestCode.LOCK_BATCH_MQ, self._lock_batch),
                                (RequestCode.UNLOCK_BATCH_MQ, self._unlock_batch),
                                (RequestCode.GET_TOPIC_STATS_INFO, self._topic_stats),
                                (RequestCode.GET_CONSUME_STATS, self._consume_stats),
                                (RequestCode.UPDATE_AND_CREATE_TOPIC, self._create_topic)):
            self.server.register(code, self._answering(processor))
        self.server.on_close.append(self._channel_closed)
        if self.acl is not None:
            self.server.before_request.append(self._access_check)

    @property
    def address(self) -> str:
        return self.server.address

    async def start(self) -> "Broker":
        self._default_topic()
        self.transactions.create_topics()  # registered with the others: admin tools read them through routes
        await self.server.start()
        # STOREHOST of every record this broker stores: clients send a message back to the broker it names
        host = self.server.host if self.server.host not in ("0.0.0.0", "::", "") else codec.local_host_address()
        self.store.store_host = codec.parse_host((host, self.server.port))
        self._background.add(asyncio.ensure_future(self._expire_clients()))
        self._background.add(asyncio.ensure_future(self.hold.watch_other_writers()))
        self._background.add(asyncio.ensure_future(self.transaction_check.run()))
        self.schedule.start()
        if self.acl is not None:
            self._background.add(asyncio.ensure_future(self.acl.manager.watch()))
        if self.namesrv:
            self._namesrv_client = await RemotingClient(self.namesrv).connect()
            await self.register()
            self._registering = asyncio.ensure_future(self._register_periodically())
        log.info("broker %s listening on %s", self.broker_name, self.address)
        return self

    async def stop(self) -> None:
        for task in [self._registering, *self._background]:
            if task is not None:
                task.cancel()
        if self._namesrv_client is not None:
            try:
                await self._namesrv_client.invoke(RemotingCommand.request(RequestCode.UNREGISTER_BROKER, {
                    "brokerName": self.broker_name, "brokerAddr": self.address, "clusterName": self.cluster,
                    "brokerId": 0}), timeout=3)
            except (ConnectionError, TimeoutError):
                pass
            await self._namesrv_client.close()
        self._stopping = True
        self.hold.release_all()  # held pulls are answered (PULL_NOT_FOUND) before the connections close
        await self.server.stop(grace_s=2.0)
        await self.schedule.stop()
        self.selectors.close()
        self.end_transaction.close()
        for offsets in self._offsets.values():
            offsets.persist_all()
        self.store.close()

    async def __aenter__(self) -> "Broker":
        return await self.start()

    async def __aexit__(self, *exc) -> None:
        await self.stop()

    def _default_topic(self) -> None:
        """autoCreateTopicEnable: RocketMQ's TBW102, whose route a producer borrows for a topic that does not
        exist yet (perm 7: inherit, read, write); the first send then creates the topic here."""
        if not self.broker_config.autoCreateTopicEnable or self.store.has_topic(DEFAULT_TOPIC):
            return
        cfg = self.store.create_topic(DEFAULT_TOPIC, self.default_topic_queues)
        cfg.perm = PERM_INHERIT | PERM_READ | PERM_WRITE
        self.store.topic_config.persist()

    # -- name server -------------------------------------------------------------------------------------------

    async def register(self, only: Optional[str] = None) -> None:
        """REGISTER_BROKER with every topic's queue counts (what RocketMQ's BrokerOuterAPI sends), or with the one
        topic just created (registerIncrementBrokerData: the name server merges it), so that creating a topic
        does not cost a message the size of the whole table."""
        assert self._namesrv_client is not None
        topics = self.store.topic_config
        topics.refresh()  # topics another process (rmq produce --store, a Spark sink) created since
        chosen = {only: topics.table[only]} if only is not None and only in topics.table else topics.table
        table = {name: {"topicName": name, "readQueueNums": cfg.readQueueNums, "writeQueueNums": cfg.writeQueueNums,
                        "perm": cfg.perm, "topicFilterType": cfg.topicFilterType, "topicSysFlag": cfg.topicSysFlag,
                        "order": cfg.order} for name, cfg in chosen.items()}
        body = json.dumps({"topicConfigSerializeWrapper": {"topicConfigTable": table,
                                                           "dataVersion": self.store.topic_config.data_version},
                           "filterServerList": []}).encode()
        answer = await self._namesrv_client.invoke(RemotingCommand.request(RequestCode.REGISTER_BROKER, {
            "brokerName": self.broker_name, "brokerAddr": self.address, "clusterName": self.cluster,
            "haServerAddr": self.address, "brokerId": 0, "compressed": "false"}, body=body))
        if answer.code != ResponseCode.SUCCESS:
            log.warning("the name server %s refused the registration: %s", self.namesrv, answer.remark)

    async def _register_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.register_interval_s)
            try:
                await self.register()
            except (ConnectionError, TimeoutError) as e:
                log.warning("registration with %s failed: %s", self.namesrv, e)

    # -- plumbing ----------------------------------------------------------------------------------------------

    def _access_check(self, cmd: RemotingCommand, channel: Channel) -> Optional[RemotingCommand]:
        """aclEnable: every request checked before its processor (RocketMQ's ACL RPCHook); a refusal is
        NO_PERMISSION (RocketMQ 4.9 answers SYSTEM_ERROR with the same text)."""
        assert self.acl is not None
        why = self.acl.refusal(cmd, channel.remote_address)
        if why is None:
            return None
        log.info("refused request code %d from %s: %s", cmd.code, channel.remote_address, why)
        return cmd.response(ResponseCode.NO_PERMISSION, why)

    def _check_message_access(self, cmd: RemotingCommand, channel: Channel, topic: str) -> None:
        """aclEnable: the account may read the topic of a message it names by offset (NO_PERMISSION if not)."""
        why = None if self.acl is None else self.acl.refusal_for(cmd, channel.remote_address, topic, SUB)
        if why is not None:
            log.info("refused request code %d from %s: %s", cmd.code, channel.remote_address, why)
            raise BadRequest(why, ResponseCode.NO_PERMISSION)

    def _answering(self, processor):
        async def run(cmd: RemotingCommand, channel):
            try:
                return await processor(cmd, channel)
            except BadRequest as e:
                return cmd.response(e.code, str(e))
            except StoreError as e:
                return cmd.response(ResponseCode.SYSTEM_ERROR, f"{type(e).__name__}: {e}")
        return run

    def _offset_store(self, group: str) -> OffsetStore:
        store = self._offsets.get(group)
        if store is None:
            try:
                store = self._offsets[group] = OffsetStore(self.store.path, group)
            except ValueError as e:
                raise BadRequest(str(e)) from None
            store.load()
        return store

    async def _topic_for_send(self, topic: str, ext: dict) -> None:
        """An unknown topic is created when autoCreateTopicEnable (and registered with the name server at once),
        else the send is refused with TOPIC_NOT_EXIST (SendMessageProcessor / TopicConfigManager)."""
        try:
            codec.check_topic(topic)
        except ValueError as e:
            raise BadRequest(str(e), ResponseCode.MESSAGE_ILLEGAL) from None
        refuse_not_allowed_send_topic(topic)
        if self.store.has_topic(topic):
            self._check_permission(topic, PERM_WRITE, "sending")
            return
        if not self.broker_config.autoCreateTopicEnable:
            raise BadRequest(f"topic[{topic}] not exist, apply first please! (autoCreateTopicEnable is false on "
                             f"broker {self.broker_name})", ResponseCode.TOPIC_NOT_EXIST)
        # at most TBW102's queues, as createTopicInSendMessageMethod caps the producer's defaultTopicQueueNums
        most = len(self.store.queues(DEFAULT_TOPIC)) if self.store.has_topic(DEFAULT_TOPIC) else \
            self.default_topic_queues
        queues = min(_int_field(ext, "defaultTopicQueueNums", self.default_topic_queues), most)
        self.store.create_topic(topic, max(1, queues))
        if self._namesrv_client is not None:
            await self.register(topic)

    async def _create_topic(self, cmd: RemotingCommand, channel) -> RemotingCommand:
        """UPDATE_AND_CREATE_TOPIC (AdminBrokerProcessor; mqadmin updateTopic, DefaultMQProducer.createTopic): the
        topic with writeQueueNums queues, registered with the name server at once. An existing topic keeps its
        queues: asking for other numbers is refused (the store does not resize a topic)."""
        ext = cmd.ext_fields
        topic = ext.get("topic") or ""
        try:
            codec.check_topic(topic)
        except ValueError as e:
            raise BadRequest(str(e)) from None
        if topic == self.broker_config.brokerClusterName:
            raise BadRequest(f"the topic[{topic}] is conflict with system reserved words")
        reads = _int_field(ext, "readQueueNums", 0)
        writes = _int_field(ext, "writeQueueNums", 0)
        if not 0 < writes <= 1024 or reads != writes:
            raise BadRequest(f"readQueueNums {reads} and writeQueueNums {writes}: give the same number, 1..1024")
        existing = self.store.topic_config.table.get(topic)
        perm = _int_field(ext, "perm", PERM_READ | PERM_WRITE if existing is None else existing.perm)
        if not 0 <= perm <= (PERM_READ | PERM_WRITE | PERM_INHERIT):
            raise BadRequest(f"perm {perm}: give PermName's bits, 0..7 (4 readable, 2 writeable, 1 inherit)")
        if self.store.has_topic(topic):
            have = len(self.store.queues(topic))
            if have != writes:
                raise BadRequest(f"topic[{topic}] exists with {have} queues on broker {self.broker_name}; this "
                                 f"broker does not change a topic's queue numbers")
        else:
            self.store.create_topic(topic, writes)
        cfg = self.store.topic_config.table[topic]
        if cfg.perm != perm:  # the topic's perm as the request gives it (TopicConfig.perm), read by every pull
            cfg.perm = perm
            self.store.topic_config.persist()
        if self._namesrv_client is not None:
            await self.register(topic)
        return cmd.response(ResponseCode.SUCCESS)

    def _group_config(self, group: str) -> dict:
        """The consumer group's config (SubscriptionGroupManager.findSubscriptionGroupConfig), checked as the pull
        and send-back processors check it."""
        try:
            check_group(group)
        except ValueError as e:
            raise BadRequest(str(e)) from None
        config = self.subscription_groups.find(group)
        if config is None:
            raise BadRequest(f"subscription group [{group}] does not exist (autoCreateSubscriptionGroup is false; "
                             "add it to config/subscriptionGroup.json)", ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST)
        if not config.get("consumeEnable", True):
            raise BadRequest(f"subscription group [{group}] no permission to consume (consumeEnable is false)",
                             ResponseCode.NO_PERMISSION)
        return config

    def _check_permission(self, topic: str, perm: int, action: str) -> None:
        """The topic's perm (PermName: 4 readable, 2 writeable) allows the pull or send (NO_PERMISSION if not)."""
        cfg = self.store.topic_config.table.get(topic)
        if cfg is not None and not cfg.perm & perm:
            raise BadRequest(f"the topic[{topic}] {action} message is forbidden (perm {cfg.perm})",
                             ResponseCode.NO_PERMISSION)

    def _check_queue(self, topic: str, queue_id: int) -> None:
        if not self.store.has_topic(topic):
            raise BadRequest(f"topic {topic} does not exist on broker {self.broker_name}", ResponseCode.TOPIC_NOT_EXIST)
        if queue_id not in self.store.queues(topic):
            raise BadRequest(f"queueId {queue_id} is illegal for topic {topic}", ResponseCode.SYSTEM_ERROR)

    def _channel_closed(self, channel) -> None:
        self.producers.channel_closed(channel)
        for group, clients in list(self.groups.items()):
            left = [cid for cid, client in clients.items() if client.channel is channel]
            for cid in left:
                del clients[cid]
            if not clients:
                del self.groups[group]
            elif left:
                task = asyncio.ensure_future(self._notify_ids_changed(group))
                self._background.add(task)
                task.add_done_callback(self._background.discard)

    # -- SendMessageProcessor ------------------------------------------------------------------------------------

    async def _send(self, cmd: RemotingCommand, channel) -> RemotingCommand:
        ext = send_fields(cmd.code, cmd.ext_fields)
        topic = ext.get("topic") or ""
        await self._topic_for_send(topic, ext)
        queue_id = _int_field(ext, "queueId", -1)
        refuse_illegal_queue(topic, queue_id, len(self.store.queues(topic)))
        properties = parse_properties(ext.get("properties"))
        sys_flag = _int_field(ext, "sysFlag", 0) & ~codec.RESERVED_SYS_FLAGS & ~codec.TRANSACTION_TYPE_MASK
        undecompressable = codec.body_decompress_error(cmd.body, sys_flag)
        if undecompressable is not None:  # stored, it would stop every read of its queue
            raise BadRequest(f"the body does not decompress as its sysFlag {sys_flag} says: {undecompressable}",
                             ResponseCode.MESSAGE_ILLEGAL)
        put_args = dict(flag=_int_field(ext, "flag", 0), sys_flag=sys_flag,
                        born_timestamp=_int_field(ext, "bornTimestamp", int(time.time() * 1000)),
                        born_host=channel.remote_address, reconsume_times=_int_field(ext, "reconsumeTimes", 0))
        if properties.get(PROPERTY_TRANSACTION_PREPARED) == "true":
            texts = pa.array([ext.get("properties") or ""], pa.string())
            return self._prepare(cmd, topic, queue_id, pa.array([cmd.body], pa.binary()), texts,
                                 PropertiesText(texts), put_args)
        delay = properties.pop(PROPERTY_DELAY, None)
        try:
            if delay is not None and delay.isdigit() and int(delay) > 0:  # a delayed message: waits its level out
                if queue_id < 0:
                    queue_id = self.store.take_round_robin(topic, len(self.store.queues(topic)), 1)
                result = self.schedule.schedule(topic, queue_id, cmd.body, properties, int(delay), **put_args)
            else:
                result = self.store.put(topic, cmd.body, properties=properties or None,
                                        queue_id=None if queue_id < 0 else queue_id, **put_args)
                self._arrived(topic, result.queue_id)
        except ValueError as e:
            raise BadRequest(str(e), ResponseCode.MESSAGE_ILLEGAL) from None
        return cmd.response(ResponseCode.SUCCESS, ext_fields={
            "msgId": result.msg_id, "queueId": result.queue_id, "queueOffset": result.queue_offset,
            "MSG_REGION": "DefaultRegion", "TRACE_ON": "false"})

    async def _send_batch(self, cmd: RemotingCommand, channel) -> RemotingCommand:
        """SEND_BATCH_MESSAGE: a MessageBatch body (each message as MessageDecoder.encodeMessage writes it) appended
        with one put_batch, so its messages get consecutive queue offsets."""
        ext = send_fields(cmd.code, cmd.ext_fields)
        topic = ext.get("topic") or ""
        bodies, props = _decode_message_batch(cmd.body)
        if not len(bodies):
            raise BadRequest("the batch holds no message", ResponseCode.MESSAGE_ILLEGAL)
        await self._topic_for_send(topic, ext)
        queue_id = _int_field(ext, "queueId", -1)
        if queue_id < 0:
            queue_id = self.store.take_round_robin(topic, len(self.store.queues(topic)), 1)
        if props is not None:
            looked = PropertiesText(props)
            prepared = pc.equal(looked.column(PROPERTY_TRANSACTION_PREPARED), "true")
            if pc.any(prepared).as_py():
                if not pc.all(pc.fill_null(prepared, False)).as_py():
                    raise BadRequest(f"the batch mixes transactional messages ({PROPERTY_TRANSACTION_PREPARED}=true) "
                                     "with others", ResponseCode.MESSAGE_ILLEGAL)
                return self._prepare(cmd, topic, queue_id, bodies, props, looked, dict(
                    born_timestamp=_int_field(ext, "bornTimestamp", int(time.time() * 1000)),
                    born_host=channel.remote_address))
        try:
            result = self.store.put_batch(topic, bodies, properties=props, queue_id=queue_id,
                                          born_timestamp=_int_field(ext, "bornTimestamp", int(time.time() * 1000)),
                                          born_host=channel.remote_address)
        except ValueError as e:
            raise BadRequest(str(e), ResponseCode.MESSAGE_ILLEGAL) from None
        self._arrived(topic, queue_id)
        ids = codec.message_ids_text(result.store_host[0], result.store_host[1], result.commit_log_offsets)
        return cmd.response(ResponseCode.SUCCESS, ext_fields={
            "msgId": ids, "queueId": queue_id, "queueOffset": int(result.queue_offsets[0]),
            "MSG_REGION": "DefaultRegion", "TRACE_ON": "false"})

    def _prepare(self, cmd: RemotingCommand, topic: str, queue_id: int, bodies, props: pa.StringArray,
                 looked: PropertiesText, put_args: dict):
        """Half messages (TRAN_MSG=true; props: their properties texts): kept in the half topic until
        END_TRANSACTION; the response names the halves (queueOffset: the first's offset in the half queue, msgId:
        theirs) as RocketMQ's does."""
        looked.prefetch([PROPERTY_PRODUCER_GROUP, PROPERTY_TRANSACTION_BATCH, codec.PROPERTY_UNIQ_KEY])  # one pass
        groups = looked.column(PROPERTY_PRODUCER_GROUP)
        if groups.null_count:
            raise BadRequest(f"a transactional message has no {PROPERTY_PRODUCER_GROUP} property (its producer "
                             "group, asked when its outcome never comes)", ResponseCode.MESSAGE_ILLEGAL)
        queues = len(self.store.queues(topic))
        if queue_id < 0:
            queue_id = self.store.take_round_robin(topic, queues, 1)
        if not 0 <= queue_id < queues:
            raise BadRequest(f"queueId {queue_id}: topic {topic} has queues 0..{queues - 1}")
        try:
            result = self.transactions.prepare(topic, queue_id, bodies, props, **put_args)
        except ValueError as e:
            raise BadRequest(str(e), ResponseCode.MESSAGE_ILLEGAL) from None
        ids = codec.message_ids_text(result.store_host[0], result.store_host[1], result.commit_log_offsets)
        # the batch's id when its halves share one (decided together), else the message's UNIQ_KEY as RocketMQ's
        uniq = looked.column(PROPERTY_TRANSACTION_BATCH)[0].as_py() or looked.column(codec.PROPERTY_UNIQ_KEY)[0].as_py()
        return cmd.response(ResponseCode.SUCCESS, ext_fields={
            "msgId": ids, "queueId": queue_id, "queueOffset": int(result.queue_offsets[0]),
            "transactionId": uniq or ids.split(",")[0], "MSG_REGION": "DefaultRegion", "TRACE_ON": "false"})

    async def _earliest_store_time(self, cmd: RemotingCommand, channel) -> RemotingCommand:
        topic, queue_id = cmd.ext_fields.get("topic") or "", _int_field(cmd.ext_fields, "queueId")
        self._check_queue(topic, queue_id)
        got = self.store.get_message("x", topic, queue_id, self.store.min_offset(topic, queue_id), 1)
        stamp = got.messages[0].store_timestamp if got.messages else -1
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"timestamp": stamp})

    # -- AdminBrokerProcessor: the stats mqadmin and consoles read -----------------------------------------------

    def _store_time_at(self, topic: str, queue_id: int, offset: int) -> int:
        """The store timestamp of the message at a queue offset, 0 when it is gone (getMessageStoreTimeStamp)."""
        got = self.store.get_message("stats", topic, queue_id, offset, 1)
        return got.messages[0].store_timestamp if got.messages else 0

    async def _topic_stats(self, cmd: RemotingCommand, channel) -> RemotingCommand:
        """GET_TOPIC_STATS_INFO: each queue's min and max offset and the store time of its last message."""
        topic = cmd.ext_fields.get("topic") or ""
        if not self.store.has_topic(topic):
            raise BadRequest(f"topic[{topic}] not exist", ResponseCode.TOPIC_NOT_EXIST)
        table = TopicStatsTable()
        for q in self.store.queues(topic):
            max_offset = self.store.max_offset(topic, q)
            table.offsetTable[MessageQueue(topic, self.broker_name, q)] = TopicOffset(
                self.store.min_offset(topic, q), max_offset,
                self._store_time_at(topic, q, max_offset - 1) if max_offset > 0 else 0)
        return cmd.response(ResponseCode.SUCCESS, body=table.encode())

    async def _consume_stats(self, cmd: RemotingCommand, channel) -> RemotingCommand:
        """GET_CONSUME_STATS: per queue of the group's topics (the one asked, else every topic it has offsets
        of), the broker's max offset, the group's committed offset, and the store time of the last message it
        consumed; topics the group's online members do not subscribe to are left out, as RocketMQ does."""
        group, topic = cmd.ext_fields.get("consumerGroup") or "", cmd.ext_fields.get("topic") or ""
        try:
            check_group(group)
        except ValueError as e:
            raise BadRequest(str(e)) from None
        offsets = self._offset_store(group)
        offsets.load()
        members = self.groups.get(group, {})
        subscribed = {t for c in members.values() for t in c.subscriptions}
        stats = ConsumeStats()
        for t in ([topic] if topic else offsets.topics()):
            if not self.store.has_topic(t) or (members and t not in subscribed):
                continue
            for q in self.store.queues(t):
                consumer = max(0, offsets.read_offset((t, q)))
                stats.offsetTable[MessageQueue(t, self.broker_name, q)] = OffsetWrapper(
                    max(0, self.store.max_offset(t, q)), consumer, consumer,
                    self._store_time_at(t, q, consumer - 1) if consumer > 0 else 0)
        return cmd.response(ResponseCode.SUCCESS, body=stats.encode())

    async def _view_message(self, cmd: RemotingCommand, channel) -> RemotingCommand:
        """VIEW_MESSAGE_BY_ID: the record at the commitlog offset the header names (the offset part of a msgId)."""
        offset = _int_field(cmd.ext_fields, "offset")
        view, base = self.store.commit_log.view_at(offset)
        if view is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"no message at offset {offset}")
        try:
            msg = codec.decode_record(view, offset - base, limit=len(view))
        except codec.RecordFormatError as e:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"no message at offset {offset}: {e}")
        self._check_message_access(cmd, channel, msg.topic)
        return cmd.response(ResponseCode.SUCCESS, body=bytes(view[offset - base:offset - base + msg.store_size]))

    def _lock_body(self, cmd: RemotingCommand) -> tuple[str, str, list]:
        try:
            data = json.loads(cmd.body)
            group, client, mqs = str(data["consumerGroup"]), str(data["clientId"]), list(data.get("mqSet") or [])
            queues = [(str(m["topic"]), int(m["queueId"]), m) for m in mqs]
        except (ValueError, KeyError, TypeError) as e:
            raise BadRequest(f"the lock request body: {e}") from None
        return group, client, queues

    async def _lock_batch(self, cmd: RemotingCommand, channel) -> RemotingCommand:
        """LOCK_BATCH_MQ (RebalanceLockManager): an orderly consumer locks its queues; a queue locked by another
        live client stays with it until that lock expires."""
        group, client, queues = self._lock_body(cmd)
        locks = self._locks.setdefault(group, {})
        now = time.monotonic()
        locked = []
        for topic, qid, mq in queues:
            holder = locks.get((topic, qid))
            if holder is None or holder[0] == client or now - holder[1] > self.lock_expiry_s:
                locks[(topic, qid)] = (client, now)
                locked.append(mq)
        return cmd.response(ResponseCode.SUCCESS, body=json.dumps({"lockOKMQSet": locked}).encode())

    async def _unlock_batch(self, cmd: RemotingCommand, channel) -> RemotingCommand:
        group, client, queues = self._lock_body(cmd)
        locks = self._locks.get(group, {})
        for topic, qid, _ in queues:
            if locks.get((topic, qid), ("",))[0] == client:
                del locks[(topic, qid)]
        return cmd.response(ResponseCode.SUCCESS)

    def _arrived(self, topic: str, queue_id: int) -> None:
        self.hold.notify_message_arriving(topic, queue_id)

    def _ensure_topic(self, topic: str, queues: int = 1) -> bool:
        """Create a system topic (a group's retry or dead-letter topic) when missing; True if created."""
        if self.store.has_topic(topic):
            return False
        self.store.create_topic(topic, queues)
        return True

    async def _send_back(self, cmd: RemotingCommand, channel) -> RemotingCommand:
        """CONSUMER_SEND_MSG_BACK: a message the consumer failed goes to %RETRY%<group> after the next delay
        level, or to %DLQ%<group> once it was reconsumed maxReconsumeTimes times (SendMessageProcessor)."""
        ext = cmd.ext_fields
        group = ext.get("group") or ""
        group_config = self._group_config(group)
        offset = _int_field(ext, "offset")
        view, base = self.store.commit_log.view_at(offset)
        if view is None:
            raise BadRequest(f"look message by offset failed, {offset}")
        try:
            msg = codec.decode_record(view, offset - base, limit=len(view))
        except codec.RecordFormatError as e:
            raise BadRequest(f"the message at offset {offset}: {e}") from None
        self._check_message_access(cmd, channel, msg.topic)
        props = dict(msg.properties)
        props.setdefault(PROPERTY_RETRY_TOPIC, msg.topic)
        props[PROPERTY_ORIGIN_MESSAGE_ID] = ext.get("originMsgId") or props.get(codec.PROPERTY_UNIQ_KEY, "")
        delay_level = _int_field(ext, "delayLevel", 0)
        group_max = int(group_config.get("retryMaxTimes", self.max_reconsume_times))
        max_times = _int_field(ext, "maxReconsumeTimes", group_max)
        if max_times < 0:
            max_times = group_max
        put_args = dict(flag=msg.flag, born_timestamp=msg.born_timestamp, reconsume_times=msg.reconsume_times + 1)
        created = False
        if msg.reconsume_times >= max_times or delay_level < 0:
            target = dlq = DLQ_GROUP_TOPIC_PREFIX + group
            created = self._ensure_topic(dlq)
            self.store.put(dlq, msg.body, properties=props, queue_id=0, **put_args)
            log.info("message %s of group %s went to %s after %d reconsumes", props[PROPERTY_ORIGIN_MESSAGE_ID],
                     group, dlq, msg.reconsume_times)
        else:
            target = retry = RETRY_GROUP_TOPIC_PREFIX + group
            created = self._ensure_topic(retry)
            level = delay_level if delay_level > 0 else 3 + msg.reconsume_times
            self.schedule.schedule(retry, 0, msg.body, props, level, **put_args)
        if created and self._namesrv_client is not None:
            await self.register(target)
        return cmd.response(ResponseCode.SUCCESS)

    # -- PullMessageProcessor ------------------------------------------------------------------------------------

    async def _message_filter(self, ext: dict, group: str, topic: str,
                              sys_flag: int) -> tuple[Optional[MessageFilter], bool]:
        """The subscription's filter, and whether it is SQL92 (decided on the record's properties; a TAG
        filter is decided on the consume queue's tag codes alone, as RocketMQ's broker does: clients re-check
        the tag of what they receive); built once per subscription version, off the event loop."""
        kind, expression, version = self._subscription(ext, group, topic, sys_flag)
        if kind != "TAG" and not self.broker_config.enablePropertyFilter:
            raise BadRequest(f"The broker does not support consumer to filter message by {kind} "
                             "(enablePropertyFilter is false)", ResponseCode.SYSTEM_ERROR)
        if kind not in ("TAG", "SQL92"):
            raise BadRequest(f"expressionType {kind} is not supported", ResponseCode.SUBSCRIPTION_PARSE_FAILED)
        return await self.selectors.get(group, topic, kind, expression, version)

    def _subscription(self, ext: dict, group: str, topic: str, sys_flag: int) -> tuple[str, str, int]:
        """(expression type, expression, version) of the pull's subscription, or of the last heartbeat's."""
        if sys_flag & FLAG_SUBSCRIPTION:
            expression, kind = ext.get("subscription") or "*", (ext.get("expressionType") or "TAG").upper()
            return kind, expression, _int_field(ext, "subVersion", 0)
        else:
            client_sub = next((c.subscriptions.get(topic) for c in self.groups.get(group, {}).values()
                               if topic in c.subscriptions), None)
            if client_sub is None:
                raise BadRequest(f"the consumer's subscription of {topic} in group {group} does not exist",
                                 ResponseCode.SUBSCRIPTION_NOT_EXIST)
            try:
                latest = int(client_sub.get("subVersion") or 0)
            except (TypeError, ValueError):
                latest = 0
            if latest < _int_field(ext, "subVersion", 0):
                raise BadRequest(f"the consumer's subscription of {topic} in group {group} is not the latest (the "
                                 "pull names a newer one than the last heartbeat)",
                                 ResponseCode.SUBSCRIPTION_NOT_LATEST)
            return str(client_sub.get("expressionType") or "TAG").upper(), str(client_sub.get("subString") or "*"), \
                latest

    async def _pull(self, cmd: RemotingCommand, channel) -> RemotingCommand:
        ext = cmd.ext_fields
        group, topic = ext.get("consumerGroup") or "", ext.get("topic") or ""
        queue_id, offset = _int_field(ext, "queueId"), _int_field(ext, "queueOffset")
        max_msgs = max(1, min(_int_field(ext, "maxMsgNums", 32), 65536))  # maxTransfer* bound it further
        sys_flag = _int_field(ext, "sysFlag", 0)
        self._group_config(group)
        self._check_queue(topic, queue_id)
        self._check_permission(topic, PERM_READ, "pulling")
        message_filter, sql = await self._message_filter(ext, group, topic, sys_flag)
        if sys_flag & FLAG_COMMIT_OFFSET:
            commit = _int_field(ext, "commitOffset", -1)
            if commit >= 0:
                self._offset_store(group).update_offset((topic, queue_id), commit)
        suspend_ms = _int_field(ext, "suspendTimeoutMillis", 0) if sys_flag & FLAG_SUSPEND else 0
        if suspend_ms and not self.broker_config.longPollingEnable:
            suspend_ms = self.broker_config.shortPollingTimeMills
        deadline = time.monotonic() + suspend_ms / 1000
        scanned = False
        while True:
            result, body = self._get_message(group, topic, queue_id, offset, max_msgs, message_filter, sql)
            status = result.status
            if status == GetMessageStatus.NO_MATCHED_MESSAGE and suspend_ms:
                # nothing new matched the filter: hold on from past what was scanned (the client re-checks the
                # tags of what it gets; the broker keeps it from pulling every non-matching message)
                scanned, offset = True, result.next_begin_offset
                if offset < result.max_offset:
                    continue
                status = GetMessageStatus.OFFSET_OVERFLOW_ONE
            waiting = status in (GetMessageStatus.NO_MESSAGE_IN_QUEUE, GetMessageStatus.OFFSET_OVERFLOW_ONE)
            remaining = deadline - time.monotonic()
            if not waiting or remaining <= 0 or channel.closed.is_set() or self._stopping:
                break
            with channel.holding():  # not counted among the connection's busy requests while it waits
                await self.hold.suspend(topic, queue_id, offset, remaining)
        if scanned and result.status != GetMessageStatus.FOUND:
            result.status, result.next_begin_offset = GetMessageStatus.NO_MATCHED_MESSAGE, offset
        code = _PULL_STATUS[result.status]
        if result.status != GetMessageStatus.FOUND:
            body = b""
        return cmd.response(code, remark=str(result.status), body=body, ext_fields={
            "nextBeginOffset": result.next_begin_offset, "minOffset": result.min_offset,
            "maxOffset": result.max_offset, "suggestWhichBrokerId": 0})

    def _queue_min_offset(self, cq, fresh: bool = False) -> int:
        """A queue's min offset, re-read at most once a second: it moves only when retention deletes files (in
        memory in RocketMQ's broker); listing the files on every pull would cost more than the pull."""
        key = (cq.topic, cq.queue_id)
        now = time.monotonic()
        cached = self._min_offsets.get(key)
        if fresh or cached is None or now - cached[1] > 1.0:
            cached = self._min_offsets[key] = (cq.min_offset(self.store.commit_log.min_offset()), now)
        return cached[0]

    def _get_message(self, group: str, topic: str, queue_id: int, offset: int, max_msgs: int,
                     message_filter: Optional[MessageFilter], sql: bool) -> tuple[GetMessageResult, bytes]:
        """The store's getMessage, and the found records' bytes as they lie in the commitlog."""
        return self._pull_records(topic, queue_id, offset, max_msgs, message_filter, sql)

    def _sql_matches(self, topic: str, queue_id: int, offset: int, candidates: np.ndarray, examined: int,
                     want: int, message_filter: MessageFilter) -> tuple[np.ndarray, int]:
        """(unit indexes among candidates whose records' properties match the SQL92 filter, at most `want`; how
        many units were decided): the store's vectorised scan, a chunk of units at a time, stops once enough
        matched, so a selective filter reads few records per match and an unselective one few records in all.
        Units past the last candidate were refused by their tag codes: decided too, out of `examined`, so the
        next pull starts past them (getMessage moves past every unit it examined, matched or not)."""
        matched: list[np.ndarray] = []
        found = 0
        end = offset + (int(candidates[-1]) + 1 if len(candidates) else 0)
        pos, chunk = offset, max(256, want * 2)
        while pos < end and found < want:  # chunks grow while matches are rare: few scans per pull either way
            for batch in self.store.scan(topic, queue_id, pos, min(end, pos + chunk), message_filter=message_filter,
                                         batch_rows=chunk, columns=("queue_offset",), release_pages=False):
                matched.append(batch.column("queue_offset").to_numpy() - offset)
                found += batch.num_rows
            pos, chunk = pos + chunk, chunk * 4
        taken = np.concatenate(matched)[:want] if matched else np.zeros(0, dtype=np.int64)
        return taken, (int(taken[-1]) + 1 if found >= want and len(taken) else examined)

    def _pull_records(self, topic: str, queue_id: int, offset: int, max_msgs: int,
                      message_filter: Optional[MessageFilter], sql: bool = False) -> tuple[GetMessageResult, bytes]:
        """getMessage as buffers: the consume queue's units filtered by tag code (one vectorised mask), a SQL92
        filter decided on the records' properties by the store's vectorised scan, the records' bytes sliced out
        of the commitlog as they lie, each checked for its TOTALSIZE and MAGICCODE so that nothing torn is
        sent."""
        cq = self.store.find_consume_queue(topic, queue_id)
        min_offset = self._queue_min_offset(cq)
        max_offset = cq.max_offset()
        if offset < min_offset:  # confirm with the files as they are now
            min_offset = self._queue_min_offset(cq, fresh=True)
        result = GetMessageResult(GetMessageStatus.NO_MESSAGE_IN_QUEUE, offset, min_offset, max_offset)
        if max_offset == 0:
            result.next_begin_offset = 0
            return result, b""
        if offset < min_offset:
            result.status, result.next_begin_offset = GetMessageStatus.OFFSET_TOO_SMALL, min_offset
            return result, b""
        if offset >= max_offset:
            result.status = GetMessageStatus.OFFSET_OVERFLOW_ONE if offset == max_offset else \
                GetMessageStatus.OFFSET_OVERFLOW_BADLY
            result.next_begin_offset = offset if offset == max_offset else (min_offset if min_offset == 0
                                                                            else max_offset)
            return result, b""
        # without a filter the first max_msgs units are the answer; a filter looks further (as getMessage's
        # maxFilterMessageCount lets it)
        ahead = max_msgs if message_filter is None else max(800, max_msgs * 25)
        window = min(max_offset, cq.file_end(offset), offset + ahead)
        units = cq.units(offset, window)
        sizes = units["size"].astype(np.int64)
        end = int(np.argmax(sizes == 0)) if (sizes == 0).any() else len(units)
        units, sizes = units[:end], sizes[:end]
        keep = np.ones(len(units), dtype=bool) if message_filter is None else \
            np.asarray(message_filter.consume_queue_mask(units["tags_code"].astype(np.int64)), dtype=bool)
        # maxTransferCountOnMessageInMemory / maxTransferBytesOnMessageInMemory bound a pull, as in getMessage
        max_msgs = min(max_msgs, self.store.config.maxTransferCountOnMessageInMemory)
        decided = len(units)
        if sql and message_filter is not None:
            taken, decided = self._sql_matches(topic, queue_id, offset, np.flatnonzero(keep), len(units),
                                               max_msgs, message_filter)
            units, sizes = units[:decided], sizes[:decided]
        else:
            taken = np.flatnonzero(keep)[:max_msgs]
        if len(taken) > 1:
            fits = int(np.searchsorted(np.cumsum(sizes[taken]), self.store.config.maxTransferBytesOnMessageInMemory,
                                       side="right"))
            if fits < len(taken):  # cut by bytes: the next pull starts right after the last message sent
                taken = taken[:max(1, fits)]
                max_msgs = len(taken)
        if not len(taken):
            result.status = GetMessageStatus.NO_MATCHED_MESSAGE
            result.next_begin_offset = offset + decided
            return result, b""
        try:
            body = self.store.commit_log.read_records(units["offset"].astype(np.int64)[taken], sizes[taken])
        except CorruptRecordError as e:
            raise StoreError(f"{topic}/{queue_id}@{offset}: {e}") from None
        if body is None:  # removed by retention since the consume queue was read
            result.status, result.next_begin_offset = GetMessageStatus.OFFSET_TOO_SMALL, \
                self._queue_min_offset(cq, fresh=True)
            return result, b""
        result.status = GetMessageStatus.FOUND
        # past the units scanned, as RocketMQ's getMessage: a full batch ends at its last message
        result.next_begin_offset = offset + (int(taken[-1]) + 1 if len(taken) == max_msgs else len(units))
        return result, body.tobytes() if len(body) < LARGE_BODY else body.data  # type: ignore[return-value]

    # -- ConsumerManageProcessor, offsets ------------------------------------------------------------------------

    async def _query_offset(self, cmd: RemotingCommand, channel) -> RemotingCommand:
        ext = cmd.ext_fields
        group, topic, queue_id = ext.get("consumerGroup") or "", ext.get("topic") or "", _int_field(ext, "queueId")
        self._check_queue(topic, queue_id)
        offset = self._offset_store(group).read_offset((topic, queue_id), ReadOffsetType.MEMORY_FIRST_THEN_STORE)
        if offset >= 0:
            return cmd.response(ResponseCode.SUCCESS, ext_fields={"offset": offset})
        # no offset yet: 0 while the queue still starts at 0 and its first message is in memory, so a new
        # consumer of a young topic gets everything (ConsumerManageProcessor.queryConsumerOffset)
        if self.store.min_offset(topic, queue_id) == 0 and not self._first_message_in_disk(topic, queue_id):
            return cmd.response(ResponseCode.SUCCESS, ext_fields={"offset": 0})
        return cmd.response(ResponseCode.QUERY_NOT_FOUND, "Not found, V3_0_6_SNAPSHOT maybe this group consumer "
                                                          "boot first")

    def _first_message_in_disk(self, topic: str, queue_id: int) -> bool:
        units = self.store.find_consume_queue(topic, queue_id).units(0, 1)
        if not len(units) or units["size"][0] <= 0:
            return False
        return self.store.is_in_disk(int(units["offset"][0]), self.store.commit_log_max_offset())

    async def _update_offset(self, cmd: RemotingCommand, channel) -> RemotingCommand:
        ext = cmd.ext_fields
        group, topic, queue_id = ext.get("consumerGroup") or "", ext.get("topic") or "", _int_field(ext, "queueId")
        self._check_queue(topic, queue_id)
        commit = _int_field(ext, "commitOffset")
        if commit < 0:
            raise BadRequest(f"commitOffset {commit} is negative: a queue offset is 0 or more")
        offsets = self._offset_store(group)
        offsets.update_offset((topic, queue_id), commit)
        offsets.persist_all()
        return cmd.response(ResponseCode.SUCCESS)

    async def _max_offset(self, cmd: RemotingCommand, channel) -> RemotingCommand:
        topic, queue_id = cmd.ext_fields.get("topic") or "", _int_field(cmd.ext_fields, "queueId")
        self._check_queue(topic, queue_id)
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"offset": self.store.max_offset(topic, queue_id)})

    async def _min_offset(self, cmd: RemotingCommand, channel) -> RemotingCommand:
        topic, queue_id = cmd.ext_fields.get("topic") or "", _int_field(cmd.ext_fields, "queueId")
        self._check_queue(topic, queue_id)
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"offset": self.store.min_offset(topic, queue_id)})

    async def _search_offset(self, cmd: RemotingCommand, channel) -> RemotingCommand:
        ext = cmd.ext_fields
        topic, queue_id = ext.get("topic") or "", _int_field(ext, "queueId")
        self._check_queue(topic, queue_id)
        offset = self.store.offset_for_timestamp(topic, queue_id, _int_field(ext, "timestamp"))
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"offset": offset})

    # -- ClientManageProcessor -----------------------------------------------------------------------------------

    async def _heartbeat(self, cmd: RemotingCommand, channel) -> RemotingCommand:
        try:
            data = json.loads(cmd.body) if cmd.body else {}
        except ValueError as e:
            raise BadRequest(f"the heartbeat body is not JSON: {e}") from None
        client_id = str(data.get("clientID") or channel.remote_address)
        for producer in data.get("producerDataSet") or []:
            group = str(producer.get("groupName") or "") if isinstance(producer, dict) else ""
            if group:
                self.producers.heartbeat(group, client_id, channel)
        for consumer in data.get("consumerDataSet") or []:
            group = str(consumer.get("groupName") or "")
            subs = {s.get("topic"): s for s in consumer.get("subscriptionDataSet") or [] if isinstance(s, dict)}
            try:
                check_group(group)
            except ValueError as e:
                raise BadRequest(f"consumerDataSet: {e}") from None
            # the retry topic exists for groups this broker serves (findSubscriptionGroupConfig)
            if self.subscription_groups.find(group) is not None and \
                    self._ensure_topic(RETRY_GROUP_TOPIC_PREFIX + group) and self._namesrv_client is not None:
                await self.register(RETRY_GROUP_TOPIC_PREFIX + group)
            clients = self.groups.setdefault(group, {})
            joined = client_id not in clients
            clients[client_id] = _Client(channel, time.monotonic(), subs)
            if joined:
                await self._notify_ids_changed(group)
        return cmd.response(ResponseCode.SUCCESS)

    async def _notify_ids_changed(self, group: str) -> None:
        """NOTIFY_CONSUMER_IDS_CHANGED (oneway) to every member: they rebalance their queues now rather than at
        their next periodic rebalance (RocketMQ's Broker2Client)."""
        for client in list(self.groups.get(group, {}).values()):
            note = RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": group},
                                           oneway=True)
            client.channel.send_oneway_best_effort(note)  # never waits for a member that does not read

    async def _expire_clients(self) -> None:
        """A client that has not sent a heartbeat for CLIENT_EXPIRY_S leaves its groups (ClientHousekeeping)."""
        while True:
            await asyncio.sleep(min(10.0, self.client_expiry_s / 4))
            self.producers.expire()
            now = time.monotonic()
            for group, clients in list(self.groups.items()):
                gone = [cid for cid, c in clients.items() if now - c.last_heartbeat > self.client_expiry_s]
                for cid in gone:
                    del clients[cid]
                    log.info("consumer %s of group %s sent no heartbeat for %.0f s: removed", cid, group,
                             self.client_expiry_s)
                if not clients:
                    del self.groups[group]
                elif gone:
                    await self._notify_ids_changed(group)

    async def _unregister_client(self, cmd: RemotingCommand, channel) -> RemotingCommand:
        ext = cmd.ext_fields
        group, client_id = ext.get("consumerGroup") or "", ext.get("clientID") or ""
        if ext.get("producerGroup"):
            self.producers.unregister(ext["producerGroup"], client_id)
        clients = self.groups.get(group)
        if clients is not None and clients.pop(client_id, None) is not None:
            if clients:
                await self._notify_ids_changed(group)
            else:
                del self.groups[group]
        return cmd.response(ResponseCode.SUCCESS)

    async def _consumer_list(self, cmd: RemotingCommand, channel) -> RemotingCommand:
        group = cmd.ext_fields.get("consumerGroup") or ""
        ids = sorted(self.groups.get(group, {}))
        if not ids:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"no consumer in group {group}")
        return cmd.response(ResponseCode.SUCCESS, body=json.dumps({"consumerIdList": ids}).encode())


def _decode_message_batch(body: bytes) -> tuple[pa.Array, Optional[pa.StringArray]]:
    """MessageBatch's body: per message TOTALSIZE i32, MAGICCODE i32, BODYCRC i32, FLAG i32, BODY (i32 length),
    PROPERTIES (i16 length); BadRequest naming the message that does not decode. The bodies as a binary column
    and the properties texts as a string column (None when no message has any), ready for put_batch, which
    stores them as they came."""
    try:
        body_starts, body_lengths, props_starts, props_lengths = native.message_batch_spans(body)
    except ValueError as e:
        raise BadRequest(str(e), ResponseCode.MESSAGE_ILLEGAL) from None
    bodies = native.gather_spans(body, body_starts, body_starts + body_lengths)
    if not props_lengths.any():
        return bodies, None
    texts = native.gather_spans(body, props_starts, props_starts + props_lengths, pa.string())
    try:
        texts.validate(full=True)  # UTF-8
    except pa.ArrowInvalid as e:
        raise BadRequest(f"a batch message's properties are not UTF-8: {e}", ResponseCode.MESSAGE_ILLEGAL) from None
    return bodies, texts
