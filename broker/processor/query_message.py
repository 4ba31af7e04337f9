"""QueryMessageProcessor: VIEW_MESSAGE_BY_ID 33, the record at a commitlog offset (the offset part of a msgId)."""
from __future__ import annotations

from remoting import RemotingCommand, RequestCode, ResponseCode
from remoting.broker_headers import ViewMessageRequestHeader
from store import message_codec as codec

from .request_processor import RequestProcessor, handles


class QueryMessageProcessor(RequestProcessor):
    def __init__(self, broker):
        super().__init__()
        self.broker = broker
        self.store = broker.store

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
