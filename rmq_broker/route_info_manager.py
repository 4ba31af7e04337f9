"""RocketMQ's RouteInfoManager: which brokers live, which topics they serve, and the routes clients ask for.

Tables as RocketMQ keeps them: topic -> broker name -> queue data; broker name -> broker data (cluster, broker
id -> address); cluster -> broker names; broker address -> when it last registered. A broker that has not
registered for `expiry_s` (RocketMQ: 120 s; brokers re-register every 30 s) drops out of every table.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Optional

from remoting.namesrv_bodies import ClusterInfo, RegisteredTopicConfig
from remoting.namesrv_headers import RegisterBrokerResponseHeader
from remoting.route_data import MASTER_ID, BrokerData, QueueData, TopicRouteData


@dataclass
class _Live:
    last_update: float
    ha_server_addr: str
    channel: object = None
    expiry_s: Optional[float] = None  # the broker's own (heartbeatTimeoutMillis of its registration)


class RouteInfoManager:
    def __init__(self, expiry_s: float = 120.0, clock=time.monotonic):
        self.expiry_s = expiry_s
        self.clock = clock
        self.topic_queue_table: dict[str, dict[str, QueueData]] = {}
        self.broker_addr_table: dict[str, BrokerData] = {}
        self.cluster_addr_table: dict[str, set[str]] = {}
        self.broker_live_table: dict[str, _Live] = {}

    def register_broker(self, cluster: str, broker_addr: str, broker_name: str, broker_id: int, ha_server_addr: str,
                        topic_configs: dict[str, RegisteredTopicConfig], channel=None,
                        expiry_s: Optional[float] = None) -> RegisterBrokerResponseHeader:
        """A broker's (re-)registration with its topics; a slave's answer names its master. expiry_s: how long
        it may stay silent (RocketMQ 5's heartbeatTimeoutMillis), else this manager's."""
        self.cluster_addr_table.setdefault(cluster, set()).add(broker_name)
        data = self.broker_addr_table.setdefault(broker_name, BrokerData(cluster, broker_name))
        for bid, addr in list(data.broker_addrs.items()):  # the same address under another id: the old entry goes
            if addr == broker_addr and bid != broker_id:
                del data.broker_addrs[bid]
        data.broker_addrs[broker_id] = broker_addr
        if broker_id == MASTER_ID:
            for topic, cfg in topic_configs.items():
                self.topic_queue_table.setdefault(topic, {})[broker_name] = QueueData(
                    broker_name, cfg.read_queue_nums, cfg.write_queue_nums, cfg.perm, cfg.topic_sys_flag)
        self.broker_live_table[broker_addr] = _Live(self.clock(), ha_server_addr, channel, expiry_s)
        master = data.broker_addrs.get(MASTER_ID)
        if broker_id != MASTER_ID and master is not None and master in self.broker_live_table:
            return RegisterBrokerResponseHeader(self.broker_live_table[master].ha_server_addr, master)
        return RegisterBrokerResponseHeader()

    def unregister_broker(self, cluster: str, broker_addr: str, broker_name: str, broker_id: int) -> None:
        self.broker_live_table.pop(broker_addr, None)
        data = self.broker_addr_table.get(broker_name)
        if data is not None and data.broker_addrs.get(broker_id) == broker_addr:
            del data.broker_addrs[broker_id]
        if data is not None and not data.broker_addrs:
            del self.broker_addr_table[broker_name]
            names = self.cluster_addr_table.get(cluster)
            if names is not None:
                names.discard(broker_name)
                if not names:
                    del self.cluster_addr_table[cluster]
            for topic in list(self.topic_queue_table):
                self.topic_queue_table[topic].pop(broker_name, None)
                if not self.topic_queue_table[topic]:
                    del self.topic_queue_table[topic]

    def _forget_addr(self, broker_addr: str) -> None:
        for name, data in list(self.broker_addr_table.items()):
            for bid, addr in list(data.broker_addrs.items()):
                if addr == broker_addr:
                    self.unregister_broker(data.cluster, addr, name, bid)
        self.broker_live_table.pop(broker_addr, None)

    def scan_not_active_broker(self) -> list[str]:
        """Drop brokers silent for longer than the expiry; returns their addresses."""
        now = self.clock()
        gone = [addr for addr, live in self.broker_live_table.items()
                if now - live.last_update > (live.expiry_s or self.expiry_s)]
        for addr in gone:
            self._forget_addr(addr)
        return gone

    def on_channel_destroy(self, channel) -> Optional[str]:
        """A broker's connection closed: RocketMQ forgets the broker registered through it at once."""
        for addr, live in list(self.broker_live_table.items()):
            if live.channel is channel:
                self._forget_addr(addr)
                return addr
        return None

    def pick_topic_route_data(self, topic: str) -> Optional[TopicRouteData]:
        queues = self.topic_queue_table.get(topic)
        if not queues:
            return None
        brokers = [self.broker_addr_table[name] for name in sorted(queues) if name in self.broker_addr_table]
        if not brokers:
            return None
        return TopicRouteData([q for _, q in sorted(queues.items())], brokers)

    def cluster_info(self) -> ClusterInfo:
        return ClusterInfo(dict(sorted(self.broker_addr_table.items())),
                           {c: sorted(names) for c, names in sorted(self.cluster_addr_table.items())})

    def all_topics(self) -> list[str]:
        return sorted(self.topic_queue_table)

    def delete_topic(self, topic: str, cluster: Optional[str] = None) -> None:
        """DELETE_TOPIC_IN_NAMESRV: the topic's route, or only the queues of `cluster`'s brokers (the topic goes
        when none is left). A broker that still has the topic lists it again at its next registration."""
        if not cluster:
            self.topic_queue_table.pop(topic, None)
            return
        queues = self.topic_queue_table.get(topic)
        if queues is None:
            return
        for name in self.cluster_addr_table.get(cluster, ()):
            queues.pop(name, None)
        if not queues:
            del self.topic_queue_table[topic]

    def topics_of_cluster(self, cluster: str) -> list[str]:
        """GET_TOPICS_BY_CLUSTER: the topics some broker of the cluster serves."""
        names = self.cluster_addr_table.get(cluster, set())
        return sorted(t for t, queues in self.topic_queue_table.items() if names.intersection(queues))
