"""The broker's request and response headers (remoting.protocol.header) as RocketMQ 4.x clients send and read
them, RocketMQ's field names; SendMessageRequestHeaderV2 is SEND_MESSAGE_V2's abbreviated form (fields a..m)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from .codes import RequestCode
from .command_header import WIRE, CommandHeader, Int, Long


@dataclass
class SendMessageRequestHeader(CommandHeader):
    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: Int
    queue_id: Int
    sys_flag: Int
    born_timestamp: Long
    flag: Int
    properties: Optional[str] = None
    reconsume_times: Optional[Int] = None
    unit_mode: Optional[bool] = None
    batch: Optional[bool] = None
    max_reconsume_times: Optional[Int] = None


@dataclass
class SendMessageRequestHeaderV2(CommandHeader):
    a: str  # producerGroup
    b: str  # topic
    c: str  # defaultTopic
    d: Int  # defaultTopicQueueNums
    e: Int  # queueId
    f: Int  # sysFlag
    g: Long  # bornTimestamp
    h: Int  # flag
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


# SendMessageRequestHeaderV2's short names -> SendMessageRequestHeader's
V2_SEND_FIELDS = {"a": "producerGroup", "b": "topic", "c": "defaultTopic", "d": "defaultTopicQueueNums", "e": "queueId",
                  "f": "sysFlag", "g": "bornTimestamp", "h": "flag", "i": "properties", "j": "reconsumeTimes",
                  "k": "unitMode", "l": "maxReconsumeTimes", "m": "batch"}
_V1_SEND_FIELDS = frozenset(V2_SEND_FIELDS.values())
_V2_SHORT_NAMES = {long: short for short, long in V2_SEND_FIELDS.items()}


def v2_send_fields(fields: dict) -> dict:
    """A send's header fields under the V2 short names, as RocketMQ's clients send SEND_BATCH_MESSAGE: a stock
    broker decodes that request's header as SendMessageRequestHeaderV2 only (long names leave its topic blank)."""
    return {_V2_SHORT_NAMES.get(k, k): v for k, v in fields.items()}


def send_fields(code: int, ext: dict) -> dict:
    """A send's header fields under SendMessageRequestHeader's names, read one way for the broker and the ACL.
    SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE come with the short V2 names from RocketMQ's clients (the Java client
    sends every batch so); when the short topic `b` is there only the short names count, as RocketMQ decodes the V2
    header, so a long-named field beside them can never override what the ACL checked."""
    if code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE) and "b" in ext:
        out = {k: v for k, v in ext.items() if k not in _V1_SEND_FIELDS and k not in V2_SEND_FIELDS}
        out.update((V2_SEND_FIELDS[k], v) for k, v in ext.items() if k in V2_SEND_FIELDS)
        return out
    return ext


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
    delay_level: Int
    origin_msg_id: Optional[str] = None
    origin_topic: Optional[str] = None
    unit_mode: bool = False
    max_reconsume_times: Optional[Int] = None
