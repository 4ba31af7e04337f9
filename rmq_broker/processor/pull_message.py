"""PullMessageProcessor: PULL_MESSAGE 11. The store's getMessage as the records' stored bytes (sent as they lie),
the subscription's filter (a TAG filter decided on the consume queue's tag codes, as RocketMQ's broker does:
clients re-check the tag of what they receive; SQL92 on the records' properties), the offset commit the pull
carries, and long polling: a pull that finds nothing new is held by the broker's PullRequestHoldService."""
from __future__ import annotations

from typing import Optional

from filters import MessageFilter
from remoting import RemotingCommand, RequestCode, ResponseCode
from remoting.broker_headers import PullMessageRequestHeader, PullMessageResponseHeader
from remoting.remoting_server import LARGE_BODY
from store import GetMessageStatus
from store.held_read import HeldPull

from ..bad_request import BadRequest
from ..selector_cache import check_selector_type
from ..topic_service import PERM_READ
from .request_processor import RequestProcessor, handles

# PullSysFlag
FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4
MAX_MSG_NUMS = 65536  # maxTransferCountOnMessageInMemory bounds a pull further

_PULL_STATUS = {
    GetMessageStatus.FOUND: ResponseCode.SUCCESS,
    GetMessageStatus.NO_MATCHED_MESSAGE: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetMessageStatus.MESSAGE_WAS_REMOVING: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetMessageStatus.OFFSET_FOUND_NULL: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.NO_MESSAGE_IN_QUEUE: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_OVERFLOW_ONE: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_OVERFLOW_BADLY: ResponseCode.PULL_OFFSET_MOVED,
    GetMessageStatus.OFFSET_TOO_SMALL: ResponseCode.PULL_OFFSET_MOVED,
    GetMessageStatus.NO_MATCHED_LOGIC_QUEUE: ResponseCode.PULL_NOT_FOUND,
}


class PullMessageProcessor(RequestProcessor):
    def __init__(self, broker):
        super().__init__()
        self.broker = broker
        self.store = broker.store
        self.hold = broker.hold

    def _subscription(self, h: PullMessageRequestHeader) -> tuple[str, str, int]:
        """(expression type, expression, version) of the pull's subscription, or of the last heartbeat's."""
        group, topic = h.consumer_group, h.topic
        if h.sys_flag & FLAG_SUBSCRIPTION:
            return h.expression_type or "TAG", h.subscription or "*", h.sub_version
        client_sub = self.broker.consumers.subscription(group, topic)
        if client_sub is None:
            raise BadRequest(f"the consumer's subscription of {topic} in group {group} does not exist",
                             ResponseCode.SUBSCRIPTION_NOT_EXIST)
        try:
            latest = int(client_sub.get("subVersion") or 0)
        except (TypeError, ValueError):
            latest = 0
        if latest < h.sub_version:
            raise BadRequest(f"the consumer's subscription of {topic} in group {group} is not the latest (the pull "
                             "names a newer one than the last heartbeat)", ResponseCode.SUBSCRIPTION_NOT_LATEST)
        return str(client_sub.get("expressionType") or "TAG"), str(client_sub.get("subString") or "*"), latest

    @handles(RequestCode.PULL_MESSAGE, header=PullMessageRequestHeader)
    def pull(self, h: PullMessageRequestHeader, cmd: RemotingCommand, channel):
        """Answered at once when the subscription's filter is built (or none) and the queue has something to say;
        a filter to build, or a pull to hold, is awaited."""
        self.broker.subscription_groups.consumable(h.consumer_group)
        self.broker.topics.check_queue(h.topic, h.queue_id)
        self.broker.topics.check_permission(h.topic, PERM_READ, "pulling")
        # the subscription's filter: the one the pull carries (FLAG_SUBSCRIPTION), else the one its group's members
        # sent in their heartbeats; built once per subscription version, off the event loop (the SelectorCache)
        kind, expression, version = self._subscription(h)
        check_selector_type(kind, self.broker.broker_config.enablePropertyFilter)
        built = self.broker.selectors.get_now(h.consumer_group, h.topic, kind, expression, version)
        if built is None:
            return self._pull_built(h, cmd, channel, kind, expression, version)
        return self._pull_with(h, cmd, channel, *built)

    async def _pull_built(self, h: PullMessageRequestHeader, cmd: RemotingCommand, channel, kind: str,
                          expression: str, version: int) -> RemotingCommand:
        built = await self.broker.selectors.get(h.consumer_group, h.topic, kind, expression, version)
        answer = self._pull_with(h, cmd, channel, *built)
        return answer if isinstance(answer, RemotingCommand) else await answer

    def _pull_with(self, h: PullMessageRequestHeader, cmd: RemotingCommand, channel,
                   message_filter: Optional[MessageFilter], sql: bool):
        """The pull with its filter: its offset commit, the store's answer, or the held pull to await."""
        if h.sys_flag & FLAG_COMMIT_OFFSET and h.commit_offset >= 0:
            self.broker.offsets.commit_offset(h.consumer_group, h.topic, h.queue_id, h.commit_offset)
        suspend_ms = h.suspend_timeout_millis if h.sys_flag & FLAG_SUSPEND else 0
        if suspend_ms and not self.broker.broker_config.longPollingEnable:
            suspend_ms = self.broker.broker_config.shortPollingTimeMills
        held = HeldPull(h.queue_offset, suspend_ms / 1000)
        max_msgs = max(1, min(h.max_msg_nums, MAX_MSG_NUMS))
        while True:
            result, body = self.store.get_message_records(h.topic, h.queue_id, held.offset, max_msgs, message_filter,
                                                          by_properties=sql)
            wait_s = self._wait_s(channel, held, result, suspend_ms)
            if wait_s is None:
                return self._answer(cmd, held, result, body)
            if wait_s:  # held: read again from held.offset once something may have arrived
                return self._held(h, cmd, channel, held, max_msgs, message_filter, sql, suspend_ms)

    def _wait_s(self, channel, held: HeldPull, result, suspend_ms: int):
        """How long the pull waits before reading again (0: at once), or None: the result is the answer."""
        # an empty queue is waited on from offset 0 only: past it the answer is PULL_OFFSET_MOVED (to 0)
        empty_past = result.status == GetMessageStatus.NO_MESSAGE_IN_QUEUE and held.offset != 0
        wait_s = held.wait_s(result) if suspend_ms and not empty_past else None
        if channel.closed.is_set() or self.broker.stopping:
            return None
        return wait_s

    async def _held(self, h: PullMessageRequestHeader, cmd: RemotingCommand, channel, held: HeldPull, max_msgs: int,
                    message_filter: Optional[MessageFilter], sql: bool, suspend_ms: int) -> RemotingCommand:
        wait_s: Optional[float] = 0.0
        while True:
            if wait_s:
                with channel.holding():  # not counted among the connection's busy requests while it waits
                    await self.hold.suspend(h.topic, h.queue_id, held.offset, wait_s)
            # read again before waiting: the first read and this task's start are a turn of the loop apart
            result, body = self.store.get_message_records(h.topic, h.queue_id, held.offset, max_msgs, message_filter,
                                                          by_properties=sql)
            wait_s = self._wait_s(channel, held, result, suspend_ms)
            if wait_s is None:
                return self._answer(cmd, held, result, body)

    def _answer(self, cmd: RemotingCommand, held: HeldPull, result, body) -> RemotingCommand:
        result = held.answer(result)
        self.broker.stats.got(result.message_count)
        code = _PULL_STATUS[result.status]
        if result.status == GetMessageStatus.NO_MESSAGE_IN_QUEUE and held.offset != 0:
            code = ResponseCode.PULL_OFFSET_MOVED  # past the end of an empty queue: moved to 0, as RocketMQ does
        if result.status != GetMessageStatus.FOUND or body is None:
            data = b""
        else:
            data = body.tobytes() if len(body) < LARGE_BODY else body.data
        answer = PullMessageResponseHeader(0, result.next_begin_offset, result.min_offset, result.max_offset)
        return cmd.response(code, remark=str(result.status), body=data,
                            ext_fields=answer.to_ext_fields())
