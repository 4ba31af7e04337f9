"""ConsumerManageProcessor: GET_CONSUMER_LIST_BY_GROUP 38, UPDATE_CONSUMER_OFFSET 15, QUERY_CONSUMER_OFFSET 14."""
from __future__ import annotations

import json

from remoting import RemotingCommand, RequestCode, ResponseCode
from remoting.broker_headers import (
    ConsumerGroupRequestHeader,
    OffsetResponseHeader,
    QueryConsumerOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from store import ReadOffsetType

from ..bad_request import BadRequest
from .request_processor import RequestProcessor, handles


class ConsumerManageProcessor(RequestProcessor):
    def __init__(self, broker):
        super().__init__()
        self.broker = broker
        self.store = broker.store

    @handles(RequestCode.GET_CONSUMER_LIST_BY_GROUP, header=ConsumerGroupRequestHeader)
    async def consumer_list(self, h: ConsumerGroupRequestHeader, cmd: RemotingCommand, channel) -> RemotingCommand:
        ids = self.broker.consumers.member_ids(h.consumer_group)
        if not ids:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"no consumer in group {h.consumer_group}")
        return cmd.response(ResponseCode.SUCCESS, body=json.dumps({"consumerIdList": ids}).encode())

    @handles(RequestCode.UPDATE_CONSUMER_OFFSET, header=UpdateConsumerOffsetRequestHeader)
    async def update_offset(self, h: UpdateConsumerOffsetRequestHeader, cmd: RemotingCommand,
                            channel) -> RemotingCommand:
        self.broker.topics.check_queue(h.topic, h.queue_id)
        if h.commit_offset < 0:
            raise BadRequest(f"commitOffset {h.commit_offset} is negative: a queue offset is 0 or more")
        self.broker.offsets.commit_offset(h.consumer_group, h.topic, h.queue_id, h.commit_offset, persist=True)
        return cmd.response(ResponseCode.SUCCESS)

    @handles(RequestCode.QUERY_CONSUMER_OFFSET, header=QueryConsumerOffsetRequestHeader)
    async def query_offset(self, h: QueryConsumerOffsetRequestHeader, cmd: RemotingCommand,
                           channel) -> RemotingCommand:
        topic, queue_id = h.topic, h.queue_id
        self.broker.topics.check_queue(topic, queue_id)
        offset = self.broker.offsets.offsets(h.consumer_group).read_offset((topic, queue_id),
                                                                           ReadOffsetType.MEMORY_FIRST_THEN_STORE)
        if offset >= 0:
            return cmd.response(ResponseCode.SUCCESS, ext_fields=OffsetResponseHeader(offset).to_ext_fields())
        # no offset yet: 0 while the queue still starts at 0 and its first message is in memory, so a new
        # consumer of a young topic gets everything (ConsumerManageProcessor.queryConsumerOffset)
        if self.store.min_offset(topic, queue_id) == 0 and \
                not self.store.check_in_disk_by_consume_offset(topic, queue_id, 0):
            return cmd.response(ResponseCode.SUCCESS, ext_fields=OffsetResponseHeader(0).to_ext_fields())
        return cmd.response(ResponseCode.QUERY_NOT_FOUND, "Not found, V3_0_6_SNAPSHOT maybe this group consumer "
                                                          "boot first")
