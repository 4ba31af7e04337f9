"""RocketMQ's BrokerOuterAPI: what a broker asks of its name server: REGISTER_BROKER with its topics (all of them
periodically, or the one just created), UNREGISTER_BROKER when it stops."""
from __future__ import annotations

import json
import logging
from typing import Callable, Optional

from remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from remoting.namesrv_headers import RegisterBrokerRequestHeader, UnRegisterBrokerRequestHeader
from store import MessageStore

log = logging.getLogger(__name__)


class BrokerOuterAPI:
    def __init__(self, namesrv: str, store: MessageStore, broker_name: str, cluster: str,
                 address: Callable[[], str], heartbeat_timeout_ms: Optional[int] = None):
        self.namesrv, self.store, self.broker_name, self.cluster = namesrv, store, broker_name, cluster
        self.address, self.heartbeat_timeout_ms = address, heartbeat_timeout_ms
        self._client: Optional[RemotingClient] = None

    @property
    def connected(self) -> bool:
        return self._client is not None

    async def connect(self) -> None:
        self._client = await RemotingClient(self.namesrv).connect()

    async def register(self, only: Optional[str] = None) -> None:
        """REGISTER_BROKER with every topic's queue counts, or with the one topic just created
        (registerIncrementBrokerData: the name server merges it), so that creating a topic does not cost a message
        the size of the whole table."""
        assert self._client is not None
        topics = self.store.topic_config
        topics.refresh()  # topics another process (rmq produce --store, a Spark sink) created since
        chosen = {only: topics.table[only]} if only is not None and only in topics.table else topics.table
        table = {name: {"topicName": name, "readQueueNums": cfg.readQueueNums, "writeQueueNums": cfg.writeQueueNums,
                        "perm": cfg.perm, "topicFilterType": cfg.topicFilterType, "topicSysFlag": cfg.topicSysFlag,
                        "order": cfg.order} for name, cfg in chosen.items()}
        body = json.dumps({"topicConfigSerializeWrapper": {"topicConfigTable": table,
                                                           "dataVersion": topics.data_version},
                           "filterServerList": []}).encode()
        address = self.address()
        header = RegisterBrokerRequestHeader(self.broker_name, address, self.cluster, address, 0,
                                             self.heartbeat_timeout_ms or None)
        fields = {k: v for k, v in header.to_ext_fields().items() if k != "bodyCrc32"}  # 0: not checked anyway
        answer = await self._client.invoke(RemotingCommand.request(RequestCode.REGISTER_BROKER, fields, body=body))
        if answer.code != ResponseCode.SUCCESS:
            log.warning("the name server %s refused the registration: %s", self.namesrv, answer.remark)

    async def unregister_and_close(self) -> None:
        if self._client is None:
            return
        header = UnRegisterBrokerRequestHeader(self.broker_name, self.address(), self.cluster, 0)
        try:
            await self._client.invoke(RemotingCommand.request(RequestCode.UNREGISTER_BROKER, header.to_ext_fields()),
                                      timeout=3)
        except (ConnectionError, TimeoutError):
            pass
        await self._client.close()
        self._client = None
