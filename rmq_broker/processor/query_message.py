"""QueryMessageProcessor: QUERY_MESSAGE 12, the messages a key (or, with ext field _UNIQUE_KEY_QUERY=true, a unique
key) finds in the index, their stored records back to back (hash collisions included: the client checks the keys,
as against RocketMQ's broker); VIEW_MESSAGE_BY_ID 33, the record at a commitlog offset (the offset part of a
msgId)."""
from __future__ import annotations

from remoting import RemotingCommand, RequestCode, ResponseCode
from remoting.broker_headers import QueryMessageRequestHeader, QueryMessageResponseHeader, ViewMessageRequestHeader
from rmq_common import message_codec as codec

from .request_processor import RequestProcessor, handles

UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"  # MixAll.UNIQUE_MSG_QUERY_FLAG


class QueryMessageProcessor(RequestProcessor):
    def __init__(self, broker):
        super().__init__()
        self.broker = broker
        self.store = broker.store

    @handles(RequestCode.QUERY_MESSAGE, header=QueryMessageRequestHeader)
    async def query_message(self, h: QueryMessageRequestHeader, cmd: RemotingCommand, channel) -> RemotingCommand:
        max_num = h.max_num
        if (cmd.ext_fields or {}).get(UNIQUE_MSG_QUERY_FLAG) == "true":
            max_num = self.store.config.defaultQueryMaxNum
        records, last_ts, last_phy = self.store.query_records(h.topic, h.key, max_num, h.begin_timestamp,
                                                              h.end_timestamp)
        head = QueryMessageResponseHeader(last_ts, last_phy).to_ext_fields()
        if not records:
            return cmd.response(ResponseCode.QUERY_NOT_FOUND, "can not find message, maybe time range not correct",
                                ext_fields=head)
        return cmd.response(ResponseCode.SUCCESS, ext_fields=head, body=records)

    @handles(RequestCode.VIEW_MESSAGE_BY_ID, header=ViewMessageRequestHeader)
    async def view_message(self, h: ViewMessageRequestHeader, cmd: RemotingCommand, channel) -> RemotingCommand:
        try:
            found = self.store.look_message_by_offset(h.offset)
        except codec.RecordFormatError as e:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"no message at offset {h.offset}: {e}")
        if found is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"no message at offset {h.offset}")
        self.broker.check_message_access(cmd, channel, found[0].topic)
        return cmd.response(ResponseCode.SUCCESS, body=found[1])
