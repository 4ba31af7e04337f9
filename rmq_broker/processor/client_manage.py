"""ClientManageProcessor: HEART_BEAT 34 (producer and consumer groups' members, consumers' subscriptions),
UNREGISTER_CLIENT 35, CHECK_CLIENT_CONFIG 46 (a subscription refused now if the pull would refuse it)."""
from __future__ import annotations

import json

from remoting import RemotingCommand, RequestCode, ResponseCode
from remoting.broker_headers import UnregisterClientRequestHeader
from store.offset_store import check_group

from ..bad_request import BadRequest
from ..selector_cache import check_selector_type
from .request_processor import RequestProcessor, handles
from .send_message import RETRY_GROUP_TOPIC_PREFIX


class ClientManageProcessor(RequestProcessor):
    def __init__(self, broker):
        super().__init__()
        self.broker = broker

    @handles(RequestCode.HEART_BEAT)
    async def heartbeat(self, h: None, cmd: RemotingCommand, channel) -> RemotingCommand:
        try:
            data = json.loads(cmd.body) if cmd.body else {}
        except ValueError as e:
            raise BadRequest(f"the heartbeat body is not JSON: {e}") from None
        client_id = str(data.get("clientID") or channel.remote_address)
        for producer in data.get("producerDataSet") or []:
            group = str(producer.get("groupName") or "") if isinstance(producer, dict) else ""
            if group:
                self.broker.producers.heartbeat(group, client_id, channel, cmd.language, cmd.version)
        for consumer in data.get("consumerDataSet") or []:
            group = str(consumer.get("groupName") or "")
            subs = {s.get("topic"): s for s in consumer.get("subscriptionDataSet") or [] if isinstance(s, dict)}
            try:
                check_group(group)
            except ValueError as e:
                raise BadRequest(f"consumerDataSet: {e}") from None
            # the retry topic exists for groups this broker serves (findSubscriptionGroupConfig)
            if self.broker.subscription_groups.find(group) is not None:
                await self.broker.topics.create_system_topic(RETRY_GROUP_TOPIC_PREFIX + group)
            details = {k: consumer.get(k) for k in ("consumeType", "messageModel", "consumeFromWhere")}
            if self.broker.consumers.register(group, client_id, channel, subs, details, cmd.language, cmd.version):
                await self.broker.consumers.notify_ids_changed(group)
        return cmd.response(ResponseCode.SUCCESS)

    @handles(RequestCode.UNREGISTER_CLIENT, header=UnregisterClientRequestHeader)
    async def unregister_client(self, h: UnregisterClientRequestHeader, cmd: RemotingCommand,
                                channel) -> RemotingCommand:
        if h.producer_group:
            self.broker.producers.unregister(h.producer_group, h.client_id)
        if h.consumer_group and self.broker.consumers.unregister(h.consumer_group, h.client_id):
            await self.broker.consumers.notify_ids_changed(h.consumer_group)
        return cmd.response(ResponseCode.SUCCESS)

    @handles(RequestCode.CHECK_CLIENT_CONFIG)
    async def check_client_config(self, h: None, cmd: RemotingCommand, channel) -> RemotingCommand:
        """The Java client sends each non-TAG subscription here before it starts (checkClientInBroker) and fails
        to start on anything but SUCCESS: the subscription is parsed as the pull parses it (and the result kept for
        the pulls), refused with the pull's code and remark (ClientManageProcessor.checkClientConfig)."""
        try:
            data = json.loads(cmd.body) if cmd.body else {}
        except ValueError as e:
            raise BadRequest(f"the CHECK_CLIENT_CONFIG body is not JSON: {e}") from None
        sub = data.get("subscriptionData") if isinstance(data, dict) else None
        if not isinstance(sub, dict):
            return cmd.response(ResponseCode.SUCCESS)
        kind = str(sub.get("expressionType") or "TAG")
        if kind == "TAG":
            return cmd.response(ResponseCode.SUCCESS)
        check_selector_type(kind, self.broker.broker_config.enablePropertyFilter)
        try:
            version = int(sub.get("subVersion") or 0)
        except (TypeError, ValueError):
            version = 0
        await self.broker.selectors.get(str(data.get("group") or ""), str(sub.get("topic") or ""), kind,
                                        str(sub.get("subString") or ""), version)
        return cmd.response(ResponseCode.SUCCESS)
