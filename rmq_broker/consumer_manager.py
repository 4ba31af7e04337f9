"""RocketMQ's ConsumerManager: the consumer groups' live members, from heartbeats' consumerDataSet, each with its
connection and its subscriptions; a member leaves with its connection, by UNREGISTER_CLIENT, or after
client_expiry_s without a heartbeat (ClientHousekeepingService), and the group's other members are told at once
(NOTIFY_CONSUMER_IDS_CHANGED) so that they rebalance now rather than at their next periodic rebalance."""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Optional

from remoting import RemotingCommand, RequestCode
from remoting.broker_headers import ConsumerGroupRequestHeader
from remoting.remoting_server import Channel

log = logging.getLogger(__name__)


@dataclass
class ClientChannelInfo:
    channel: Channel
    last_heartbeat: float
    subscriptions: dict = field(default_factory=dict)  # topic -> subscription data (as the heartbeat sent it)
    consumer_data: dict = field(default_factory=dict)  # consumeType, messageModel, consumeFromWhere of its heartbeat
    language: int = 0  # the heartbeat command's LanguageCode and version
    version: int = 0


def _sub_version(subscription: dict) -> int:
    try:
        return int(subscription.get("subVersion") or 0)
    except (TypeError, ValueError):
        return 0


class ConsumerManager:
    def __init__(self, client_expiry_s: float):
        self.client_expiry_s = client_expiry_s
        self.groups: dict[str, dict[str, ClientChannelInfo]] = {}  # consumer group -> client id -> client
        self._background: set[asyncio.Task] = set()

    def register(self, group: str, client_id: str, channel, subscriptions: dict, consumer_data: Optional[dict] = None,
                 language: int = 0, version: int = 0) -> bool:
        """A heartbeat's group membership; True when the client joined the group now."""
        clients = self.groups.setdefault(group, {})
        joined = client_id not in clients
        clients[client_id] = ClientChannelInfo(channel, time.monotonic(), subscriptions, consumer_data or {},
                                               language, version)
        return joined

    def clients(self, group: str) -> dict[str, ClientChannelInfo]:
        return dict(sorted(self.groups.get(group, {}).items()))

    def groups_of_topic(self, topic: str) -> list[str]:
        """The groups some online member of which subscribes to the topic (queryTopicConsumeByWho)."""
        return sorted(g for g, clients in self.groups.items()
                      if any(topic in c.subscriptions for c in clients.values()))

    def unregister(self, group: str, client_id: str) -> bool:
        """True when the client was a member (the others are then told)."""
        clients = self.groups.get(group)
        if clients is None or clients.pop(client_id, None) is None:
            return False
        if not clients:
            del self.groups[group]
        return True

    def member_ids(self, group: str) -> list[str]:
        return sorted(self.groups.get(group, {}))

    def subscription(self, group: str, topic: str) -> Optional[dict]:
        """The group's subscription of a topic: the newest (highest subVersion) its members sent in their heartbeats,
        as RocketMQ's ConsumerGroupInfo keeps it (a member that joins later pulls with a newer version, and the
        pull refuses only a version newer than this one); None when no member subscribes to it."""
        subs = [c.subscriptions[topic] for c in self.groups.get(group, {}).values() if topic in c.subscriptions]
        return max(subs, key=_sub_version, default=None)

    def subscribed_topics(self, group: str) -> set[str]:
        return {t for c in self.groups.get(group, {}).values() for t in c.subscriptions}

    async def notify_ids_changed(self, group: str) -> None:
        """NOTIFY_CONSUMER_IDS_CHANGED (oneway) to every member (RocketMQ's Broker2Client)."""
        fields = ConsumerGroupRequestHeader(group).to_ext_fields()
        for client in list(self.groups.get(group, {}).values()):
            note = RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, fields, oneway=True)
            client.channel.send_oneway_best_effort(note)  # never waits for a member that does not read

    def channel_closed(self, channel) -> None:
        for group, clients in list(self.groups.items()):
            left = [cid for cid, client in clients.items() if client.channel is channel]
            for cid in left:
                del clients[cid]
            if not clients:
                del self.groups[group]
            elif left:
                task = asyncio.ensure_future(self.notify_ids_changed(group))
                self._background.add(task)
                task.add_done_callback(self._background.discard)

    async def expire(self) -> None:
        """Members that sent no heartbeat for client_expiry_s leave their groups."""
        now = time.monotonic()
        for group, clients in list(self.groups.items()):
            gone = [cid for cid, c in clients.items() if now - c.last_heartbeat > self.client_expiry_s]
            for cid in gone:
                del clients[cid]
                log.info("consumer %s of group %s sent no heartbeat for %.0f s: removed", cid, group,
                         self.client_expiry_s)
            if not clients:
                del self.groups[group]
            elif gone:
                await self.notify_ids_changed(group)
