"""A RocketMQ broker over a MessageStore (RocketMQ's BrokerController): builds the managers and the processors,
registers each processor for its request codes (register_processor, optionally with its own executor), starts and
stops the background services, and registers with a name server.

`async with Broker(store_path, listen="127.0.0.1:0", namesrv=ns.address) as broker:`. Processors run on the
event loop and call the store directly (a pull of up to 32 messages takes well under a millisecond); the
END_TRANSACTION processor has its own threads. A new request code: docs/design.md, "Where things go"."""
from __future__ import annotations

import asyncio
import logging
import os
import time
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Optional

import pyarrow as pa

from remoting import RemotingCommand, RemotingServer, ResponseCode, request_frame
from remoting.local_address import advertised_host, join_address, split_address
from remoting.remoting_server import Channel, ResponseCallback
from rmq_acl.acl_exception import AclException
from rmq_acl.permission import SUB
from rmq_acl.plain_access_validator import PlainAccessValidator
from rmq_common import message_codec as codec
from store import MessageStore
from store.errors import DiskFullError
from store.store_config import SYNC_FLUSH, StoreConfig

from .bad_request import REFUSED, BadRequest, refusal
from .broker_config import BrokerConfig
from .broker_outer_api import BrokerOuterAPI
from .broker_stats import BrokerStats
from .consumer_manager import ConsumerManager
from .consumer_offset_manager import ConsumerOffsetManager
from .group_commit_service import GroupCommitService
from .long_polling import PullRequestHoldService
from .processor.admin_broker import AdminBrokerProcessor
from .processor.admin_group import AdminGroupProcessor
from .processor.client_manage import ClientManageProcessor
from .processor.consumer_manage import ConsumerManageProcessor
from .processor.end_transaction import EndTransactionProcessor
from .processor.pull_message import PullMessageProcessor
from .processor.query_message import QueryMessageProcessor
from .processor.request_processor import RequestProcessor
from .processor.send_message import SendMessageProcessor
from .producer_manager import ProducerManager
from .rebalance_lock_manager import RebalanceLockManager
from .schedule_message_service import ScheduleMessageService
from .selector_cache import SelectorCache
from .subscription_group_manager import SubscriptionGroupManager
from .topic_service import TopicService
from .transactional_message_check_service import TransactionalMessageCheckService
from .transactional_message_service import TransactionalMessageService

log = logging.getLogger(__name__)

# how long a send's index entries may wait to be written with those of the sends after it (a query of the index in
# this process writes them first; RocketMQ's reput thread builds them after the put returns, too)
INDEX_LAG_S = 0.005


class Broker:
    def __init__(self, store_path, listen: Optional[str] = None, namesrv: Optional[str] = None,
                 broker_name: Optional[str] = None, cluster: Optional[str] = None,
                 config: Optional[StoreConfig] = None, broker_config: Optional[BrokerConfig] = None,
                 register_interval_s: Optional[float] = None, client_expiry_s: float = 120.0,
                 message_delay_level: Optional[str] = None, max_reconsume_times: Optional[int] = None,
                 default_topic_queues: Optional[int] = None, advertise: Optional[str] = None):
        """advertise: the host registered with the name server and handed to clients (brokerIP1 of the store's
        config otherwise; listening on a wildcard without either, the host's first non-loopback address).
        broker_config holds broker.conf's broker keys (load_broker_conf reads a file into both configs); the
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
        host, port = split_address(listen)
        host = host or "127.0.0.1"
        try:
            self._advertised = advertised_host(host, advertise or config.brokerIP1)
        except ValueError as e:
            raise ValueError(f"brokerIP1 (--advertise) {e}") from None
        self.store_config = config
        self.store = MessageStore(store_path, config)
        self.server = RemotingServer(host, port, limits=bc.server_limits())
        self.namesrv, self.broker_name, self.cluster = bc.namesrvAddr or None, bc.brokerName, bc.brokerClusterName
        self.register_interval_s = register_interval_s or bc.registerNameServerPeriod / 1000
        self.client_expiry_s = client_expiry_s
        self.stopping = False
        self._registering: Optional[asyncio.Task] = None
        self._background: set[asyncio.Task] = set()
        self._index_timer: Optional[asyncio.TimerHandle] = None
        self.outer_api: Optional[BrokerOuterAPI] = None if not self.namesrv else BrokerOuterAPI(
            self.namesrv, self.store, self.broker_name, self.cluster, lambda: self.address,
            bc.brokerNotActiveTimeoutMillis)
        self._executors: list[Executor] = []
        self.processors: dict[int, RequestProcessor] = {}  # request code -> its processor
        # managers: the state the processors share
        self.hold = PullRequestHoldService(self.store)
        # SYNC_FLUSH: single sends share their fsyncs (None under ASYNC_FLUSH: SEND_OK when the page cache has it)
        self.group_commit = GroupCommitService(self.store) if config.flushDiskType == SYNC_FLUSH else None
        self.topics = TopicService(self.store, bc, self._topic_created)
        self.consumers = ConsumerManager(client_expiry_s)
        self.producers = ProducerManager(client_expiry_s)
        self.offsets = ConsumerOffsetManager(self.store)
        self.locks = RebalanceLockManager()
        self.stats = BrokerStats()
        self.started_ms = int(time.time() * 1000)
        self.subscription_groups = SubscriptionGroupManager(self.store.path, bc.autoCreateSubscriptionGroup,
                                                            bc.maxReconsumeTimes)
        self.selectors = SelectorCache()  # subscriptions' filters, built off the event loop
        self.schedule = ScheduleMessageService(self.store, bc.messageDelayLevel, on_deliver=self.arrived)
        self.transactions = TransactionalMessageService(self.store)
        # processors (BrokerController.registerProcessor)
        self.end_transaction = EndTransactionProcessor(self.transactions, self.arrived)
        for processor in (SendMessageProcessor(self), PullMessageProcessor(self), QueryMessageProcessor(self),
                          ClientManageProcessor(self), ConsumerManageProcessor(self), AdminBrokerProcessor(self),
                          AdminGroupProcessor(self)):
            self.register_processor(processor)
        if request_frame.COMPILED:  # sends and pulls read straight into their typed headers
            self.server.lane = request_frame.read_request
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        self.register_processor(self.end_transaction, ThreadPoolExecutor(cpus, thread_name_prefix="end-transaction"))
        self.transaction_check = TransactionalMessageCheckService(
            self.transactions, self.producers, bc.transactionTimeOut, bc.transactionCheckMax,
            bc.transactionCheckInterval, self.end_transaction.end)
        self.server.on_close.append(self._channel_closed)
        if self.acl is not None:
            self.server.before_request.append(self._access_check)

    def register_processor(self, processor: RequestProcessor, executor: Optional[Executor] = None) -> None:
        """Serve the processor's request codes; with an executor, its blocking work runs there (shut down with the
        broker)."""
        if executor is not None:
            processor.executor = executor
            self._executors.append(executor)
        for code in processor.codes:
            self.processors[code] = processor
            self.server.register(code, self._answering(processor))

    @property
    def address(self) -> str:
        """The address registered with the name server and handed to clients (RocketMQ's brokerIP1:listenPort)."""
        return join_address(self._advertised[0], self.server.port)

    @property
    def listen_address(self) -> str:
        return self.server.address

    async def start(self) -> "Broker":
        # pyarrow imports pandas (when installed) on its first array built from a list: seconds on a busy machine,
        # spent here rather than in the first send, which a client would time out and send again
        pa.array([b""], pa.binary())
        try:
            self.topics.create_default_topic()
            self.transactions.create_topics()  # registered with the others: admin tools read them through routes
        except DiskFullError as e:  # a full disk refuses writes, not reads: serve what is stored
            log.warning("%s: starting without them; writes are refused until there is room", e)
        await self.server.start()
        if not self.store.read_only:
            self.store.start_flush_service()  # the once-a-second fsync off the event loop, on the other core
        # STOREHOST of every record this broker stores: clients send a message back to the broker it names
        self.store.store_host = codec.parse_host((self._advertised[0], self.server.port))
        _, why, warning = self._advertised
        if why is not None:
            log.info("broker %s advertises %s (%s) while listening on %s", self.broker_name, self.address, why,
                     self.listen_address)
        if warning is not None:
            log.warning("%s: set brokerIP1 in broker.conf (or --advertise) to an address they can reach", warning)
        for service in (self._expire_clients(), self.hold.watch_other_writers(), self.transaction_check.run()):
            self._background.add(asyncio.ensure_future(service))
        self.schedule.start()
        if self.acl is not None:
            self._background.add(asyncio.ensure_future(self.acl.manager.watch()))
        if self.outer_api is not None:
            await self.outer_api.connect()
            await self.register()
            self._registering = asyncio.ensure_future(self._register_periodically())
        log.info("broker %s listening on %s", self.broker_name, self.listen_address)
        return self

    async def stop(self) -> None:
        for task in [self._registering, *self._background]:
            if task is not None:
                task.cancel()
        if self.outer_api is not None:
            await self.outer_api.unregister_and_close()
        self.stopping = True
        self.hold.release_all()  # held pulls are answered (PULL_NOT_FOUND) before the connections close
        await self.server.stop(grace_s=2.0)
        await self.schedule.stop()
        self.selectors.close()
        for executor in self._executors:  # the ends under way finish before the store closes
            executor.shutdown(wait=True)
        self.offsets.persist_all()
        if self._index_timer is not None:
            self._index_timer.cancel()
        self.store.close()  # writes the index entries still deferred

    async def __aenter__(self) -> "Broker":
        return await self.start()

    async def __aexit__(self, *exc) -> None:
        await self.stop()

    # -- name server -------------------------------------------------------------------------------------------

    async def register(self, only: Optional[str] = None) -> None:
        """REGISTER_BROKER now: every topic, or the one just created (BrokerOuterAPI.register)."""
        assert self.outer_api is not None
        await self.outer_api.register(only)

    async def _register_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.register_interval_s)
            try:
                await self.register()
            except (ConnectionError, TimeoutError) as e:
                log.warning("registration with %s failed: %s", self.namesrv, e)

    async def _topic_created(self, topic: str) -> None:
        if self.outer_api is not None and self.outer_api.connected:
            await self.register(topic)

    # -- plumbing ----------------------------------------------------------------------------------------------

    def index_later(self) -> None:
        """The index entries the last sends deferred are written INDEX_LAG_S from now, with those of the sends
        that come meanwhile (one index pass for many sends)."""
        if self._index_timer is None and self.store.has_index_pending():
            self._index_timer = asyncio.get_running_loop().call_later(INDEX_LAG_S, self._index_now)

    def _index_now(self) -> None:
        self._index_timer = None
        self.store.flush_index()

    def arrived(self, topic: str, queue_id: int, count: int = 1) -> None:
        """Messages were appended to the queue: its held pulls answer now."""
        self.stats.put(count)
        self.hold.notify_message_arriving(topic, queue_id)

    def _access_check(self, cmd: RemotingCommand, channel: Channel) -> Optional[RemotingCommand]:
        """aclEnable: every request checked before its processor (RocketMQ's ACL RPCHook); a refusal is
        NO_PERMISSION (RocketMQ 4.9 answers SYSTEM_ERROR with the same text)."""
        assert self.acl is not None
        why = self.acl.refusal(cmd, channel.remote_address)
        if why is None:
            return None
        log.info("refused request code %d from %s: %s", cmd.code, channel.remote_address, why)
        return cmd.response(ResponseCode.NO_PERMISSION, why)

    def check_message_access(self, cmd: RemotingCommand, channel: Channel, topic: str) -> None:
        """aclEnable: the account may read the topic of a message it names by offset (NO_PERMISSION if not)."""
        why = None if self.acl is None else self.acl.refusal_for(cmd, channel.remote_address, topic, SUB)
        if why is not None:
            log.info("refused request code %d from %s: %s", cmd.code, channel.remote_address, why)
            raise BadRequest(why, ResponseCode.NO_PERMISSION)

    def _answering(self, processor: RequestProcessor):
        """The processor's requests as the server takes them: answered at once where the handler answers at once,
        else awaited; a request's own fault (BadRequest, a header field) or the store's answered with its code."""
        def run(cmd: RemotingCommand, channel, header=None):
            try:
                answer = processor.process_request(cmd, channel, header)
            except REFUSED as e:
                return refusal(cmd, e)
            if answer is None or isinstance(answer, (RemotingCommand, asyncio.Future, ResponseCallback)):
                return answer  # a future's or a callback's answer is the processor's own
            return _answered_later(cmd, answer)
        return run

    def _channel_closed(self, channel) -> None:
        self.producers.channel_closed(channel)
        self.consumers.channel_closed(channel)

    async def _expire_clients(self) -> None:
        """A client that has not sent a heartbeat for client_expiry_s leaves its groups (ClientHousekeeping)."""
        while True:
            await asyncio.sleep(min(10.0, self.client_expiry_s / 4))
            self.producers.expire()
            await self.consumers.expire()


async def _answered_later(cmd: RemotingCommand, answer) -> Optional[RemotingCommand]:
    try:
        return await answer
    except REFUSED as e:
        return refusal(cmd, e)
