"""The bodies a name server reads and writes besides the route (remoting.protocol.body and common.TopicConfig,
here RegisteredTopicConfig: the store's TopicConfig as a broker registers it): RegisterBrokerBody with its
TopicConfigSerializeWrapper (plain, or compressed as a broker with compressedRegister=true sends it), ClusterInfo
and TopicList, with fastjson's field names."""
from __future__ import annotations

import struct
import time
import zlib
from dataclasses import dataclass, field
from typing import Any, Optional

from . import remoting_serializable as rs
from .route_data import PERM_READ_WRITE, BrokerData

DEFAULT_QUEUE_NUMS = 16  # TopicConfig's defaultReadQueueNums / defaultWriteQueueNums
TOPIC_FILTER_TYPES = ("SINGLE_TAG", "MULTI_TAG")


@dataclass
class RegisteredTopicConfig:
    topic_name: str
    read_queue_nums: int = DEFAULT_QUEUE_NUMS
    write_queue_nums: int = DEFAULT_QUEUE_NUMS
    perm: int = PERM_READ_WRITE
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False

    def to_json(self) -> dict:
        return {"order": self.order, "perm": self.perm, "readQueueNums": self.read_queue_nums,
                "topicFilterType": self.topic_filter_type, "topicName": self.topic_name,
                "topicSysFlag": self.topic_sys_flag, "writeQueueNums": self.write_queue_nums}

    @classmethod
    def from_json(cls, obj: Any, where: str = "topicConfig") -> "RegisteredTopicConfig":
        obj = rs.as_object(obj, where)
        filter_type = rs.read_field(obj, "topicFilterType", str, where, "SINGLE_TAG")
        if filter_type not in TOPIC_FILTER_TYPES:
            raise rs.BodyError(f"{where}.topicFilterType is {filter_type!r}, "
                               f"not one of {', '.join(TOPIC_FILTER_TYPES)}")
        return cls(rs.read_field(obj, "topicName", str, where),
                   rs.read_field(obj, "readQueueNums", int, where, DEFAULT_QUEUE_NUMS),
                   rs.read_field(obj, "writeQueueNums", int, where, DEFAULT_QUEUE_NUMS),
                   rs.read_field(obj, "perm", int, where, PERM_READ_WRITE), filter_type,
                   rs.read_field(obj, "topicSysFlag", int, where, 0), rs.read_field(obj, "order", bool, where, False))

    @classmethod
    def from_text(cls, text: str, where: str) -> "RegisteredTopicConfig":
        """TopicConfig.encode's form, used in compressed registrations: name, read and write queue numbers, perm and
        filter type separated by spaces, then (optionally) the attributes as JSON."""
        parts = text.split(" ")
        if len(parts) < 5:
            raise rs.BodyError(f"{where} is {text[:60]!r}, not 'topic readQueueNums writeQueueNums perm filterType'")
        try:
            numbers = [int(p) for p in parts[1:4]]
        except ValueError:
            raise rs.BodyError(f"{where} is {text[:60]!r}: queue numbers and perm must be integers") from None
        if parts[4] not in TOPIC_FILTER_TYPES:
            raise rs.BodyError(f"{where} has filter type {parts[4]!r}, not one of {', '.join(TOPIC_FILTER_TYPES)}")
        return cls(parts[0], numbers[0], numbers[1], numbers[2], parts[4])


@dataclass
class DataVersion:
    timestamp: int = field(default_factory=lambda: int(time.time() * 1000))
    counter: int = 0

    def to_json(self) -> dict:
        return {"counter": self.counter, "timestamp": self.timestamp}

    @classmethod
    def from_json(cls, obj: Any, where: str = "dataVersion") -> "DataVersion":
        obj = rs.as_object(obj, where)
        return cls(rs.read_field(obj, "timestamp", int, where, 0), rs.read_field(obj, "counter", int, where, 0))


@dataclass
class TopicConfigSerializeWrapper:
    topic_config_table: dict[str, RegisteredTopicConfig] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)

    def to_json(self) -> dict:
        return {"dataVersion": self.data_version.to_json(),
                "topicConfigTable": {name: cfg.to_json() for name, cfg in self.topic_config_table.items()}}

    @classmethod
    def from_json(cls, obj: Any, where: str = "topicConfigSerializeWrapper") -> "TopicConfigSerializeWrapper":
        obj = rs.as_object(obj, where)
        table = rs.as_object(rs.field_or(obj, "topicConfigTable", {}), f"{where}.topicConfigTable")
        return cls({name: RegisteredTopicConfig.from_json(cfg, f"{where}.topicConfigTable.{name}")
                    for name, cfg in table.items()},
                   DataVersion.from_json(rs.field_or(obj, "dataVersion", {}), f"{where}.dataVersion"))


@dataclass
class RegisterBrokerBody:
    topic_config_serialize_wrapper: TopicConfigSerializeWrapper = field(default_factory=TopicConfigSerializeWrapper)
    filter_server_list: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"filterServerList": self.filter_server_list,
                "topicConfigSerializeWrapper": self.topic_config_serialize_wrapper.to_json()}

    def encode(self) -> bytes:
        return rs.encode(self.to_json())

    @classmethod
    def from_json(cls, obj: Any, where: str = "registerBrokerBody") -> "RegisterBrokerBody":
        obj = rs.as_object(obj, where)
        servers = rs.as_list(rs.field_or(obj, "filterServerList", []), f"{where}.filterServerList")
        return cls(TopicConfigSerializeWrapper.from_json(rs.field_or(obj, "topicConfigSerializeWrapper", {}),
                                                         f"{where}.topicConfigSerializeWrapper"),
                   [str(s) for s in servers])

    @classmethod
    def decode(cls, body: bytes | bytearray, compressed: bool = False) -> "RegisterBrokerBody":
        if not body:
            return cls(TopicConfigSerializeWrapper(data_version=DataVersion(0, 0)))
        if compressed:
            return cls._decode_compressed(body)
        return cls.from_json(rs.decode(body))

    @classmethod
    def _decode_compressed(cls, body: bytes | bytearray) -> "RegisterBrokerBody":
        """A deflated sequence of length-prefixed (4-byte big-endian) pieces: the data version as JSON, the number
        of topics, each topic in TopicConfig's text form, the filter server list as JSON (and from 5.0 brokers the
        static topics' queue mappings, which this name server does not keep)."""
        try:
            data = zlib.decompress(body)
        except zlib.error as e:
            raise rs.BodyError(f"the compressed registration does not inflate: {e}") from None
        pos = 0

        def piece(what: str) -> bytes:
            nonlocal pos
            if pos + 4 > len(data):
                raise rs.BodyError(f"the compressed registration ends before {what}")
            (n,) = struct.unpack_from(">i", data, pos)
            if n < 0 or pos + 4 + n > len(data):
                raise rs.BodyError(f"the compressed registration's {what} length {n} runs past its end")
            pos += 4 + n
            return data[pos - n:pos]

        def count(what: str) -> int:
            nonlocal pos
            if pos + 4 > len(data):
                raise rs.BodyError(f"the compressed registration ends before {what}")
            (n,) = struct.unpack_from(">i", data, pos)
            pos += 4
            if n < 0 or n > len(data):
                raise rs.BodyError(f"the compressed registration claims {n} {what}")
            return n

        version = DataVersion.from_json(rs.decode(piece("the data version")))
        table: dict[str, RegisteredTopicConfig] = {}
        for i in range(count("topic configs")):
            text = piece(f"topic config {i}").decode("utf-8", "replace")
            cfg = RegisteredTopicConfig.from_text(text, f"topic config {i}")
            table[cfg.topic_name] = cfg
        servers = rs.as_list(rs.decode(piece("the filter server list")), "filterServerList")
        return cls(TopicConfigSerializeWrapper(table, version), [str(s) for s in servers])


@dataclass
class ClusterInfo:
    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[str, list[str]] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"brokerAddrTable": {name: b.to_json() for name, b in self.broker_addr_table.items()},
                "clusterAddrTable": self.cluster_addr_table}

    def encode(self, standard: bool = False) -> bytes:
        return rs.encode(self.to_json(), standard)

    @classmethod
    def decode(cls, body: bytes | bytearray) -> "ClusterInfo":
        obj = rs.as_object(rs.decode(body), "clusterInfo")
        brokers = rs.as_object(rs.field_or(obj, "brokerAddrTable", {}), "clusterInfo.brokerAddrTable")
        clusters = rs.as_object(rs.field_or(obj, "clusterAddrTable", {}), "clusterInfo.clusterAddrTable")
        return cls({n: BrokerData.from_json(b, f"clusterInfo.brokerAddrTable.{n}") for n, b in brokers.items()},
                   {c: [str(n) for n in rs.as_list(names, f"clusterInfo.clusterAddrTable.{c}")]
                    for c, names in clusters.items()})


@dataclass
class TopicList:
    topic_list: list[str] = field(default_factory=list)
    broker_addr: Optional[str] = None

    def to_json(self) -> dict:
        return {"brokerAddr": self.broker_addr, "topicList": self.topic_list}

    def encode(self, standard: bool = False) -> bytes:
        return rs.encode(self.to_json(), standard)

    @classmethod
    def decode(cls, body: bytes | bytearray) -> "TopicList":
        obj = rs.as_object(rs.decode(body), "topicList")
        return cls([str(t) for t in rs.as_list(rs.field_or(obj, "topicList", []), "topicList.topicList")],
                   rs.read_field(obj, "brokerAddr", str, "topicList", None))
