"""The name server: RocketMQ's DefaultRequestProcessor over a RouteInfoManager, served by remoting.

`async with NameServer("127.0.0.1:0") as ns:` in-process; alone as `rmq namesrv --listen HOST:PORT` (the one
entry point: prints {"namesrv": "HOST:PORT"} on one line once it accepts; SIGTERM or Ctrl-C stops it, exit 0).
"""
from __future__ import annotations

import asyncio
import collections
import logging
import zlib
from typing import Optional

from remoting import RemotingCommand, RemotingServer, RequestCode, ResponseCode
from remoting import remoting_serializable as rs
from remoting.local_address import advertised_host, join_address, split_address
from remoting.namesrv_bodies import RegisterBrokerBody, TopicList
from remoting.namesrv_headers import (
    DeleteTopicFromNamesrvRequestHeader,
    GetKVConfigResponseHeader,
    GetKVListByNamespaceRequestHeader,
    GetRouteInfoRequestHeader,
    GetTopicsByClusterRequestHeader,
    KVConfigRequestHeader,
    PutKVConfigRequestHeader,
    RegisterBrokerRequestHeader,
    UnRegisterBrokerRequestHeader,
)

from .kv_config_manager import ORDER_TOPIC_CONFIG, KVConfigManager
from .route_info_manager import RouteInfoManager

log = logging.getLogger(__name__)

DEFAULT_LISTEN = "127.0.0.1:9876"  # RocketMQ's name server port
STANDARD_JSON_VERSION = 401  # MQVersion.Version.V4_9_4.ordinal()


class NameServer:
    def __init__(self, listen: str = DEFAULT_LISTEN, broker_expiry_s: float = 120.0, scan_interval_s: float = 5.0,
                 advertise: Optional[str] = None, kv_config: Optional[str] = None):
        """broker_expiry_s: a broker silent this long is dropped, unless its registration says otherwise
        (heartbeatTimeoutMillis); scan_interval_s: how often that is checked (RocketMQ's
        scanNotActiveBrokerInterval); advertise: the address printed for clients (listening on a wildcard without
        it: the host's first non-loopback address); kv_config: the file the KV settings are kept in (RocketMQ's
        kvConfig.json; in memory without it)."""
        host, port = split_address(listen)
        host = host or "127.0.0.1"
        self._advertised = advertised_host(host, advertise)
        self.routes = RouteInfoManager(expiry_s=broker_expiry_s)
        self.kv = KVConfigManager(kv_config)
        self.server = RemotingServer(host, port)
        self.scan_interval_s = min(scan_interval_s, max(0.05, broker_expiry_s / 4))
        self.requests: collections.Counter = collections.Counter()  # by request code, for operators and tests
        self._scanner: Optional[asyncio.Task] = None
        for code, processor in ((RequestCode.REGISTER_BROKER, self._register_broker),
                                (RequestCode.UNREGISTER_BROKER, self._unregister_broker),
                                (RequestCode.GET_ROUTEINFO_BY_TOPIC, self._route_info),
                                (RequestCode.GET_BROKER_CLUSTER_INFO, self._cluster_info),
                                (RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, self._topic_list),
                                (RequestCode.DELETE_TOPIC_IN_NAMESRV, self._delete_topic),
                                (RequestCode.GET_TOPICS_BY_CLUSTER, self._topics_by_cluster),
                                (RequestCode.PUT_KV_CONFIG, self._put_kv),
                                (RequestCode.GET_KV_CONFIG, self._get_kv),
                                (RequestCode.DELETE_KV_CONFIG, self._delete_kv),
                                (RequestCode.GET_KVLIST_BY_NAMESPACE, self._kv_list)):
            self.server.register(code, self._counted(processor))
        self.server.on_close.append(self._channel_closed)

    @property
    def address(self) -> str:
        """The address clients and brokers on other hosts use."""
        return join_address(self._advertised[0], self.server.port)

    @property
    def listen_address(self) -> str:
        return self.server.address

    async def start(self) -> "NameServer":
        await self.server.start()
        self._scanner = asyncio.ensure_future(self._scan())
        log.info("name server listening on %s", self.listen_address)
        _, why, warning = self._advertised
        if why is not None:
            log.info("name server reachable at %s (%s)", self.address, why)
        if warning is not None:
            log.warning("%s: give the name server's address with --advertise", warning)
        return self

    async def stop(self) -> None:
        if self._scanner is not None:
            self._scanner.cancel()
        await self.server.stop()

    async def __aenter__(self) -> "NameServer":
        return await self.start()

    async def __aexit__(self, *exc) -> None:
        await self.stop()

    def _counted(self, processor):
        async def run(cmd: RemotingCommand, channel):
            self.requests[cmd.code] += 1
            return await processor(cmd, channel)
        return run

    async def _scan(self) -> None:
        while True:
            await asyncio.sleep(self.scan_interval_s)
            expiries = {a: live.expiry_s or self.routes.expiry_s for a, live in self.routes.broker_live_table.items()}
            for addr in self.routes.scan_not_active_broker():
                log.warning("broker %s has not registered for %g s: removed from the routes", addr, expiries[addr])

    def _channel_closed(self, channel) -> None:
        addr = self.routes.on_channel_destroy(channel)
        if addr is not None:
            log.info("broker %s closed its connection: removed from the routes", addr)

    # -- processors (RocketMQ's DefaultRequestProcessor) ---------------------------------------------------------

    async def _register_broker(self, cmd: RemotingCommand, channel) -> RemotingCommand:
        header = RegisterBrokerRequestHeader.from_ext_fields(cmd.ext_fields)
        if header.body_crc32 and zlib.crc32(cmd.body) & 0x7FFFFFFF != header.body_crc32:
            return cmd.response(ResponseCode.SYSTEM_ERROR, "crc32 not match")
        body = RegisterBrokerBody.decode(cmd.body, header.compressed)
        if header.broker_addr not in self.routes.broker_live_table:
            log.info("broker %s (%s) registered at %s from %s", header.broker_name, header.cluster_name,
                     header.broker_addr, channel.remote_address)
        expiry = header.heartbeat_timeout_millis / 1000 if header.heartbeat_timeout_millis else None
        answer = self.routes.register_broker(header.cluster_name, header.broker_addr, header.broker_name,
                                             header.broker_id, header.ha_server_addr,
                                             body.topic_config_serialize_wrapper.topic_config_table, channel,
                                             expiry)
        return cmd.response(ResponseCode.SUCCESS, ext_fields=answer.to_ext_fields(),
                            body=rs.encode({"table": self.kv.namespace(ORDER_TOPIC_CONFIG) or {}}))

    async def _unregister_broker(self, cmd: RemotingCommand, channel) -> RemotingCommand:
        header = UnRegisterBrokerRequestHeader.from_ext_fields(cmd.ext_fields)
        self.routes.unregister_broker(header.cluster_name, header.broker_addr, header.broker_name, header.broker_id)
        return cmd.response(ResponseCode.SUCCESS)

    async def _route_info(self, cmd: RemotingCommand, channel) -> RemotingCommand:
        header = GetRouteInfoRequestHeader.from_ext_fields(cmd.ext_fields)
        route = self.routes.pick_topic_route_data(header.topic)
        if route is None:
            return cmd.response(ResponseCode.TOPIC_NOT_EXIST,
                                f"No topic route info in name server for the topic: {header.topic}")
        route.order_topic_conf = self.kv.get(ORDER_TOPIC_CONFIG, header.topic)
        # as RocketMQ: standard JSON to clients of 4.9.4 or later or that ask for it, fastjson's own form otherwise
        standard = cmd.version >= STANDARD_JSON_VERSION or bool(header.accept_standard_json_only)
        return cmd.response(ResponseCode.SUCCESS, body=route.encode(standard))

    async def _cluster_info(self, cmd: RemotingCommand, channel) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, body=self.routes.cluster_info().encode())

    async def _topic_list(self, cmd: RemotingCommand, channel) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, body=TopicList(self.routes.all_topics()).encode())

    async def _delete_topic(self, cmd: RemotingCommand, channel) -> RemotingCommand:
        header = DeleteTopicFromNamesrvRequestHeader.from_ext_fields(cmd.ext_fields)
        self.routes.delete_topic(header.topic, header.cluster_name)
        return cmd.response(ResponseCode.SUCCESS)

    async def _topics_by_cluster(self, cmd: RemotingCommand, channel) -> RemotingCommand:
        header = GetTopicsByClusterRequestHeader.from_ext_fields(cmd.ext_fields)
        topics = TopicList(self.routes.topics_of_cluster(header.cluster))
        return cmd.response(ResponseCode.SUCCESS, body=topics.encode())

    # -- KV config (KVConfigManager): what is not there is QUERY_NOT_FOUND, as RocketMQ answers

    async def _put_kv(self, cmd: RemotingCommand, channel) -> RemotingCommand:
        header = PutKVConfigRequestHeader.from_ext_fields(cmd.ext_fields)
        self.kv.put(header.namespace, header.key, header.value)
        return cmd.response(ResponseCode.SUCCESS)

    async def _get_kv(self, cmd: RemotingCommand, channel) -> RemotingCommand:
        header = KVConfigRequestHeader.from_ext_fields(cmd.ext_fields)
        value = self.kv.get(header.namespace, header.key)
        if value is None:
            return cmd.response(ResponseCode.QUERY_NOT_FOUND,
                                f"No config item, Namespace: {header.namespace} Key: {header.key}")
        return cmd.response(ResponseCode.SUCCESS, ext_fields=GetKVConfigResponseHeader(value).to_ext_fields())

    async def _delete_kv(self, cmd: RemotingCommand, channel) -> RemotingCommand:
        header = KVConfigRequestHeader.from_ext_fields(cmd.ext_fields)
        self.kv.delete(header.namespace, header.key)
        return cmd.response(ResponseCode.SUCCESS)

    async def _kv_list(self, cmd: RemotingCommand, channel) -> RemotingCommand:
        header = GetKVListByNamespaceRequestHeader.from_ext_fields(cmd.ext_fields)
        table = self.kv.namespace(header.namespace)
        if table is None:
            return cmd.response(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {header.namespace}")
        return cmd.response(ResponseCode.SUCCESS, body=rs.encode({"table": table}))
