"""The broker's side of the store's topics (RocketMQ's broker TopicConfigManager and the topic checks of its
processors): a request's topic and queue checked (they exist, the topic's perm allows it), the topics a request
may create (an unknown topic on send with autoCreateTopicEnable, a group's retry and dead-letter topics,
UPDATE_AND_CREATE_TOPIC), each new topic registered with the name server at once."""
from __future__ import annotations

from typing import Awaitable, Callable, Optional

from remoting import ResponseCode
from rmq_common import message_codec as codec
from store import MessageStore

from .bad_request import BadRequest
from .broker_config import BrokerConfig
from .topic_validator import refuse_not_allowed_send_topic

DEFAULT_TOPIC = "TBW102"
PERM_INHERIT = 0x1  # PermName
PERM_WRITE = 0x2
PERM_READ = 0x4
MAX_QUEUES = 1024


class TopicService:
    def __init__(self, store: MessageStore, config: BrokerConfig, on_created: Callable[[str], Awaitable[None]]):
        self.store, self.config, self.on_created = store, config, on_created

    def create_default_topic(self) -> None:
        """autoCreateTopicEnable: RocketMQ's TBW102, whose route a producer borrows for a topic that does not
        exist yet (perm 7: inherit, read, write); the first send then creates the topic here."""
        if not self.config.autoCreateTopicEnable or self.store.has_topic(DEFAULT_TOPIC):
            return
        cfg = self.store.create_topic(DEFAULT_TOPIC, self.config.defaultTopicQueueNums)
        cfg.perm = PERM_INHERIT | PERM_READ | PERM_WRITE
        self.store.topic_config.persist()

    def check_queue(self, topic: str, queue_id: int) -> None:
        if not self.store.has_topic(topic):
            raise BadRequest(f"topic {topic} does not exist on broker {self.config.brokerName}",
                             ResponseCode.TOPIC_NOT_EXIST)
        if queue_id not in self.store.queues(topic):
            raise BadRequest(f"queueId {queue_id} is illegal for topic {topic}", ResponseCode.SYSTEM_ERROR)

    def check_permission(self, topic: str, perm: int, action: str) -> None:
        """The topic's perm (PermName: 4 readable, 2 writeable) allows the pull or send (NO_PERMISSION if not)."""
        cfg = self.store.topic_config.table.get(topic)
        if cfg is not None and not cfg.perm & perm:
            raise BadRequest(f"the topic[{topic}] {action} message is forbidden (perm {cfg.perm})",
                             ResponseCode.NO_PERMISSION)

    def ready_for_send(self, topic: str) -> bool:
        """Whether a send may go to the topic now (False: it does not exist yet, topic_for_send decides); a topic a
        send may never go to is refused (BadRequest)."""
        try:
            codec.check_topic(topic)
        except ValueError as e:
            raise BadRequest(str(e), ResponseCode.MESSAGE_ILLEGAL) from None
        refuse_not_allowed_send_topic(topic)
        if self.store.has_topic(topic):
            self.check_permission(topic, PERM_WRITE, "sending")
            return True
        return False

    async def topic_for_send(self, topic: str, default_queues: Optional[int]) -> None:
        """An unknown topic is created when autoCreateTopicEnable (default_queues: the send's
        defaultTopicQueueNums), else the send is refused with TOPIC_NOT_EXIST (SendMessageProcessor /
        TopicConfigManager.createTopicInSendMessageMethod)."""
        if self.ready_for_send(topic):
            return
        if not self.config.autoCreateTopicEnable:
            raise BadRequest(f"topic[{topic}] not exist, apply first please! (autoCreateTopicEnable is false on "
                             f"broker {self.config.brokerName})", ResponseCode.TOPIC_NOT_EXIST)
        # at most TBW102's queues, as createTopicInSendMessageMethod caps the producer's defaultTopicQueueNums
        most = len(self.store.queues(DEFAULT_TOPIC)) if self.store.has_topic(DEFAULT_TOPIC) else \
            self.config.defaultTopicQueueNums
        queues = min(self.config.defaultTopicQueueNums if default_queues is None else default_queues, most)
        self.store.create_topic(topic, max(1, queues))
        await self.on_created(topic)

    async def create_system_topic(self, topic: str, queues: int = 1) -> bool:
        """A group's retry or dead-letter topic, created when missing; True if created now."""
        if self.store.has_topic(topic):
            return False
        self.store.create_topic(topic, queues)
        await self.on_created(topic)
        return True

    async def create_topic(self, topic: str, reads: int, writes: int, perm: Optional[int]) -> None:
        """UPDATE_AND_CREATE_TOPIC: the topic with `writes` queues and `perm` (PermName's bits; None: read and
        write for a new topic, unchanged for an existing one). An existing topic keeps its queues: asking for other
        numbers is refused (the store does not resize a topic)."""
        try:
            codec.check_topic(topic)
        except ValueError as e:
            raise BadRequest(str(e)) from None
        if topic == self.config.brokerClusterName:
            raise BadRequest(f"the topic[{topic}] is conflict with system reserved words")
        if not 0 < writes <= MAX_QUEUES or reads != writes:
            raise BadRequest(f"readQueueNums {reads} and writeQueueNums {writes}: give the same number, "
                             f"1..{MAX_QUEUES}")
        existing = self.store.topic_config.table.get(topic)
        if perm is None:
            perm = PERM_READ | PERM_WRITE if existing is None else existing.perm
        if not 0 <= perm <= (PERM_READ | PERM_WRITE | PERM_INHERIT):
            raise BadRequest(f"perm {perm}: give PermName's bits, 0..7 (4 readable, 2 writeable, 1 inherit)")
        if self.store.has_topic(topic):
            have = len(self.store.queues(topic))
            if have != writes:
                raise BadRequest(f"topic[{topic}] exists with {have} queues on broker {self.config.brokerName}; "
                                 "this broker does not change a topic's queue numbers")
        else:
            self.store.create_topic(topic, writes)
        cfg = self.store.topic_config.table[topic]
        if cfg.perm != perm:  # the topic's perm as the request gives it (TopicConfig.perm), read by every pull
            cfg.perm = perm
            self.store.topic_config.persist()
        await self.on_created(topic)
