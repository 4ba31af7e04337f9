"""The bodies of the broker's admin answers a RocketMQ client or mqadmin reads: TopicStatsTable
(GET_TOPIC_STATS_INFO) and ConsumeStats (GET_CONSUME_STATS), maps keyed by MessageQueue, which fastjson writes with
the MessageQueue object itself as the key; fields in fastjson's (alphabetical) order."""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from . import remoting_serializable as rs


@dataclass(frozen=True, order=True)
class MessageQueue:
    """A queue of one broker (RocketMQ's MessageQueue): what clients address and admin bodies are keyed by."""
    topic: str
    broker_name: str
    queue_id: int

    def key(self) -> str:
        """The queue's name in an offsets JSON: brokerName:queueId (never confused with another broker's)."""
        return f"{self.broker_name}:{self.queue_id}"

    def to_json(self) -> dict:
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}

    @classmethod
    def from_key(cls, key: str, where: str) -> "MessageQueue":
        try:
            obj = rs.as_object(json.loads(key), where)
        except json.JSONDecodeError:
            raise rs.BodyError(f"{where}: key {key[:80]!r} is not a MessageQueue") from None
        return cls(rs.read_field(obj, "topic", str, where), rs.read_field(obj, "brokerName", str, where),
                   rs.read_field(obj, "queueId", int, where))


@dataclass
class TopicOffset:
    minOffset: int = 0
    maxOffset: int = 0
    lastUpdateTimestamp: int = 0


@dataclass
class TopicStatsTable:
    offsetTable: dict[MessageQueue, TopicOffset] = field(default_factory=dict)

    def encode(self) -> bytes:
        return rs.encode({"offsetTable": {mq: {"lastUpdateTimestamp": o.lastUpdateTimestamp,
                                               "maxOffset": o.maxOffset, "minOffset": o.minOffset}
                                          for mq, o in sorted(self.offsetTable.items())}})

    @classmethod
    def decode(cls, body: bytes | bytearray) -> "TopicStatsTable":
        table = rs.as_object(rs.field_or(rs.as_object(rs.decode(body), "TopicStatsTable"), "offsetTable", {}),
                             "TopicStatsTable.offsetTable")
        out = {}
        for key, value in table.items():
            where = "TopicStatsTable.offsetTable"
            o = rs.as_object(value, where)
            out[MessageQueue.from_key(key, where)] = TopicOffset(
                rs.read_field(o, "minOffset", int, where, 0), rs.read_field(o, "maxOffset", int, where, 0),
                rs.read_field(o, "lastUpdateTimestamp", int, where, 0))
        return cls(out)


@dataclass
class OffsetWrapper:
    brokerOffset: int = 0
    consumerOffset: int = 0
    pullOffset: int = 0
    lastTimestamp: int = 0


@dataclass
class ConsumeStats:
    offsetTable: dict[MessageQueue, OffsetWrapper] = field(default_factory=dict)
    consumeTps: float = 0.0

    def encode(self) -> bytes:
        return rs.encode({"consumeTps": self.consumeTps, "offsetTable": {
            mq: {"brokerOffset": o.brokerOffset, "consumerOffset": o.consumerOffset, "lastTimestamp": o.lastTimestamp,
                 "pullOffset": o.pullOffset} for mq, o in sorted(self.offsetTable.items())}})

    @classmethod
    def decode(cls, body: bytes | bytearray) -> "ConsumeStats":
        obj = rs.as_object(rs.decode(body), "ConsumeStats")
        where = "ConsumeStats.offsetTable"
        out = {}
        for key, value in rs.as_object(rs.field_or(obj, "offsetTable", {}), where).items():
            o = rs.as_object(value, where)
            out[MessageQueue.from_key(key, where)] = OffsetWrapper(
                rs.read_field(o, "brokerOffset", int, where, 0), rs.read_field(o, "consumerOffset", int, where, 0),
                rs.read_field(o, "pullOffset", int, where, 0), rs.read_field(o, "lastTimestamp", int, where, 0))
        tps = rs.field_or(obj, "consumeTps", 0.0)
        return cls(out, float(tps) if isinstance(tps, (int, float)) else 0.0)

    def diff_total(self) -> int:
        """The group's lag over every queue (RocketMQ's ConsumeStats.computeTotalDiff)."""
        return sum(o.brokerOffset - o.consumerOffset for o in self.offsetTable.values())


@dataclass
class ResetOffsetBody:
    """INVOKE_BROKER_TO_RESET_OFFSET's answer and RESET_CONSUMER_CLIENT_OFFSET's body: the queues' new offsets."""
    offsetTable: dict[MessageQueue, int] = field(default_factory=dict)

    def encode(self) -> bytes:
        return rs.encode({"offsetTable": dict(sorted(self.offsetTable.items()))})

    @classmethod
    def decode(cls, body: bytes | bytearray) -> "ResetOffsetBody":
        where = "ResetOffsetBody.offsetTable"
        table = rs.as_object(rs.field_or(rs.as_object(rs.decode(body), "ResetOffsetBody"), "offsetTable", {}), where)
        out = {}
        for key, value in table.items():
            if not isinstance(value, int) or isinstance(value, bool):
                raise rs.BodyError(f"{where}: offset {value!r} is not an integer")
            out[MessageQueue.from_key(key, where)] = value
        return cls(out)
