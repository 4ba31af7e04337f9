"""The broker's request and response headers (remoting.protocol.header) as RocketMQ 4.x clients send and read
them, RocketMQ's field names; SendMessageRequestHeaderV2 is SEND_MESSAGE_V2's abbreviated form (fields a..m)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional

from .codes import RequestCode
from .command_header import WIRE, CommandHeader, Int, Long, make_reader


# The send headers: RocketMQ requires (@CFNotNull) producerGroup, topic, defaultTopic, defaultTopicQueueNums,
# queueId, sysFlag, bornTimestamp and flag; this broker has always taken a send without them (queueId -1: any
# queue; sysFlag, flag 0; bornTimestamp: now; defaultTopicQueueNums: the broker's), so here they are optional and
# the send processor gives the defaults.
@dataclass
class SendMessageRequestHeader(CommandHeader):
    producer_group: Optional[str] = None
    topic: str = ""
    default_topic: Optional[str] = None
    default_topic_queue_nums: Optional[Int] = None
    queue_id: Optional[Int] = None
    sys_flag: Optional[Int] = None
    born_timestamp: Optional[Long] = None
    flag: Optional[Int] = None
    properties: Optional[str] = None
    reconsume_times: Optional[Int] = None
    unit_mode: Optional[bool] = None
    batch: Optional[bool] = None
    max_reconsume_times: Optional[Int] = None


@dataclass
class SendMessageRequestHeaderV2(CommandHeader):
    a: Optional[str] = None  # producerGroup
    b: str = ""  # topic
    c: Optional[str] = None  # defaultTopic
    d: Optional[Int] = None  # defaultTopicQueueNums
    e: Optional[Int] = None  # queueId
    f: Optional[Int] = None  # sysFlag
    g: Optional[Long] = None  # bornTimestamp
    h: Optional[Int] = None  # flag
    i: Optional[str] = None  # properties
    j: Optional[Int] = None  # reconsumeTimes
    k: Optional[bool] = None  # unitMode
    l: Optional[Int] = None  # maxReconsumeTimes  # noqa: E741 (RocketMQ's name)
    m: Optional[bool] = None  # batch

    def to_v1(self) -> SendMessageRequestHeader:
        return SendMessageRequestHeader(self.a, self.b, self.c, self.d, self.e, self.f, self.g, self.h, self.i,
                                        self.j, self.k, self.m, self.l)

    @classmethod
    def from_v1(cls, v1: SendMessageRequestHeader) -> "SendMessageRequestHeaderV2":
        return cls(v1.producer_group, v1.topic, v1.default_topic, v1.default_topic_queue_nums, v1.queue_id,
                   v1.sys_flag, v1.born_timestamp, v1.flag, v1.properties, v1.reconsume_times, v1.unit_mode,
                   v1.max_reconsume_times, v1.batch)


# SendMessageRequestHeaderV2's short names -> SendMessageRequestHeader's (for a client writing the V2 form)
V2_SEND_FIELDS = {"a": "producerGroup", "b": "topic", "c": "defaultTopic", "d": "defaultTopicQueueNums", "e": "queueId",
                  "f": "sysFlag", "g": "bornTimestamp", "h": "flag", "i": "properties", "j": "reconsumeTimes",
                  "k": "unitMode", "l": "maxReconsumeTimes", "m": "batch"}
_V2_SHORT_NAMES = {long: short for short, long in V2_SEND_FIELDS.items()}


def v2_send_fields(fields: dict) -> dict:
    """A send's header fields under the V2 short names, as RocketMQ's clients send SEND_BATCH_MESSAGE: a stock
    broker decodes that request's header as SendMessageRequestHeaderV2 only (long names leave its topic blank)."""
    return {_V2_SHORT_NAMES.get(k, k): v for k, v in fields.items()}


def read_send_header(code: int, ext: Mapping[str, str]) -> SendMessageRequestHeader:
    """A send's header under SendMessageRequestHeader's names, read one way for the broker and the ACL.
    SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE come with the short V2 names from RocketMQ's clients (the Java client
    sends every batch so); when the short topic `b` is there only the short names count, as RocketMQ decodes the V2
    header, so a long-named field beside them can never override what the ACL checked."""
    if code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE) and "b" in ext:
        return _read_v2(ext)
    return SendMessageRequestHeader.from_ext_fields(ext)


# SendMessageRequestHeaderV2's fields read straight into SendMessageRequestHeader (errors name V2's fields)
_read_v2 = make_reader(SendMessageRequestHeader, _V2_SHORT_NAMES, SendMessageRequestHeaderV2.__name__)


@dataclass
class SendMessageResponseHeader(CommandHeader):
    msg_id: str
    queue_id: Int
    queue_offset: Long
    transaction_id: Optional[str] = None
    batch_uniq_id: Optional[str] = None


@dataclass
class PullMessageRequestHeader(CommandHeader):
    consumer_group: str
    topic: str
    queue_id: Int
    queue_offset: Long
    max_msg_nums: Int
    sys_flag: Int
    commit_offset: Long
    suspend_timeout_millis: Long
    sub_version: Long
    subscription: Optional[str] = None
    expression_type: Optional[str] = None
    max_msg_bytes: Optional[Int] = None


@dataclass
class PullMessageResponseHeader(CommandHeader):
    suggest_which_broker_id: Long
    next_begin_offset: Long
    min_offset: Long
    max_offset: Long


@dataclass
class QueryConsumerOffsetRequestHeader(CommandHeader):
    consumer_group: str
    topic: str
    queue_id: Int
    set_zero_if_not_found: Optional[bool] = None


@dataclass
class UpdateConsumerOffsetRequestHeader(CommandHeader):
    consumer_group: str
    topic: str
    queue_id: Int
    commit_offset: Long


@dataclass
class OffsetResponseHeader(CommandHeader):
    """QUERY_CONSUMER_OFFSET's, GET_MAX_OFFSET's, GET_MIN_OFFSET's and SEARCH_OFFSET_BY_TIMESTAMP's answer."""
    offset: Long


@dataclass
class QueueRequestHeader(CommandHeader):
    """GET_MAX_OFFSET's, GET_MIN_OFFSET's and GET_EARLIEST_MSG_STORETIME's request: one queue of a topic."""
    topic: str
    queue_id: Int


@dataclass
class SearchOffsetRequestHeader(CommandHeader):
    topic: str
    queue_id: Int
    timestamp: Long


@dataclass
class GetEarliestMsgStoretimeResponseHeader(CommandHeader):
    timestamp: Long


@dataclass
class QueryMessageRequestHeader(CommandHeader):
    topic: str
    key: str
    max_num: Int
    begin_timestamp: Long
    end_timestamp: Long


@dataclass
class QueryMessageResponseHeader(CommandHeader):
    index_last_update_timestamp: Long
    index_last_update_phyoffset: Long = field(metadata={WIRE: "indexLastUpdatePhyoffset"})


@dataclass
class ViewMessageRequestHeader(CommandHeader):
    offset: Long
    topic: Optional[str] = None


@dataclass
class UnregisterClientRequestHeader(CommandHeader):
    client_id: str = field(metadata={WIRE: "clientID"})
    producer_group: Optional[str] = None
    consumer_group: Optional[str] = None


@dataclass
class ConsumerGroupRequestHeader(CommandHeader):
    """GET_CONSUMER_LIST_BY_GROUP's and NOTIFY_CONSUMER_IDS_CHANGED's request: one consumer group."""
    consumer_group: str


@dataclass
class ConsumerSendMsgBackRequestHeader(CommandHeader):
    offset: Long
    group: str
    delay_level: Optional[Int] = None  # RocketMQ requires it; absent is 0 here (the next level), as always
    origin_msg_id: Optional[str] = None
    origin_topic: Optional[str] = None
    unit_mode: bool = False
    max_reconsume_times: Optional[Int] = None


@dataclass
class EndTransactionRequestHeader(CommandHeader):
    """END_TRANSACTION: RocketMQ's fields, and tranStateTableCount, this broker's: the halves of one batch,
    decided together. Only commitOrRollback is read before the outcome is known: a producer that does not know
    yet (0) may leave the others out, as nothing is done; the processor requires them for a commit or rollback."""
    commit_or_rollback: Int
    producer_group: Optional[str] = None
    tran_state_table_offset: Optional[Long] = None
    commit_log_offset: Optional[Long] = None
    from_transaction_check: Optional[bool] = None
    msg_id: Optional[str] = None
    transaction_id: Optional[str] = None
    tran_state_table_count: Optional[Int] = None


@dataclass
class CheckTransactionStateRequestHeader(CommandHeader):
    """CHECK_TRANSACTION_STATE, the broker's question to a producer about a half it never heard the outcome of."""
    tran_state_table_offset: Long
    commit_log_offset: Long
    msg_id: Optional[str] = None
    transaction_id: Optional[str] = None
    offset_msg_id: Optional[str] = None
    tran_state_table_count: Optional[Int] = None


@dataclass
class CreateTopicRequestHeader(CommandHeader):
    """UPDATE_AND_CREATE_TOPIC (mqadmin updateTopic). RocketMQ requires defaultTopic, the queue numbers, perm and
    topicFilterType as well; the processor refuses queue numbers that are absent or differ."""
    topic: str
    default_topic: Optional[str] = None
    read_queue_nums: Optional[Int] = None
    write_queue_nums: Optional[Int] = None
    perm: Optional[Int] = None
    topic_filter_type: Optional[str] = None
    topic_sys_flag: Optional[Int] = None
    order: Optional[bool] = None


@dataclass
class GetTopicStatsInfoRequestHeader(CommandHeader):
    topic: str


@dataclass
class GetConsumeStatsRequestHeader(CommandHeader):
    consumer_group: str
    topic: Optional[str] = None


@dataclass
class DeleteTopicRequestHeader(CommandHeader):
    topic: str


@dataclass
class DeleteSubscriptionGroupRequestHeader(CommandHeader):
    group_name: str
    remove_offset: bool = False


@dataclass
class GetProducerConnectionListRequestHeader(CommandHeader):
    producer_group: str


@dataclass
class ResetOffsetRequestHeader(CommandHeader):
    """INVOKE_BROKER_TO_RESET_OFFSET (mqadmin resetOffsetByTime) and RESET_CONSUMER_CLIENT_OFFSET to clients;
    timestamp -1: each queue's max offset."""
    topic: str
    group: str
    timestamp: Long
    is_force: bool = field(default=True, metadata={WIRE: "isForce"})


@dataclass
class QueryTopicConsumeByWhoRequestHeader(CommandHeader):
    topic: str


@dataclass
class GetConsumerRunningInfoRequestHeader(CommandHeader):
    consumer_group: str
    client_id: str
    jstack_enable: Optional[bool] = None


@dataclass
class GetBrokerConfigResponseHeader(CommandHeader):
    version: str
