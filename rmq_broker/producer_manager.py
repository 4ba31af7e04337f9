"""RocketMQ's ProducerManager: producer groups' live connections, from heartbeats' producerDataSet; the check of
a transaction whose outcome never came asks one of them."""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass

log = logging.getLogger(__name__)


@dataclass
class _Producer:
    channel: object
    last_heartbeat: float
    language: int = 0  # the heartbeat command's LanguageCode and version
    version: int = 0


class ProducerManager:
    def __init__(self, expiry_s: float):
        self.expiry_s = expiry_s
        self.groups: dict[str, dict[str, _Producer]] = {}

    def heartbeat(self, group: str, client_id: str, channel, language: int = 0, version: int = 0) -> None:
        clients = self.groups.setdefault(group, {})
        if client_id not in clients:
            log.info("producer %s of group %s connected from %s", client_id, group, channel.remote_address)
        clients[client_id] = _Producer(channel, time.monotonic(), language, version)

    def unregister(self, group: str, client_id: str) -> None:
        clients = self.groups.get(group)
        if clients is not None:
            clients.pop(client_id, None)
            if not clients:
                del self.groups[group]

    def channel_closed(self, channel) -> None:
        for group, clients in list(self.groups.items()):
            for cid in [cid for cid, p in clients.items() if p.channel is channel]:
                self.unregister(group, cid)

    def expire(self) -> None:
        now = time.monotonic()
        for group, clients in list(self.groups.items()):
            for cid in [cid for cid, p in clients.items() if now - p.last_heartbeat > self.expiry_s]:
                log.info("producer %s of group %s sent no heartbeat for %.0f s: removed", cid, group, self.expiry_s)
                self.unregister(group, cid)

    def available_channel(self, group: str):
        """The most recently heard producer of the group (getAvailableChannel), None when none is connected."""
        clients = self.groups.get(group)
        if not clients:
            return None
        return max(clients.values(), key=lambda p: p.last_heartbeat).channel
