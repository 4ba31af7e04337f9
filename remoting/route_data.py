"""A topic's route as the name server answers GET_ROUTEINFO_BY_TOPIC (remoting.protocol.route: QueueData,
BrokerData, TopicRouteData), with fastjson's field names. Each type turns into the plain objects
remoting_serializable writes (fields in fastjson's alphabetical order) and back, checking what it reads."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from . import remoting_serializable as rs

MASTER_ID = 0
PERM_WRITE = 0x2
PERM_READ = 0x4
PERM_READ_WRITE = PERM_READ | PERM_WRITE


@dataclass
class QueueData:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int = PERM_READ_WRITE
    topic_sys_flag: int = 0

    def to_json(self) -> dict:
        # topicSynFlag: the field's name before RocketMQ corrected it; older clients read that one
        return {"brokerName": self.broker_name, "perm": self.perm, "readQueueNums": self.read_queue_nums,
                "topicSynFlag": self.topic_sys_flag, "topicSysFlag": self.topic_sys_flag,
                "writeQueueNums": self.write_queue_nums}

    @classmethod
    def from_json(cls, obj: Any, where: str = "queueData") -> "QueueData":
        obj = rs.as_object(obj, where)
        sys_flag = rs.read_field(obj, "topicSysFlag", int, where, None)
        return cls(rs.read_field(obj, "brokerName", str, where), rs.read_field(obj, "readQueueNums", int, where),
                   rs.read_field(obj, "writeQueueNums", int, where),
                   rs.read_field(obj, "perm", int, where, PERM_READ_WRITE),
                   sys_flag if sys_flag is not None else rs.read_field(obj, "topicSynFlag", int, where, 0))


@dataclass
class BrokerData:
    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)  # broker id (0 the master) -> address

    def to_json(self) -> dict:
        # integer keys: fastjson writes them bare, as RocketMQ's name server does
        return {"brokerAddrs": dict(sorted(self.broker_addrs.items())), "brokerName": self.broker_name,
                "cluster": self.cluster}

    @classmethod
    def from_json(cls, obj: Any, where: str = "brokerData") -> "BrokerData":
        obj = rs.as_object(obj, where)
        addrs = rs.as_object(rs.field_or(obj, "brokerAddrs", {}), f"{where}.brokerAddrs")
        return cls(rs.read_field(obj, "cluster", str, where), rs.read_field(obj, "brokerName", str, where),
                   {rs.read_int_key(k, f"{where}.brokerAddrs"): rs.read_field(addrs, k, str, f"{where}.brokerAddrs")
                    for k in addrs})

    def master_addr(self) -> Optional[str]:
        return self.broker_addrs.get(MASTER_ID)


@dataclass
class TopicRouteData:
    queue_datas: list[QueueData] = field(default_factory=list)
    broker_datas: list[BrokerData] = field(default_factory=list)
    order_topic_conf: Optional[str] = None
    filter_server_table: dict[str, list[str]] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"brokerDatas": [b.to_json() for b in self.broker_datas],
                "filterServerTable": self.filter_server_table, "orderTopicConf": self.order_topic_conf,
                "queueDatas": [q.to_json() for q in self.queue_datas]}

    def encode(self, standard: bool = False) -> bytes:
        return rs.encode(self.to_json(), standard)

    @classmethod
    def from_json(cls, obj: Any, where: str = "topicRouteData") -> "TopicRouteData":
        obj = rs.as_object(obj, where)
        queues = rs.as_list(rs.field_or(obj, "queueDatas", []), f"{where}.queueDatas")
        brokers = rs.as_list(rs.field_or(obj, "brokerDatas", []), f"{where}.brokerDatas")
        servers = rs.as_object(rs.field_or(obj, "filterServerTable", {}), f"{where}.filterServerTable")
        return cls([QueueData.from_json(q, f"{where}.queueDatas[{i}]") for i, q in enumerate(queues)],
                   [BrokerData.from_json(b, f"{where}.brokerDatas[{i}]") for i, b in enumerate(brokers)],
                   rs.read_field(obj, "orderTopicConf", str, where, None),
                   {k: [str(a) for a in rs.as_list(v, f"{where}.filterServerTable.{k}")] for k, v in servers.items()})

    @classmethod
    def decode(cls, body: bytes | bytearray) -> "TopicRouteData":
        return cls.from_json(rs.decode(body))
