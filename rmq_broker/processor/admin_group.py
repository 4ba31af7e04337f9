"""AdminBrokerProcessor's consumer-group requests: the groups' configs (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP 200,
GET_ALL_SUBSCRIPTIONGROUP_CONFIG 201, DELETE_SUBSCRIPTIONGROUP 207) and offsets (GET_ALL_CONSUMER_OFFSET 43), who
is connected (GET_CONSUMER_CONNECTION_LIST 203, GET_PRODUCER_CONNECTION_LIST 204, QUERY_TOPIC_CONSUME_BY_WHO 300),
a group's offsets reset to a time (INVOKE_BROKER_TO_RESET_OFFSET 222, told to the online members with
RESET_CONSUMER_CLIENT_OFFSET 220, as RocketMQ's Broker2Client) and a member's running info asked of it
(GET_CONSUMER_RUNNING_INFO 307)."""
from __future__ import annotations

import json
import logging
import os

from remoting import LanguageCode, RemotingCommand, RequestCode, ResponseCode
from remoting import remoting_serializable as rs
from remoting.admin_bodies import MessageQueue, ResetOffsetBody
from remoting.broker_headers import (
    ConsumerGroupRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetProducerConnectionListRequestHeader,
    QueryTopicConsumeByWhoRequestHeader,
    ResetOffsetRequestHeader,
)
from store.offset_store import CONSUMER_OFFSET_FILE, read_offsets_file

from ..bad_request import BadRequest
from .request_processor import RequestProcessor, handles

log = logging.getLogger(__name__)

CALL_CLIENT_TIMEOUT_S = 10.0  # Broker2Client.callClient's
# MQVersion.Version ordinals: the oldest clients that take a reset, and that answer GET_CONSUMER_RUNNING_INFO
V3_0_7_SNAPSHOT, V3_1_8_SNAPSHOT = 28, 62


def _version_desc(version: int) -> str:
    return "V3_0_0_SNAPSHOT" if version == 0 else f"MQVersion ordinal {version}"


def _connection(client_id: str, channel, language: int, version: int) -> dict:
    """RocketMQ's Connection body."""
    name = LanguageCode(language).name if language in LanguageCode._value2member_map_ else "OTHER"
    return {"clientAddr": channel.remote_address, "clientId": client_id, "language": name, "version": version}


class AdminGroupProcessor(RequestProcessor):
    def __init__(self, broker):
        super().__init__()
        self.broker = broker
        self.store = broker.store

    @handles(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)
    async def update_group(self, h: None, cmd: RemotingCommand, channel) -> RemotingCommand:
        """mqadmin updateSubGroup: the SubscriptionGroupConfig body, kept in config/subscriptionGroup.json."""
        try:
            config = json.loads(cmd.body)
        except ValueError as e:
            raise BadRequest(f"the SubscriptionGroupConfig body is not JSON: {e}") from None
        if not isinstance(config, dict):
            raise BadRequest("the SubscriptionGroupConfig body is not a JSON object")
        self.broker.subscription_groups.update(config)
        return cmd.response(ResponseCode.SUCCESS)

    @handles(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
    async def all_groups(self, h: None, cmd: RemotingCommand, channel) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, body=rs.encode(self.broker.subscription_groups.wrapper()))

    @handles(RequestCode.GET_ALL_CONSUMER_OFFSET)
    async def all_offsets(self, h: None, cmd: RemotingCommand, channel) -> RemotingCommand:
        """ConsumerOffsetManager's table ({"offsetTable": {"topic@group": {queueId: offset}}}): every group's
        committed offsets, as consumerOffset.json holds them once the ones committed here are written."""
        self.broker.offsets.persist_all()
        table = read_offsets_file(os.path.join(self.store.path, CONSUMER_OFFSET_FILE)).get("offsetTable") or {}
        return cmd.response(ResponseCode.SUCCESS, body=rs.encode({"offsetTable": table}))

    @handles(RequestCode.DELETE_SUBSCRIPTIONGROUP, header=DeleteSubscriptionGroupRequestHeader)
    async def delete_group(self, h: DeleteSubscriptionGroupRequestHeader, cmd: RemotingCommand,
                           channel) -> RemotingCommand:
        """The group's config goes (with autoCreateSubscriptionGroup its next heartbeat creates it again, as in
        RocketMQ); removeOffset: its committed offsets too."""
        self.broker.subscription_groups.delete(h.group_name)
        if h.remove_offset:
            self.broker.offsets.remove_group(h.group_name)
        return cmd.response(ResponseCode.SUCCESS)

    @handles(RequestCode.GET_CONSUMER_CONNECTION_LIST, header=ConsumerGroupRequestHeader)
    async def consumer_connections(self, h: ConsumerGroupRequestHeader, cmd: RemotingCommand,
                                   channel) -> RemotingCommand:
        """ConsumerConnection: the group's online members, how they consume, and what they subscribe to."""
        clients = self.broker.consumers.clients(h.consumer_group)
        if not clients:
            raise BadRequest(f"the consumer group[{h.consumer_group}] not online", ResponseCode.CONSUMER_NOT_ONLINE)
        newest = max(clients.values(), key=lambda c: c.last_heartbeat)
        subscriptions: dict = {}
        for c in clients.values():
            subscriptions.update(c.subscriptions)
        body = {"connectionSet": [_connection(cid, c.channel, c.language, c.version) for cid, c in clients.items()],
                "consumeFromWhere": newest.consumer_data.get("consumeFromWhere"),
                "consumeType": newest.consumer_data.get("consumeType"),
                "messageModel": newest.consumer_data.get("messageModel"),
                "subscriptionTable": dict(sorted(subscriptions.items()))}
        return cmd.response(ResponseCode.SUCCESS, body=rs.encode(body))

    @handles(RequestCode.GET_PRODUCER_CONNECTION_LIST, header=GetProducerConnectionListRequestHeader)
    async def producer_connections(self, h: GetProducerConnectionListRequestHeader, cmd: RemotingCommand,
                                   channel) -> RemotingCommand:
        clients = self.broker.producers.groups.get(h.producer_group)
        if not clients:
            raise BadRequest(f"the producer group[{h.producer_group}] not exist", ResponseCode.SYSTEM_ERROR)
        body = {"connectionSet": [_connection(cid, p.channel, p.language, p.version)
                                  for cid, p in sorted(clients.items())]}
        return cmd.response(ResponseCode.SUCCESS, body=rs.encode(body))

    @handles(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, header=QueryTopicConsumeByWhoRequestHeader)
    async def consumed_by(self, h: QueryTopicConsumeByWhoRequestHeader, cmd: RemotingCommand,
                          channel) -> RemotingCommand:
        """GroupList: the online groups subscribing to the topic and the groups with offsets of it."""
        groups = set(self.broker.consumers.groups_of_topic(h.topic)) | set(self.broker.offsets.groups_of_topic(h.topic))
        return cmd.response(ResponseCode.SUCCESS, body=rs.encode({"groupList": sorted(groups)}))

    @handles(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, header=ResetOffsetRequestHeader)
    async def reset_offset(self, h: ResetOffsetRequestHeader, cmd: RemotingCommand, channel) -> RemotingCommand:
        """mqadmin resetOffsetByTime (Broker2Client.resetOffset): per queue the offset at the timestamp (-1: the
        max offset), taken when force or when it is before the group's committed one; the online members are told
        (RESET_CONSUMER_CLIENT_OFFSET, oneway) and move there themselves. An offline group is CONSUMER_NOT_ONLINE:
        the tool then commits the offsets itself (UPDATE_CONSUMER_OFFSET), as it does with a stock broker."""
        topic, group = h.topic, h.group
        if not self.store.has_topic(topic):
            raise BadRequest(f"[reset-offset] reset offset failed, no topic in this broker. topic={topic}")
        committed = self.broker.offsets.offsets(group)
        table: dict[MessageQueue, int] = {}
        for q in self.store.queues(topic):
            current = committed.read_offset((topic, q))
            if current == -1:
                raise BadRequest(f"THe consumer group <{group}> not exist")
            wanted = self.store.max_offset(topic, q) if h.timestamp == -1 else \
                self.store.offset_for_timestamp(topic, q, h.timestamp)
            wanted = max(0, wanted)
            table[MessageQueue(topic, self.broker.broker_name, q)] = wanted if h.is_force or wanted < current \
                else current
        clients = self.broker.consumers.clients(group)
        if not clients:
            raise BadRequest(f"Consumer not online, so can not reset offset, Group: {group} Topic: {topic} "
                             f"Timestamp: {h.timestamp}", ResponseCode.CONSUMER_NOT_ONLINE)
        for client in clients.values():
            if client.version < V3_0_7_SNAPSHOT:
                raise BadRequest("the client does not support this feature. version="
                                 f"{_version_desc(client.version)}")
        fields = ResetOffsetRequestHeader(topic, group, h.timestamp, False).to_ext_fields()
        if cmd.language == LanguageCode.CPP:  # ResetOffsetBodyForC: a list
            told = rs.encode({"offsetTable": [{**mq.to_json(), "offset": o} for mq, o in sorted(table.items())]})
        else:
            told = ResetOffsetBody(table).encode()
        for client_id, client in clients.items():
            note = RemotingCommand.request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, fields, body=told, oneway=True)
            client.channel.send_oneway_best_effort(note)
            log.info("[reset-offset] told %s of group %s to reset topic %s", client_id, group, topic)
        return cmd.response(ResponseCode.SUCCESS, body=ResetOffsetBody(table).encode())

    @handles(RequestCode.GET_CONSUMER_RUNNING_INFO, header=GetConsumerRunningInfoRequestHeader)
    async def running_info(self, h: GetConsumerRunningInfoRequestHeader, cmd: RemotingCommand,
                           channel) -> RemotingCommand:
        """Forwarded to the member (callConsumer); its answer is the answer."""
        client = self.broker.consumers.clients(h.consumer_group).get(h.client_id)
        if client is None:
            raise BadRequest(f"The Consumer <{h.consumer_group}> <{h.client_id}> not online")
        if client.version < V3_1_8_SNAPSHOT:
            raise BadRequest(f"The Consumer <{h.client_id}> Version <{_version_desc(client.version)}> too low to "
                             "finish, please upgrade it to V3_1_8_SNAPSHOT")
        ask = RemotingCommand.request(RequestCode.GET_CONSUMER_RUNNING_INFO, dict(cmd.ext_fields), body=cmd.body)
        try:
            answer = await client.channel.invoke(ask, CALL_CLIENT_TIMEOUT_S)
        except TimeoutError as e:
            raise BadRequest(f"consumer <{h.consumer_group}> <{h.client_id}> Timeout: {e}",
                             ResponseCode.CONSUME_MSG_TIMEOUT) from None
        except ConnectionError as e:
            raise BadRequest(f"invoke consumer <{h.consumer_group}> <{h.client_id}> Exception: {e}") from None
        return cmd.response(answer.code, answer.remark, ext_fields=dict(answer.ext_fields), body=answer.body)
