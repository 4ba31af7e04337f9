"""The name server's request and response headers (remoting.protocol.header.namesrv), RocketMQ's field names."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .command_header import CommandHeader, Int, Long


@dataclass
class RegisterBrokerRequestHeader(CommandHeader):
    broker_name: str
    broker_addr: str
    cluster_name: str
    ha_server_addr: str
    broker_id: Long
    heartbeat_timeout_millis: Optional[Long] = None
    enable_acting_master: Optional[bool] = None
    compressed: bool = False
    body_crc32: Int = 0  # 0: not checked


@dataclass
class RegisterBrokerResponseHeader(CommandHeader):
    ha_server_addr: Optional[str] = None
    master_addr: Optional[str] = None


@dataclass
class UnRegisterBrokerRequestHeader(CommandHeader):
    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: Long


@dataclass
class GetRouteInfoRequestHeader(CommandHeader):
    topic: str
    accept_standard_json_only: Optional[bool] = None


@dataclass
class KVConfigRequestHeader(CommandHeader):
    """GET_KV_CONFIG's and DELETE_KV_CONFIG's request."""
    namespace: str
    key: str


@dataclass
class PutKVConfigRequestHeader(CommandHeader):
    namespace: str
    key: str
    value: str


@dataclass
class GetKVConfigResponseHeader(CommandHeader):
    value: Optional[str] = None


@dataclass
class GetKVListByNamespaceRequestHeader(CommandHeader):
    namespace: str


@dataclass
class DeleteTopicFromNamesrvRequestHeader(CommandHeader):
    topic: str
    cluster_name: Optional[str] = None


@dataclass
class GetTopicsByClusterRequestHeader(CommandHeader):
    cluster: str
