"""PlainAccessResource: what one request asks (PlainAccessValidator.parse): who (AccessKey, Signature, the client's
host), which resources with which permission, and the content its signature covers. A group is the resource
%RETRY%<group>, as in RocketMQ, so a group's retry topic and the group are one resource."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Optional

from remoting.broker_headers import read_send_header
from remoting.codes import RequestCode

from .acl_exception import AclException
from .acl_utils import combine_request_content
from .permission import ANY, PUB, SUB
from .session_credentials import ACCESS_KEY, SECURITY_TOKEN, SIGNATURE

RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
RMQ_SYS_TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
CLIENT_INNER_PRODUCER_GROUP = "CLIENT_INNER_PRODUCER"  # every Java client's heartbeat names it (MixAll)
UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"
# requests of clients up to 4.9.3 (MQVersion.Version.V4_9_3 is 399) are checked without _UNIQUE_KEY_QUERY, as
# RocketMQ 5 checks them (its 4.9 broker always left the flag out)
V4_9_3 = 399


def retry_topic(group: Optional[str]) -> Optional[str]:
    return None if group is None else RETRY_GROUP_TOPIC_PREFIX + group


def is_retry_topic(resource: Optional[str]) -> bool:
    return resource is not None and resource.startswith(RETRY_GROUP_TOPIC_PREFIX)


def print_str(resource: str) -> str:
    """topic:NAME or group:NAME, as RocketMQ's messages name a resource."""
    if is_retry_topic(resource):
        return "group:" + resource[len(RETRY_GROUP_TOPIC_PREFIX):]
    return "topic:" + resource


@dataclass
class PlainAccessResource:
    request_code: int
    host: str  # the client's address without its port
    access_key: Optional[str] = None
    signature: Optional[str] = None
    secret_token: Optional[str] = None
    resources: dict[str, int] = field(default_factory=dict)
    content: bytes = b""  # the extFields' part of the signed content; the body follows it
    body: bytes = b""

    def add(self, resource: Optional[str], perm: int) -> None:
        if resource is not None:
            self.resources[resource] = perm


def _send_resource(resource: PlainAccessResource, topic: Optional[str], group: Optional[str]) -> None:
    # a consumer sending to its group's retry topic needs the group (SUB), not the topic: the group the retry topic
    # names, whatever group the header claims (RocketMQ 4.x checks only the header's, and nothing without one)
    if is_retry_topic(topic):
        resource.add(retry_topic(group), SUB)
        resource.add(topic, SUB)
    else:
        resource.add(topic, PUB)


def parse(cmd, remote_address: Optional[str]) -> PlainAccessResource:
    """The resources a request touches. Beyond RocketMQ 4.9: SEND_BATCH_MESSAGE is checked as a send (RocketMQ
    5 does; 4.9 lets a batch through unchecked) and QUERY_CONSUMER_OFFSET as UPDATE_CONSUMER_OFFSET is."""
    host = remote_address or ""
    if ":" in host:
        host = host[:host.rfind(":")].strip("[]")
    if host.lower().startswith("::ffff:") and "." in host:  # an IPv4 client of a dual-stack socket, as Java sees it
        host = host[len("::ffff:"):]
    resource = PlainAccessResource(cmd.code, host)
    ext = cmd.ext_fields
    resource.access_key, resource.signature = ext.get(ACCESS_KEY), ext.get(SIGNATURE)
    resource.secret_token = ext.get(SECURITY_TOKEN)
    code = cmd.code
    if code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
        # read as the broker reads it (short V2 names, or the long ones); a header that does not read is refused
        # here as the broker would refuse it (HeaderFieldError: SYSTEM_ERROR naming the field)
        header = read_send_header(code, ext)
        # RocketMQ 4.9 names the retry topic's group by `group` beside the long names, by producerGroup (`a`) in V2
        group = ext.get("group") if code == RequestCode.SEND_MESSAGE else header.producer_group
        _send_resource(resource, header.topic or None, group)
    elif code == RequestCode.CONSUMER_SEND_MSG_BACK:
        resource.add(retry_topic(ext.get("group")), SUB)
    elif code == RequestCode.PULL_MESSAGE:
        resource.add(ext.get("topic"), SUB)
        resource.add(retry_topic(ext.get("consumerGroup")), SUB)
    elif code == RequestCode.QUERY_MESSAGE:
        resource.add(ext.get("topic"), SUB)
    elif code == RequestCode.HEART_BEAT:
        _heartbeat_resources(resource, cmd.body)
    elif code in (RequestCode.UNREGISTER_CLIENT, RequestCode.GET_CONSUMER_LIST_BY_GROUP):
        resource.add(retry_topic(ext.get("consumerGroup")), SUB)
    elif code in (RequestCode.UPDATE_CONSUMER_OFFSET, RequestCode.QUERY_CONSUMER_OFFSET):
        resource.add(retry_topic(ext.get("consumerGroup")), SUB)
        resource.add(ext.get("topic"), SUB)
    excluded = (SIGNATURE, UNIQUE_MSG_QUERY_FLAG) if cmd.version <= V4_9_3 else (SIGNATURE,)
    resource.content = combine_request_content(ext, excluded)
    resource.body = cmd.body
    return resource


def _heartbeat_resources(resource: PlainAccessResource, body) -> None:
    """Every consumer group of the heartbeat (SUB), every topic its members subscribe to (SUB), and every producer
    group it registers (PUB or SUB: a producer group receives its transactions' check-backs, which RocketMQ 4.x
    hands to any client claiming the group)."""
    try:
        data = json.loads(bytes(body)) if body else {}
        for producer in data.get("producerDataSet") or []:
            group = str(producer["groupName"])
            if group != CLIENT_INNER_PRODUCER_GROUP:
                resource.add(retry_topic(group), ANY)
        for consumer in data.get("consumerDataSet") or []:
            resource.add(retry_topic(str(consumer["groupName"])), SUB)
            for sub in consumer.get("subscriptionDataSet") or []:
                resource.add(str(sub["topic"]), SUB)
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise AclException(f"the heartbeat body does not name its groups and topics: {type(e).__name__}: {e}") \
            from None
