"""A transactional producer (RocketMQ's TransactionMQProducer), in two forms:

- per message, as Apache RocketMQ's brokers take it: each message a half of its own (SEND_MESSAGE_V2 with
  TRAN_MSG=true, PGROUP and the prepared sys flag), ended by one END_TRANSACTION 37 each (`send_half_messages`,
  `end_half_messages`, both pipelined: many requests in flight on one connection, none waits a round trip);
- batch-wise, as `rmq serve` also takes it: halves sent with SEND_BATCH_MESSAGE (one TRAN_BATCH id per batch),
  ended together by one END_TRANSACTION with tranStateTableCount (`send_halves`, `end`).

Heartbeats register the producer group with brokers, and a `checker` answers their CHECK_TRANSACTION_STATE 39
for halves whose outcome they never heard."""
from __future__ import annotations

import asyncio
import base64
import enum
import json
import logging
import time
import uuid
from dataclasses import asdict, dataclass
from typing import Awaitable, Callable, Optional, Sequence

import numpy as np

from remoting import RemotingCommand, RequestCode, ResponseCode
from remoting.broker_headers import SendMessageResponseHeader, v2_send_fields
from remoting.local_address import local_address
from rmq_acl import SessionCredentials
from rmq_common import message_codec as codec

from .errors import NOT_STORED_OK, MQClientError
from .mq_client_api import MessageQueue, MQClientAPI
from .producer import DEFAULT_TOPIC_QUEUE_NUMS

log = logging.getLogger(__name__)

PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
PROPERTY_PRODUCER_GROUP = "PGROUP"
PROPERTY_TRANSACTION_BATCH = "TRAN_BATCH"
TRANSACTION_PREPARED_TYPE = 0x4
HEARTBEAT_INTERVAL_S = 30.0  # RocketMQ's heartbeatBrokerInterval
SEND_WINDOW = 512  # single halves or ENDs in flight on one broker connection
# A stock broker sheds load with SYSTEM_BUSY (its send queue full, or a request waited there too long): not stored,
# worth sending again after a pause.
_BUSY = (ResponseCode.SYSTEM_BUSY,)


class TransactionState(enum.IntEnum):
    """LocalTransactionState as the END_TRANSACTION frame carries it (MessageSysFlag)."""
    UNKNOW = 0
    COMMIT_MESSAGE = 8
    ROLLBACK_MESSAGE = 12


class EndOutcome(enum.Enum):
    DONE = "done"              # decided now, or decided the same way before
    OPPOSITE = "opposite"      # the broker had decided the other way (TRANSACTION_SHOULD_COMMIT / _ROLLBACK)


@dataclass(frozen=True)
class HalfBatch:
    """Consecutive halves of one transaction batch on one broker."""
    broker_name: str
    topic: str
    queue_id: int
    offset: int             # the first half's offset in the broker's half queue (tranStateTableOffset)
    count: int
    commit_log_offset: int  # the first half's
    transaction_id: str

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> "HalfBatch":
        return cls(**d)


@dataclass(frozen=True, eq=False)
class MessageHalves:
    """Half messages of one queue of one broker, a transaction each (Apache RocketMQ's per-message protocol): what
    END_TRANSACTION needs to end each, as arrays."""
    broker_name: str
    topic: str
    queue_id: int
    offsets: np.ndarray             # int64: each half's offset in the broker's half queue (tranStateTableOffset)
    commit_log_offsets: np.ndarray  # int64: where each half is in the broker's commit log (its offset msgId's)
    uniq_keys: tuple[str, ...]      # each half's UNIQ_KEY (the client's msgId; the committed message keeps it)

    def __len__(self) -> int:
        return len(self.offsets)

    def take(self, index) -> "MessageHalves":
        """The halves at `index` (positions, or a boolean mask)."""
        index = np.asarray(index)
        if index.dtype == bool:
            index = np.flatnonzero(index)
        return MessageHalves(self.broker_name, self.topic, self.queue_id, self.offsets[index],
                             self.commit_log_offsets[index], tuple(self.uniq_keys[i] for i in index))

    def to_json(self) -> dict:
        """Compact: the offsets as base64 of their little-endian bytes and the keys as one text, not a JSON value
        per message."""
        text = "\n".join(self.uniq_keys)
        if len(text.split("\n")) != len(self.uniq_keys):
            raise ValueError("a UNIQ_KEY holds a line break")
        return {"broker_name": self.broker_name, "topic": self.topic, "queue_id": self.queue_id,
                "offsets": _b64(self.offsets), "commit_log_offsets": _b64(self.commit_log_offsets), "uniq_keys": text}

    @classmethod
    def from_json(cls, d: dict) -> "MessageHalves":
        offsets = _unb64(d["offsets"])
        keys = tuple(d["uniq_keys"].split("\n")) if len(offsets) else ()
        return cls(d["broker_name"], d["topic"], int(d["queue_id"]), offsets, _unb64(d["commit_log_offsets"]), keys)


def _b64(a: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(a, dtype="<i8").tobytes()).decode("ascii")


def _unb64(text: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text), dtype="<i8").astype(np.int64)


@dataclass(frozen=True)
class CheckRequest:
    """A broker asking about halves: the producer answers with `state`."""
    broker_address: str
    offset: int
    count: int
    commit_log_offset: int
    transaction_id: str
    message: Optional[codec.MessageExt]  # the first half as stored (its properties tell whose it is)


def new_transaction_id() -> str:
    """64 random bits: it names one batch of halves among a producer group's (and travels in every message)."""
    return uuid.uuid4().hex[:16]


class AsyncTransactionProducer:
    def __init__(self, namesrv_addr: str, group: str, timeout: float = 5.0,
                 checker: Optional[Callable[[CheckRequest], Awaitable[TransactionState]]] = None,
                 api: Optional[MQClientAPI] = None, credentials: Optional[SessionCredentials] = None):
        """credentials: sign every request, the answers to check-backs included (brokers with aclEnable=true)."""
        self.group = group
        self.api = api or MQClientAPI(namesrv_addr, timeout, credentials)
        self.checker = checker
        # RocketMQ's clientID, clientIP@instanceName; the IP is the connection's source address, known at the first
        # heartbeat (until then nothing has named this client to a broker)
        self._instance = uuid.uuid4().hex[:12]
        self.client_id = f"{local_address()[0]}@{self._instance}"
        self._client_ip: Optional[str] = None
        self._beating: Optional[asyncio.Task] = None
        self._beat_addresses: set[str] = set()
        if checker is not None:
            self.api.on_request = self._on_request

    async def close(self) -> None:
        if self._beating is not None:
            self._beating.cancel()
        for addr in list(self._beat_addresses):
            try:
                await self.api.invoke(addr, RemotingCommand.request(RequestCode.UNREGISTER_CLIENT, {
                    "clientID": self.client_id, "producerGroup": self.group}), "unregister", timeout=2)
            except MQClientError:
                pass
        await self.api.close()

    # -- halves ---------------------------------------------------------------------------------------------------

    async def send_halves(self, mq: MessageQueue, body: bytes, count: int, transaction_id: str,
                          born_timestamp: Optional[int] = None) -> HalfBatch:
        """A MessageBatch body (its messages already carry TRAN_MSG, PGROUP and TRAN_BATCH=transaction_id) sent
        as halves to mq."""
        addr = await self.api.broker_addr(mq.topic, mq.broker_name)
        header = v2_send_fields({
            "producerGroup": self.group, "topic": mq.topic, "defaultTopic": "TBW102",
            "defaultTopicQueueNums": DEFAULT_TOPIC_QUEUE_NUMS, "queueId": mq.queue_id,
            "sysFlag": TRANSACTION_PREPARED_TYPE, "bornTimestamp": born_timestamp or int(time.time() * 1000),
            "flag": 0, "reconsumeTimes": 0, "unitMode": False, "batch": True})
        resp = await self.api.checked(addr, RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, header,
                                                                     body=body),
                                       f"half messages to {mq.topic}/{mq.broker_name}/{mq.queue_id}")
        h = SendMessageResponseHeader.from_ext_fields(resp.ext_fields)
        ids = h.msg_id.split(",")
        if len(ids) != count:
            raise MQClientError(ResponseCode.SYSTEM_ERROR, f"{len(ids)} halves stored of {count} sent",
                                addr, "half messages")
        return HalfBatch(mq.broker_name, mq.topic, mq.queue_id, int(h.queue_offset), count,
                         codec.decode_message_id(ids[0])[2], transaction_id)

    async def end(self, half: HalfBatch, state: TransactionState, from_check: bool = False) -> EndOutcome:
        """END_TRANSACTION for every half of the batch, awaiting the broker's answer (RocketMQ's producer sends it
        oneway; waiting is what lets a commit know it happened)."""
        addr = await self.api.broker_addr(half.topic, half.broker_name)
        cmd = RemotingCommand.request(RequestCode.END_TRANSACTION, self._end_fields(half, state, from_check))
        resp = await self.api.checked(
            addr, cmd, f"{state.name} of transaction {half.transaction_id} on {half.broker_name}",
            ok=(ResponseCode.SUCCESS, ResponseCode.TRANSACTION_SHOULD_COMMIT, ResponseCode.TRANSACTION_SHOULD_ROLLBACK))
        return EndOutcome.DONE if resp.code == ResponseCode.SUCCESS else EndOutcome.OPPOSITE

    def _end_fields(self, half: HalfBatch, state: TransactionState, from_check: bool) -> dict:
        return {"producerGroup": self.group, "tranStateTableOffset": half.offset,
                "commitLogOffset": half.commit_log_offset, "commitOrRollback": int(state),
                "fromTransactionCheck": str(from_check).lower(), "msgId": half.transaction_id,
                "transactionId": half.transaction_id, "tranStateTableCount": half.count}

    async def send_half_messages(self, mq: MessageQueue, bodies: Sequence[bytes], properties: Sequence[str],
                                 uniq_keys: tuple[str, ...], deadline: float) -> MessageHalves:
        """Each message a half of its own on mq, as TransactionMQProducer sends one (SEND_MESSAGE_V2, the prepared
        sys flag; its properties text already carries TRAN_MSG, PGROUP and its UNIQ_KEY, uniq_keys[i]),
        SEND_WINDOW in flight. A message without an answer, or refused as busy, is sent again until
        `deadline` (the loop's time): a half stored without our knowing stays undecided, and the broker's checks
        end it. Any other refusal rolls back what was stored and raises: a half the master stored but could not
        replicate or flush (NOT_STORED_OK) is rolled back too, as TransactionMQProducer rolls back a transaction
        whose half was not SEND_OK."""
        n = len(bodies)
        offsets = np.full(n, -1, dtype=np.int64)
        commit_log_offsets = np.full(n, -1, dtype=np.int64)
        base = v2_send_fields({
            "producerGroup": self.group, "topic": mq.topic, "defaultTopic": "TBW102",
            "defaultTopicQueueNums": DEFAULT_TOPIC_QUEUE_NUMS, "queueId": mq.queue_id,
            "sysFlag": TRANSACTION_PREPARED_TYPE, "bornTimestamp": int(time.time() * 1000), "flag": 0,
            "reconsumeTimes": 0, "unitMode": False, "batch": False})
        base = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in base.items()}
        what = f"half messages to {mq.topic}/{mq.broker_name}/{mq.queue_id}"
        todo = np.arange(n)
        loop = asyncio.get_running_loop()
        while len(todo):
            addr = await self.api.broker_addr(mq.topic, mq.broker_name)
            cmds = [RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {**base, "i": properties[i]},
                                            body=bodies[i]) for i in todo.tolist()]
            answers = await self.api.invoke_all(addr, cmds, SEND_WINDOW)
            again = []
            refused: Optional[MQClientError] = None
            for i, resp in zip(todo, answers):
                if resp is None or resp.code in _BUSY:
                    again.append(i)
                    continue
                if resp.code == ResponseCode.SUCCESS or (resp.code in NOT_STORED_OK and "msgId" in resp.ext_fields):
                    offsets[i] = int(resp.ext_fields["queueOffset"])
                    commit_log_offsets[i] = codec.decode_message_id(resp.ext_fields["msgId"])[2]
                if resp.code != ResponseCode.SUCCESS and refused is None:
                    refused = MQClientError(resp.code, resp.remark, addr, what)
            if refused is not None:
                stored = np.flatnonzero(offsets >= 0)
                halves = MessageHalves(mq.broker_name, mq.topic, mq.queue_id, offsets, commit_log_offsets,
                                       uniq_keys).take(stored)
                try:
                    await self.end_half_messages(halves, TransactionState.ROLLBACK_MESSAGE)
                except MQClientError as e:
                    log.info("rolling back %d halves after a refusal failed (%s); the broker's checks end them",
                             len(stored), e)
                raise refused
            todo = np.array(again, dtype=np.int64)
            if len(todo):
                busy = any(a is not None for a in answers)
                if loop.time() >= deadline:
                    raise MQClientError(ResponseCode.SYSTEM_BUSY if busy else -1, f"{len(todo)} of {n} halves "
                                        "not stored before the deadline", addr, what, unreachable=not busy)
                log.info("%s: %d of %d without an answer or refused as busy; sending them again", what, len(todo), n)
                await asyncio.sleep(0.2 if busy else 0.5)
        return MessageHalves(mq.broker_name, mq.topic, mq.queue_id, offsets, commit_log_offsets, uniq_keys)

    async def end_half_messages(self, halves: MessageHalves, state: TransactionState) -> np.ndarray:
        """END_TRANSACTION for each half, SEND_WINDOW in flight, answers awaited (the Java client sends it oneway;
        the answers are what tell a commit it happened). Returns which halves the broker answered SUCCESS; the
        others got no answer (ending them again could end one twice: an Apache RocketMQ broker commits a half
        as often as it is told to). A refusal raises MQClientError."""
        n = len(halves)
        done = np.zeros(n, dtype=bool)
        if not n:
            return done
        addr = await self.api.broker_addr(halves.topic, halves.broker_name)
        fields = {"producerGroup": self.group, "commitOrRollback": str(int(state)), "fromTransactionCheck": "false",
                  "bname": halves.broker_name}
        cmds = []
        for i in range(n):
            key = halves.uniq_keys[i]
            cmds.append(RemotingCommand.request(RequestCode.END_TRANSACTION, {
                **fields, "tranStateTableOffset": str(int(halves.offsets[i])),
                "commitLogOffset": str(int(halves.commit_log_offsets[i])), "msgId": key, "transactionId": key}))
        answers = await self.api.invoke_all(addr, cmds, SEND_WINDOW)
        for i, resp in enumerate(answers):
            if resp is None:
                continue
            if resp.code != ResponseCode.SUCCESS:
                raise MQClientError(resp.code, resp.remark, addr, f"{state.name} of half message {halves.uniq_keys[i]} "
                                    f"({halves.topic}/{halves.broker_name}/{halves.queue_id}, half queue offset "
                                    f"{int(halves.offsets[i])})")
            done[i] = True
        return done

    # -- being asked ------------------------------------------------------------------------------------------------

    async def heartbeat(self, topics: Sequence[str]) -> None:
        """Register the producer group with every broker of these topics' routes, now and every 30 s, so that
        their check-backs reach this producer's checker."""
        addrs = set()
        for topic in topics:
            route = await self.api.route(topic)
            for b in route.broker_datas if route is not None else []:
                if b.master_addr():
                    addrs.add(str(b.master_addr()))
        self._beat_addresses |= addrs
        await self._beat_once()
        if self._beating is None:
            self._beating = asyncio.ensure_future(self._beat_forever())

    async def _beat_once(self) -> None:
        if self._client_ip is None and self._beat_addresses:
            try:
                self._client_ip = await self.api.source_host(min(self._beat_addresses))
                self.client_id = f"{self._client_ip}@{self._instance}"
            except MQClientError:
                pass
        body = json.dumps({"clientID": self.client_id, "producerDataSet": [{"groupName": self.group}],
                           "consumerDataSet": []}).encode()
        for addr in sorted(self._beat_addresses):
            try:
                await self.api.checked(addr, RemotingCommand.request(RequestCode.HEART_BEAT, body=body), "heartbeat")
            except MQClientError as e:
                log.info("heartbeat of producer group %s to %s failed: %s", self.group, addr, e)

    async def _beat_forever(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_INTERVAL_S)
            await self._beat_once()

    async def _on_request(self, client, cmd: RemotingCommand) -> None:
        if cmd.code != RequestCode.CHECK_TRANSACTION_STATE or self.checker is None:
            return
        ext = cmd.ext_fields
        try:
            message = codec.decode_record(cmd.body, 0) if cmd.body else None
            request = CheckRequest(f"{client.host}:{client.port}", int(ext["tranStateTableOffset"]),
                                   int(ext.get("tranStateTableCount") or 1), int(ext["commitLogOffset"]),
                                   ext.get("transactionId") or "", message)
        except (KeyError, ValueError) as e:
            log.warning("a CHECK_TRANSACTION_STATE that does not parse: %s", e)
            return
        task = asyncio.ensure_future(self._answer(client, request))
        task.add_done_callback(lambda t: t.exception() if not t.cancelled() else None)

    async def _answer(self, client, request: CheckRequest) -> None:
        assert self.checker is not None
        state = await self.checker(request)
        if state == TransactionState.UNKNOW:
            return  # the broker asks again at its next check
        topic = request.message.topic if request.message is not None else ""
        half = HalfBatch("", topic, 0, request.offset, request.count, request.commit_log_offset,
                         request.transaction_id)
        reply = RemotingCommand.request(RequestCode.END_TRANSACTION, self._end_fields(half, state, True), oneway=True)
        try:
            await client.invoke_oneway(self.api.sign(reply))
        except ConnectionError:
            pass
