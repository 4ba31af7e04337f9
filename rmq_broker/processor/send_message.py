"""SendMessageProcessor: SEND_MESSAGE 10, SEND_MESSAGE_V2 310, SEND_BATCH_MESSAGE 320 (each with the long or the
short V2 header, read one way with the ACL: remoting.broker_headers.read_send_header), half messages of a
transaction, delayed messages, and CONSUMER_SEND_MSG_BACK 36 (a message a consumer failed goes to its group's
retry topic after a delay level, or to its dead-letter topic)."""
from __future__ import annotations

import functools
import logging
import time
from typing import Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from remoting import RemotingCommand, RequestCode, ResponseCode
from remoting.broker_headers import (
    ConsumerSendMsgBackRequestHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
    read_send_header,
)
from remoting.remoting_server import ResponseCallback
from remoting.request_frame import send_ok
from rmq_common import message_codec as codec
from rmq_common import native
from rmq_common.message_properties import PropertiesText, parse_properties
from store import StoreError
from store.put_one import build_plain, canonical_text

from ..bad_request import REFUSED, BadRequest, refusal
from ..schedule_message_service import PROPERTY_DELAY
from ..send_coalescer import SendCoalescer
from ..topic_validator import refuse_illegal_queue
from ..transactional_message_service import (
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TRANSACTION_BATCH,
    PROPERTY_TRANSACTION_PREPARED,
)
from .request_processor import RequestProcessor, handles

log = logging.getLogger(__name__)

RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"


# what the usual send may not hold: a delay and a transaction half take the general way
_UNUSUAL = (PROPERTY_DELAY, PROPERTY_TRANSACTION_PREPARED)


def _or(value, default):
    return default if value is None else value


class SendMessageProcessor(RequestProcessor):
    def __init__(self, broker):
        super().__init__()
        self.broker = broker
        self.store = broker.store
        self.coalescer = SendCoalescer(broker)
        self._hosts: dict[str, tuple[bytes, int]] = {}  # a connection's address as stored in BORNHOST

    def _response(self, cmd: RemotingCommand, msg_id: str, queue_id: int, queue_offset: int,
                  transaction_id: Optional[str] = None) -> RemotingCommand:
        answer = SendMessageResponseHeader(msg_id, queue_id, queue_offset, transaction_id)
        return cmd.response(ResponseCode.SUCCESS, ext_fields={**answer.to_ext_fields(), "MSG_REGION": "DefaultRegion",
                                                              "TRACE_ON": "false"})

    @handles(RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, header=read_send_header)
    def send(self, h: SendMessageRequestHeader, cmd: RemotingCommand, channel):
        """Answered at once to a topic that exists (under SYNC_FLUSH, once the group commit covers the record); a
        topic to create first is awaited."""
        if not self.broker.topics.ready_for_send(h.topic):
            return self._after_topic(self._send, h, cmd, channel)
        return self._send(h, cmd, channel)

    @handles(RequestCode.SEND_BATCH_MESSAGE, header=read_send_header)
    def send_batch(self, h: SendMessageRequestHeader, cmd: RemotingCommand, channel):
        """A MessageBatch body (each message as MessageDecoder.encodeMessage writes it) appended in one write, so
        its messages get consecutive queue offsets."""
        if not self.broker.topics.ready_for_send(h.topic):
            return self._after_topic(self._send_batch, h, cmd, channel)
        return self._send_batch(h, cmd, channel)

    async def _after_topic(self, send, h: SendMessageRequestHeader, cmd: RemotingCommand, channel):
        await self.broker.topics.topic_for_send(h.topic, h.default_topic_queue_nums)
        answer = send(h, cmd, channel)
        return None if isinstance(answer, ResponseCallback) else answer  # a callback answers by itself

    def _send(self, h: SendMessageRequestHeader, cmd: RemotingCommand, channel):
        topic = h.topic
        queue_id = _or(h.queue_id, -1)
        refuse_illegal_queue(topic, queue_id, self.store.queue_count(topic))
        sys_flag = _or(h.sys_flag, 0) & ~codec.RESERVED_SYS_FLAGS & ~codec.TRANSACTION_TYPE_MASK
        flag, born_timestamp = _or(h.flag, 0), _or(h.born_timestamp, int(time.time() * 1000))
        reconsume_times = _or(h.reconsume_times, 0)
        put_args = dict(flag=flag, sys_flag=sys_flag, born_timestamp=born_timestamp, born_host=channel.remote_address,
                        reconsume_times=reconsume_times)
        # the usual send (RocketMQ's clients': a canonical properties text holding its UNIQ_KEY, no delay or
        # transaction, an uncompressed body) has its record built in one compiled call; any other takes the
        # general way below, which also words the errors
        if h.properties and not sys_flag & codec.COMPRESSED_FLAG:
            one = build_plain(self.store, topic, cmd.body, h.properties, flag, sys_flag, born_timestamp,
                              self._born_host(channel.remote_address), reconsume_times, _UNUSUAL)
            if one is not None:
                args = dict(topic=topic, body=cmd.body, properties=None, properties_text=h.properties,
                            queue_id=None if queue_id < 0 else queue_id, **put_args)
                return self.coalescer.put(args, channel.response_callback(cmd),
                                          functools.partial(self._put_answer, cmd), one)
        properties = parse_properties(h.properties)
        undecompressable = codec.body_decompress_error(cmd.body, sys_flag)
        if undecompressable is not None:  # stored, it would stop every read of its queue
            raise BadRequest(f"the body does not decompress as its sysFlag {sys_flag} says: {undecompressable}",
                             ResponseCode.MESSAGE_ILLEGAL)
        prepared = properties.get(PROPERTY_TRANSACTION_PREPARED) == "true"
        delay_text = properties.pop(PROPERTY_DELAY, None)
        delay = int(delay_text) if delay_text is not None and delay_text.isdigit() else 0
        if prepared or delay > 0:
            self.coalescer.flush()  # the sends read before this one are appended before it
            if prepared:
                texts = pa.array([h.properties or ""], pa.string())
                return self._prepare(cmd, topic, queue_id, pa.array([cmd.body], pa.binary()), texts,
                                     PropertiesText(texts), put_args)
            if queue_id < 0:  # a delayed message: waits its level out
                queue_id = self.store.take_round_robin(topic, self.store.queue_count(topic), 1)
            try:
                result = self.broker.schedule.schedule(topic, queue_id, cmd.body, properties, delay, **put_args)
            except ValueError as e:
                raise BadRequest(str(e), ResponseCode.MESSAGE_ILLEGAL) from None
            return self._response(cmd, result.msg_id, result.queue_id, result.queue_offset)
        text = canonical_text(h.properties, properties) if delay_text is None else None
        return self.coalescer.put(dict(topic=topic, body=cmd.body, properties=properties or None,
                                       properties_text=text, queue_id=None if queue_id < 0 else queue_id,
                                       **put_args),
                                  channel.response_callback(cmd), lambda result: self._put_answer(cmd, result))

    def _born_host(self, address: str) -> tuple[bytes, int]:
        host = self._hosts.get(address)
        if host is None:
            if len(self._hosts) >= 4096:  # connections come and go
                self._hosts.clear()
            host = self._hosts[address] = codec.parse_host(address)
        return host

    def _put_answer(self, cmd: RemotingCommand, result):
        """A coalesced send's answer: SEND_OK with where it went (its frame), or the store's refusal."""
        refused = _put_refusal(cmd, result)
        if refused is not None:
            return refused
        return send_ok(cmd, result.msg_id, result.queue_id, result.queue_offset) or \
            self._response(cmd, result.msg_id, result.queue_id, result.queue_offset)

    def _batch_answer(self, h: SendMessageRequestHeader, cmd: RemotingCommand, channel, queue_id: int,
                      result) -> RemotingCommand:
        """A coalesced batch's answer; one that is not the usual batch is put here, in its turn."""
        refused = _put_refusal(cmd, result)
        if refused is not None:
            return refused
        if result is None:
            try:
                return self._send_batch_general(h, cmd, channel, queue_id)
            except REFUSED as e:
                return refusal(cmd, e)
        ids = codec.message_ids_text(result.store_host[0], result.store_host[1], result.commit_log_offsets)
        return self._response(cmd, ids, queue_id, int(result.queue_offsets[0]))

    def _send_batch(self, h: SendMessageRequestHeader, cmd: RemotingCommand, channel):
        queue_id = _or(h.queue_id, -1)
        if queue_id < 0:
            queue_id = self.store.take_round_robin(h.topic, self.store.queue_count(h.topic), 1)
        if not cmd.body:
            self.coalescer.flush()  # the sends read before this one are appended before it
            return self._send_batch_general(h, cmd, channel, queue_id)
        # the usual batch: straight from the body into records, as RocketMQ's putMessages does
        born_timestamp = _or(h.born_timestamp, int(time.time() * 1000))
        return self.coalescer.put_batch((h.topic, cmd.body, queue_id, born_timestamp, channel.remote_address),
                                        channel.response_callback(cmd),
                                        lambda result: self._batch_answer(h, cmd, channel, queue_id, result))

    def _send_batch_general(self, h: SendMessageRequestHeader, cmd: RemotingCommand, channel,
                            queue_id: int) -> RemotingCommand:
        """A batch that is not the usual one: decoded into columns, put_batch (which words the errors) or the
        halves of a transaction."""
        topic = h.topic
        bodies, flags, props = decode_message_batch(cmd.body)
        if not len(bodies):
            raise BadRequest("the batch holds no message", ResponseCode.MESSAGE_ILLEGAL)
        born_timestamp = _or(h.born_timestamp, int(time.time() * 1000))
        if props is not None:
            looked = PropertiesText(props)
            prepared = pc.equal(looked.column(PROPERTY_TRANSACTION_PREPARED), "true")
            if pc.any(prepared).as_py():
                if not pc.all(pc.fill_null(prepared, False)).as_py():
                    raise BadRequest(f"the batch mixes transactional messages ({PROPERTY_TRANSACTION_PREPARED}=true) "
                                     "with others", ResponseCode.MESSAGE_ILLEGAL)
                return self._prepare(cmd, topic, queue_id, bodies, props, looked, dict(
                    born_timestamp=born_timestamp, born_host=channel.remote_address))
        try:
            result = self.store.put_batch(topic, bodies, properties=props, queue_id=queue_id, flag=flags,
                                          born_timestamp=born_timestamp, born_host=channel.remote_address)
        except ValueError as e:
            raise BadRequest(str(e), ResponseCode.MESSAGE_ILLEGAL) from None
        self.broker.arrived(topic, queue_id, len(bodies))
        ids = codec.message_ids_text(result.store_host[0], result.store_host[1], result.commit_log_offsets)
        return self._response(cmd, ids, queue_id, int(result.queue_offsets[0]))

    def _prepare(self, cmd: RemotingCommand, topic: str, queue_id: int, bodies, props: pa.StringArray,
                 looked: PropertiesText, put_args: dict) -> RemotingCommand:
        """Half messages (TRAN_MSG=true; props: their properties texts): kept in the half topic until
        END_TRANSACTION; the response names the halves (queueOffset: the first's offset in the half queue, msgId:
        theirs) as RocketMQ's does."""
        looked.prefetch([PROPERTY_PRODUCER_GROUP, PROPERTY_TRANSACTION_BATCH, codec.PROPERTY_UNIQ_KEY])  # one pass
        groups = looked.column(PROPERTY_PRODUCER_GROUP)
        if groups.null_count:
            raise BadRequest(f"a transactional message has no {PROPERTY_PRODUCER_GROUP} property (its producer "
                             "group, asked when its outcome never comes)", ResponseCode.MESSAGE_ILLEGAL)
        queues = self.store.queue_count(topic)
        if queue_id < 0:
            queue_id = self.store.take_round_robin(topic, queues, 1)
        if not 0 <= queue_id < queues:
            raise BadRequest(f"queueId {queue_id}: topic {topic} has queues 0..{queues - 1}")
        try:
            result = self.broker.transactions.prepare(topic, queue_id, bodies, props, **put_args)
        except ValueError as e:
            raise BadRequest(str(e), ResponseCode.MESSAGE_ILLEGAL) from None
        ids = codec.message_ids_text(result.store_host[0], result.store_host[1], result.commit_log_offsets)
        # the batch's id when its halves share one (decided together), else the message's UNIQ_KEY as RocketMQ's
        uniq = looked.column(PROPERTY_TRANSACTION_BATCH)[0].as_py() or looked.column(codec.PROPERTY_UNIQ_KEY)[0].as_py()
        return self._response(cmd, ids, queue_id, int(result.queue_offsets[0]),
                              uniq or ids.split(",")[0])

    @handles(RequestCode.CONSUMER_SEND_MSG_BACK, header=ConsumerSendMsgBackRequestHeader)
    async def send_back(self, h: ConsumerSendMsgBackRequestHeader, cmd: RemotingCommand,
                        channel) -> RemotingCommand:
        """A message the consumer failed goes to %RETRY%<group> after the next delay level, or to %DLQ%<group> once
        it was reconsumed maxReconsumeTimes times."""
        group = h.group
        group_config = self.broker.subscription_groups.consumable(group)
        try:
            found = self.store.look_message_by_offset(h.offset)
        except codec.RecordFormatError as e:
            raise BadRequest(f"the message at offset {h.offset}: {e}") from None
        if found is None:
            raise BadRequest(f"look message by offset failed, {h.offset}")
        msg = found[0]
        self.broker.check_message_access(cmd, channel, msg.topic)
        props = dict(msg.properties)
        props.setdefault(PROPERTY_RETRY_TOPIC, msg.topic)
        props[PROPERTY_ORIGIN_MESSAGE_ID] = h.origin_msg_id or props.get(codec.PROPERTY_UNIQ_KEY, "")
        delay_level = _or(h.delay_level, 0)
        group_max = int(group_config.get("retryMaxTimes", self.broker.broker_config.maxReconsumeTimes))
        max_times = _or(h.max_reconsume_times, group_max)
        if max_times < 0:
            max_times = group_max
        put_args = dict(flag=msg.flag, born_timestamp=msg.born_timestamp, reconsume_times=msg.reconsume_times + 1)
        if msg.reconsume_times >= max_times or delay_level < 0:
            dlq = DLQ_GROUP_TOPIC_PREFIX + group
            await self.broker.topics.create_system_topic(dlq)
            self.store.put(dlq, msg.body, properties=props, queue_id=0, **put_args)
            log.info("message %s of group %s went to %s after %d reconsumes", props[PROPERTY_ORIGIN_MESSAGE_ID],
                     group, dlq, msg.reconsume_times)
        else:
            retry = RETRY_GROUP_TOPIC_PREFIX + group
            await self.broker.topics.create_system_topic(retry)
            level = delay_level if delay_level > 0 else 3 + msg.reconsume_times
            self.broker.schedule.schedule(retry, 0, msg.body, props, level, **put_args)
        return cmd.response(ResponseCode.SUCCESS)


def decode_message_batch(body: bytes | bytearray) -> tuple[pa.Array, np.ndarray, Optional[pa.StringArray]]:
    """MessageBatch's body: per message TOTALSIZE i32, MAGICCODE i32, BODYCRC i32, FLAG i32, BODY (i32 length),
    PROPERTIES (i16 length); BadRequest naming the message that does not decode. The bodies as a binary column,
    the FLAGs, and the properties texts as a string column (None when no message has any), ready for put_batch,
    which stores them as they came."""
    try:
        body_starts, body_lengths, props_starts, props_lengths = native.message_batch_spans(body)
    except ValueError as e:
        raise BadRequest(str(e), ResponseCode.MESSAGE_ILLEGAL) from None
    bodies = native.gather_spans(body, body_starts, body_starts + body_lengths)
    raw = np.frombuffer(body, dtype=np.uint8)
    flag_bytes = raw[(body_starts - 8)[:, None] + np.arange(4)] if len(body_starts) else np.zeros((0, 4), np.uint8)
    flags = np.ascontiguousarray(flag_bytes).view(">i4").ravel().astype(np.int32)
    if not props_lengths.any():
        return bodies, flags, None
    texts = native.gather_spans(body, props_starts, props_starts + props_lengths, pa.string())
    try:
        texts.validate(full=True)  # UTF-8
    except pa.ArrowInvalid as e:
        raise BadRequest(f"a batch message's properties are not UTF-8: {e}", ResponseCode.MESSAGE_ILLEGAL) from None
    return bodies, flags, texts


def _put_refusal(cmd: RemotingCommand, result) -> Optional[RemotingCommand]:
    """The answer to a send the store refused (result: its error), or None."""
    if isinstance(result, ValueError):
        return cmd.response(ResponseCode.MESSAGE_ILLEGAL, str(result))
    if isinstance(result, StoreError):
        return refusal(cmd, result)
    if isinstance(result, Exception):
        raise result
    return None
