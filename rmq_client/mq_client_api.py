"""RocketMQ's MQClientAPIImpl in asyncio: the requests a client sends to name servers and brokers, one connection
per address, each answer checked and turned into values (or an MQClientError naming the code, the remark and the
address). Routes come from the name servers (GET_ROUTEINFO_BY_TOPIC), tried in turn."""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Awaitable, Callable, Optional

from remoting import (
    BodyError,
    LanguageCode,
    RemotingClient,
    RemotingCommand,
    RemotingTimeoutError,
    RequestCode,
    ResponseCode,
)
from remoting import remoting_serializable as rs
from remoting.admin_bodies import ConsumeStats, MessageQueue, TopicStatsTable
from remoting.broker_headers import (
    OffsetResponseHeader,
    PullMessageResponseHeader,
    SendMessageResponseHeader,
    v2_send_fields,
)
from remoting.namesrv_bodies import ClusterInfo, TopicList
from remoting.route_data import MASTER_ID, TopicRouteData
from rmq_acl import AclClientRPCHook, SessionCredentials
from rmq_common import message_codec as codec

from .errors import NAMESRV_HINT, MQClientError, NotANameServerError

log = logging.getLogger(__name__)

# PullSysFlag
FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4

_PULL_CODES = {ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY,
               ResponseCode.PULL_OFFSET_MOVED}
# An address that did not answer a read is tried last for this long: while a master is away its broker name's
# reads go to a slave at once, not after a failed connection each time; then the master is asked again.
DOWN_S = 10.0


@dataclass
class RawPullResult:
    code: int
    next_begin_offset: int
    min_offset: int
    max_offset: int
    body: bytes | bytearray  # a large one is the buffer it was received into


@dataclass
class SendResult:
    msg_id: str
    queue: MessageQueue
    queue_offset: int


@dataclass(frozen=True)
class BrokerKind:
    address: str
    language: str           # of the broker's implementation, as its responses say (JAVA: Apache RocketMQ's)
    version: Optional[str]  # brokerVersionDesc, e.g. V4_9_7, when the broker reports one

    @property
    def is_apache_rocketmq(self) -> bool:
        return self.language == "JAVA"


class MQClientAPI:
    """Connections to name servers and brokers, shared by every consumer and producer of one event loop."""

    def __init__(self, namesrv_addr: str, timeout: float = 5.0, credentials: Optional[SessionCredentials] = None):
        """credentials: every request is signed with them (RocketMQ's AclClientRPCHook), for brokers with
        aclEnable=true; name servers ignore the signature, as RocketMQ's do."""
        self.namesrv_addrs = [a.strip() for a in namesrv_addr.replace(",", ";").split(";") if a.strip()]
        if not self.namesrv_addrs:
            raise ValueError("namesrvAddr: no name server address given (host:port;host2:port)")
        for a in self.namesrv_addrs:
            host, sep, port = a.rpartition(":")
            if not sep or not host or not port.isdigit():
                raise ValueError(f"namesrvAddr: {a!r} is not host:port")
        self.timeout = timeout
        self._clients: dict[str, RemotingClient] = {}
        self._connecting: dict[str, asyncio.Future] = {}
        self._routes: dict[str, tuple[float, TopicRouteData]] = {}
        # reads go where RocketMQ's consumer reads (PullAPIWrapper): the broker id each queue's last pull answer
        # suggested, else the master, else a slave; addresses that did not answer lately are tried last
        self._suggested: dict[MessageQueue, int] = {}
        self._down: dict[str, float] = {}
        self._slave_reads: dict[str, bool] = {}  # a slave's slaveReadEnable, asked once per address
        self._rpc_hook = AclClientRPCHook(credentials) if credentials is not None else None
        # requests a broker sends on a connection (CHECK_TRANSACTION_STATE): (the connection, the request)
        self.on_request: Optional[Callable[[RemotingClient, RemotingCommand], Awaitable[None]]] = None

    async def close(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for c in clients:
            await c.close()

    async def _client(self, address: str) -> RemotingClient:
        c = self._clients.get(address)
        if c is not None and c._frames is not None and not c._frames.writer.transport.is_closing():
            return c
        pending = self._connecting.get(address)
        if pending is not None:
            return await asyncio.shield(pending)
        fut = asyncio.get_running_loop().create_future()
        self._connecting[address] = fut
        try:
            if c is not None:
                await c.close()
            client = RemotingClient(address)
            if self.on_request is not None:
                handler = self.on_request
                client.on_request = lambda cmd: handler(client, cmd)
            await asyncio.wait_for(client.connect(), self.timeout)
            self._clients[address] = client
            fut.set_result(client)
            return client
        except BaseException as e:
            fut.set_exception(e)
            fut.exception()  # retrieved: no "never retrieved" warning when nobody else waited
            raise
        finally:
            self._connecting.pop(address, None)

    async def source_host(self, address: str) -> str:
        """This host's address as `address` sees it: the source address of the connection to it (RocketMQ's
        clientIP, which names the client in heartbeats); MQClientError(-1) when it cannot be reached."""
        try:
            client = await self._client(address)
        except (OSError, asyncio.TimeoutError) as e:
            raise MQClientError(-1, None, address, "connect", unreachable=True) from e
        return client.source_host or "127.0.0.1"

    def sign(self, cmd: RemotingCommand) -> RemotingCommand:
        """cmd signed with the credentials, if any (invoke does it; a oneway request sent on a connection directly
        must be signed with this)."""
        if self._rpc_hook is not None:
            self._rpc_hook.do_before_request(cmd)
        return cmd

    async def invoke(self, address: str, cmd: RemotingCommand, what: str,
                     timeout: Optional[float] = None) -> RemotingCommand:
        """The answer to cmd from address; MQClientError(-1) when it cannot be reached or does not answer."""
        self.sign(cmd)
        try:
            client = await self._client(address)
            return await client.invoke(cmd, timeout or self.timeout)
        except (OSError, ConnectionError, RemotingTimeoutError, asyncio.TimeoutError) as e:
            self._clients.pop(address, None)
            self._lost(address)
            raise MQClientError(-1, f"{type(e).__name__}: {e}", address, what, unreachable=True) from None

    def _lost(self, address: str) -> None:
        """A broker that did not answer: the cached routes that list it are asked of the name servers again when
        next needed, not after their 30 s (a killed master leaves the route, and in controller mode the node the
        controller promotes is listed as the master in its place)."""
        for topic, (_, route) in list(self._routes.items()):
            if any(address in b.broker_addrs.values() for b in route.broker_datas):
                self._routes.pop(topic, None)

    async def invoke_all(self, address: str, cmds: list[RemotingCommand], window: int = 512,
                         timeout: Optional[float] = None) -> list[Optional[RemotingCommand]]:
        """The answers to many requests on one connection, pipelined: written in slices, up to `window` in flight,
        so that neither end waits a round trip per request. None for a request without an answer (the address
        cannot be reached, the connection was lost, or no answer came within the timeout)."""
        out: list[Optional[RemotingCommand]] = [None] * len(cmds)
        if not cmds:
            return out
        for cmd in cmds:
            self.sign(cmd)
        try:
            client = await self._client(address)
        except (OSError, ConnectionError, asyncio.TimeoutError):
            self._lost(address)
            return out
        step = max(1, min(256, window // 4))
        gate = asyncio.Semaphore(max(1, window // step))

        async def one(start: int) -> None:
            async with gate:
                try:
                    out[start:start + step] = await client.invoke_many(cmds[start:start + step],
                                                                       timeout or self.timeout)
                except (OSError, ConnectionError):
                    pass
        await asyncio.gather(*(one(i) for i in range(0, len(cmds), step)))
        if any(r is None for r in out):
            self._clients.pop(address, None)  # a lost or stuck connection: the next request makes a new one
            self._lost(address)
        return out

    async def checked(self, address: str, cmd: RemotingCommand, what: str, ok=(ResponseCode.SUCCESS,),
                       timeout: Optional[float] = None) -> RemotingCommand:
        """The answer to cmd from address, or MQClientError with its code and remark when it is not one of `ok`
        (`what` names the request in errors)."""
        resp = await self.invoke(address, cmd, what, timeout)
        if resp.code not in ok:
            raise MQClientError(resp.code, resp.remark, address, what)
        return resp

    # -- name server ------------------------------------------------------------------------------------------

    async def _namesrv(self, cmd_factory, what: str, ok=(ResponseCode.SUCCESS,)) -> RemotingCommand:
        """The first answer of the name servers, tried in turn. NotANameServerError for an address that answers
        as a broker; when none can be reached and one refused the connection, the error says where name servers
        listen."""
        last: Optional[MQClientError] = None
        for addr in self.namesrv_addrs:
            try:
                return await self.checked(addr, cmd_factory(), what, ok)
            except MQClientError as e:
                if e.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
                    raise NotANameServerError(addr, what, e.remark) from None
                if e.code != -1:
                    raise
                if last is None or "ConnectionRefused" in (e.remark or ""):
                    last = e
        assert last is not None
        if "ConnectionRefused" in (last.remark or ""):
            raise MQClientError(-1, f"{last.remark} (no name server listens there; {NAMESRV_HINT})", last.address,
                                what, unreachable=True)
        raise last

    async def route(self, topic: str, max_age: float = 30.0) -> Optional[TopicRouteData]:
        """The topic's route (None when no broker has it), cached for max_age seconds."""
        cached = self._routes.get(topic)
        if cached is not None and time.monotonic() - cached[0] < max_age:
            return cached[1]
        resp = await self._namesrv(lambda: RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                                   {"topic": topic}),
                                   f"route of topic {topic!r}", ok=(ResponseCode.SUCCESS, ResponseCode.TOPIC_NOT_EXIST))
        if resp.code == ResponseCode.TOPIC_NOT_EXIST:
            self._routes.pop(topic, None)
            return None
        route = TopicRouteData.decode(resp.body)
        self._routes[topic] = (time.monotonic(), route)
        return route

    def forget_route(self, topic: str) -> None:
        self._routes.pop(topic, None)

    async def topics(self) -> list[str]:
        resp = await self._namesrv(lambda: RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER),
                                   "topic list")
        return sorted(TopicList.decode(resp.body).topic_list)

    async def cluster_info(self) -> ClusterInfo:
        resp = await self._namesrv(lambda: RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), "cluster info")
        return ClusterInfo.decode(resp.body)

    async def broker_kind(self, address: str) -> BrokerKind:
        """What answers at address: every RocketMQ response names its implementation's language (a stock broker's
        JAVA), and a stock broker's GET_BROKER_RUNTIME_INFO names its version (brokerVersionDesc)."""
        resp = await self.invoke(address, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO),
                                 "runtime info of a broker")
        version = None
        if resp.code == ResponseCode.SUCCESS and resp.body:
            try:
                table = rs.as_object(rs.decode(resp.body), "runtime info").get("table")
                version = str(table.get("brokerVersionDesc")) if isinstance(table, dict) else None
            except BodyError:
                pass
        try:
            language = LanguageCode(resp.language).name
        except ValueError:
            language = str(resp.language)
        return BrokerKind(address, language, version)

    async def queues(self, topic: str, readable: bool = True) -> list[MessageQueue]:
        """The topic's read queues on every broker of its route with any address (a master away, its slave serves
        the reads), or its write queues on every broker with a master."""
        route = await self.route(topic)
        if route is None:
            return []
        serving = {b.broker_name for b in route.broker_datas if (b.broker_addrs if readable else b.master_addr())}
        out: list[MessageQueue] = []
        for q in route.queue_datas:
            if q.broker_name not in serving or not q.perm & (0x4 if readable else 0x2):
                continue
            n = q.read_queue_nums if readable else q.write_queue_nums
            out.extend(MessageQueue(topic, q.broker_name, i) for i in range(n))
        return sorted(out)

    async def _broker_addrs(self, topic: str, broker_name: str, master: bool) -> dict[int, str]:
        """broker_name's addresses by broker id in the topic's route (the cached route, or a fresh one when the
        cached one lists no address of it, or no master when `master`)."""
        addrs: dict[int, str] = {}
        for attempt in range(2):
            route = await self.route(topic, max_age=30.0 if attempt == 0 else 0.0)
            for b in route.broker_datas if route is not None else ():
                if b.broker_name == broker_name:
                    addrs = {int(i): str(a) for i, a in b.broker_addrs.items() if a}
            if (MASTER_ID in addrs) if master else addrs:
                break
        return addrs

    async def broker_addr(self, topic: str, broker_name: str) -> str:
        addr = (await self._broker_addrs(topic, broker_name, master=True)).get(MASTER_ID)
        if addr is None:
            raise MQClientError(-1, f"no master of broker {broker_name!r} in the route of topic {topic!r}",
                                ";".join(self.namesrv_addrs), "broker lookup", unreachable=True)
        return addr

    async def read_addrs(self, topic: str, broker_name: str,
                         mq: Optional[MessageQueue] = None) -> list[tuple[int, str]]:
        """(broker id, address) of broker_name to read from, in the order RocketMQ's consumer would: the id the
        queue's last pull answer suggested, the master, then the slaves by id; those that did not answer within
        DOWN_S last. MQClientError(unreachable) when the route lists no address of it."""
        addrs = await self._broker_addrs(topic, broker_name, master=False)
        if not addrs:
            raise MQClientError(-1, f"no address of broker {broker_name!r} in the route of topic {topic!r}",
                                ";".join(self.namesrv_addrs), "broker lookup", unreachable=True)
        ids = sorted(addrs)
        want = self._suggested.get(mq) if mq is not None else None
        if want in addrs:
            ids.remove(want)
            ids.insert(0, want)
        now = time.monotonic()
        return sorted(((i, addrs[i]) for i in ids), key=lambda ia: self._down.get(ia[1], 0.0) > now)

    async def _read(self, topic: str, broker_name: str, mq: Optional[MessageQueue],
                    request: Callable[[int], RemotingCommand], what: str, ok=(ResponseCode.SUCCESS,),
                    timeout: Optional[float] = None, refused=None) -> tuple[int, RemotingCommand]:
        """(broker id, answer) of the first of read_addrs that answers (a master away, its slave answers).
        request(broker id) makes the request for that node; refused(broker id, address, answer), when given,
        returns the error of an answer to pass over to the next node, or None to take it."""
        last: Optional[MQClientError] = None
        for broker_id, addr in await self.read_addrs(topic, broker_name, mq):
            try:
                resp = await self.checked(addr, request(broker_id), what, ok, timeout)
                passed = await refused(broker_id, addr, resp) if refused is not None else None
            except MQClientError as e:
                if not e.unreachable:
                    raise
                self._down[addr] = time.monotonic() + DOWN_S
                self.forget_route(topic)  # a master gone leaves the route: the next lookup sees its slave alone
                passed = e
            if passed is not None:
                if mq is not None:
                    self._suggested.pop(mq, None)
                last = passed
                continue
            self._down.pop(addr, None)
            return broker_id, resp
        assert last is not None
        raise last

    async def slave_reads(self, addr: str) -> bool:
        """Whether the slave at addr serves pulls (its slaveReadEnable, from GET_BROKER_CONFIG; asked once): one
        that does not answers every pull PULL_RETRY_IMMEDIATELY with no messages."""
        known = self._slave_reads.get(addr)
        if known is None:
            resp = await self.checked(addr, RemotingCommand.request(RequestCode.GET_BROKER_CONFIG),
                                      "config of a slave broker")
            text = (resp.body or b"").decode("utf-8", "replace")
            known = any(line.strip().replace(" ", "") == "slaveReadEnable=true" for line in text.splitlines())
            self._slave_reads[addr] = known
        return known

    # -- broker requests -----------------------------------------------------------------------------------

    async def pull(self, mq: MessageQueue, offset: int, group: str, expression: str = "*", expression_type: str = "TAG",
                   max_nums: int = 32, suspend_ms: int = 0, commit_offset: int = -1,
                   timeout: Optional[float] = None) -> RawPullResult:
        """One pull, from where RocketMQ's consumer pulls (read_addrs); the answer's suggested broker id is where
        the queue's next pull goes. A slave's offset commit flag is never set: offsets are the master's."""
        what = f"pull of {mq.topic}/{mq.broker_name}/{mq.queue_id} at {offset}"

        def request(commit: bool) -> RemotingCommand:
            flag = FLAG_SUBSCRIPTION | (FLAG_SUSPEND if suspend_ms else 0)
            flag |= FLAG_COMMIT_OFFSET if commit and commit_offset >= 0 else 0
            return RemotingCommand.request(RequestCode.PULL_MESSAGE, {
                "consumerGroup": group, "topic": mq.topic, "queueId": mq.queue_id, "queueOffset": offset,
                "maxMsgNums": max_nums, "sysFlag": flag, "commitOffset": max(commit_offset, 0),
                "suspendTimeoutMillis": suspend_ms, "subscription": expression, "subVersion": 0,
                "expressionType": expression_type})
        wait = (timeout or self.timeout) + suspend_ms / 1000

        async def refused(broker_id: int, addr: str, resp: RemotingCommand) -> Optional[MQClientError]:
            if (broker_id == MASTER_ID or resp.code != ResponseCode.PULL_RETRY_IMMEDIATELY
                    or await self.slave_reads(addr)):
                return None
            # a slave that does not serve reads: its nextBeginOffset would skip what it holds, never followed
            return MQClientError(resp.code, f"slave {broker_id} of broker {mq.broker_name!r} does not serve pulls "
                                            f"(slaveReadEnable=false on it)", addr, what, unreachable=True)
        _, resp = await self._read(mq.topic, mq.broker_name, mq, lambda broker_id: request(broker_id == MASTER_ID),
                                   what, tuple(_PULL_CODES), wait, refused)
        h = PullMessageResponseHeader.from_ext_fields(resp.ext_fields)
        self._suggested[mq] = int(h.suggest_which_broker_id)
        return RawPullResult(resp.code, h.next_begin_offset, h.min_offset, h.max_offset, resp.body)

    async def query_message(self, topic: str, key: str, max_num: int = 32, begin: int = 0, end: int = 2**63 - 1,
                            unique_key: bool = False) -> list[codec.MessageExt]:
        """MQAdminImpl.queryMessage: QUERY_MESSAGE 12 to every master broker of the topic's route; the records that
        come back, checked against the key (a broker returns its index's hash collisions too), newest first.
        unique_key: `key` is a UNIQ_KEY (the msgId a SendResult shows), sent with _UNIQUE_KEY_QUERY=true."""
        route = await self.route(topic)
        if route is None:
            raise MQClientError(ResponseCode.TOPIC_NOT_EXIST, f"no route for topic {topic!r}",
                                ";".join(self.namesrv_addrs), "query by key")
        fields = {"topic": topic, "key": key, "maxNum": max_num, "beginTimestamp": begin, "endTimestamp": end}
        if unique_key:
            fields["_UNIQUE_KEY_QUERY"] = "true"
        found: dict[int, codec.MessageExt] = {}
        for b in route.broker_datas:
            addr = b.master_addr()
            if not addr:
                continue
            resp = await self.checked(str(addr), RemotingCommand.request(RequestCode.QUERY_MESSAGE, fields),
                                      f"query of {topic!r} by key {key!r}",
                                      ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND))
            pos, body = 0, resp.body or b""
            while pos < len(body):
                m = codec.decode_record(body, pos)
                pos += m.store_size
                hit = m.properties.get(codec.PROPERTY_UNIQ_KEY) == key if unique_key else key in m.keys
                if hit and m.topic == topic:
                    found[hash((b.broker_name, m.commit_log_offset))] = m
        return sorted(found.values(), key=lambda m: (-m.store_timestamp, -m.commit_log_offset))[:max_num]

    async def view_message(self, msg_id: str) -> codec.MessageExt:
        """MQAdminImpl.viewMessage: VIEW_MESSAGE_BY_ID 33 to the broker an offset msgId names (store host and
        commitlog offset)."""
        host, port, offset = codec.decode_message_id(msg_id)
        addr = codec.format_host(host, port)
        resp = await self.checked(addr, RemotingCommand.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": offset}),
                                  f"message {msg_id}")
        return codec.decode_record(resp.body, 0)

    async def _offset(self, code: int, mq: MessageQueue, what: str, extra: Optional[dict] = None) -> int:
        fields = {"topic": mq.topic, "queueId": mq.queue_id}
        fields.update(extra or {})
        _, resp = await self._read(mq.topic, mq.broker_name, None, lambda _: RemotingCommand.request(code, fields),
                                   f"{what} of {mq.topic}/{mq.broker_name}/{mq.queue_id}")
        return OffsetResponseHeader.from_ext_fields(resp.ext_fields).offset

    async def max_offset(self, mq: MessageQueue) -> int:
        return await self._offset(RequestCode.GET_MAX_OFFSET, mq, "max offset")

    async def min_offset(self, mq: MessageQueue) -> int:
        return await self._offset(RequestCode.GET_MIN_OFFSET, mq, "min offset")

    async def offset_by_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return await self._offset(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, mq, "offset by timestamp",
                                  {"timestamp": timestamp_ms})

    async def query_consumer_offset(self, mq: MessageQueue, group: str) -> Optional[int]:
        """The group's committed offset of the queue, None where it has none (QUERY_NOT_FOUND): the master's, or
        while it is away the copy its slave took from it (findBrokerAddressInAdmin)."""
        _, resp = await self._read(
            mq.topic, mq.broker_name, None,
            lambda _: RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, {
                "consumerGroup": group, "topic": mq.topic, "queueId": mq.queue_id, "setZeroIfNotFound": False}),
            f"offset of group {group!r} in {mq.topic}/{mq.broker_name}/{mq.queue_id}",
            ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND))
        if resp.code == ResponseCode.QUERY_NOT_FOUND:
            return None
        return OffsetResponseHeader.from_ext_fields(resp.ext_fields).offset

    async def update_consumer_offset(self, mq: MessageQueue, group: str, offset: int) -> None:
        """To the master only (RemoteBrokerOffsetStore): a 4.x slave takes the master's offsets and drops its own.
        MQClientError(unreachable) while the broker name has no master."""
        addr = await self.broker_addr(mq.topic, mq.broker_name)
        cmd = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {
            "consumerGroup": group, "topic": mq.topic, "queueId": mq.queue_id, "commitOffset": offset})
        await self.checked(addr, cmd, f"offset commit of group {group!r} in {mq.topic}/{mq.broker_name}/"
                                       f"{mq.queue_id}")

    async def topic_stats(self, topic: str, broker_name: str) -> TopicStatsTable:
        """Every queue's (min, max) offset of the topic on one broker, in one request (a slave's while the master
        is away)."""
        fields = {"topic": topic}
        _, resp = await self._read(topic, broker_name, None,
                                   lambda _: RemotingCommand.request(RequestCode.GET_TOPIC_STATS_INFO, fields),
                                   f"stats of topic {topic!r}")
        return TopicStatsTable.decode(resp.body)

    async def consume_stats(self, topic: str, group: str, broker_name: str) -> ConsumeStats:
        addr = await self.broker_addr(topic, broker_name)
        cmd = RemotingCommand.request(RequestCode.GET_CONSUME_STATS, {"consumerGroup": group, "topic": topic})
        resp = await self.checked(addr, cmd, f"consume stats of group {group!r} in topic {topic!r}")
        return ConsumeStats.decode(resp.body)

    async def create_topic(self, broker_name: str, topic: str, queue_nums: int, route_topic: str) -> None:
        addr = await self.broker_addr(route_topic, broker_name)
        cmd = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
            "topic": topic, "defaultTopic": route_topic, "readQueueNums": queue_nums, "writeQueueNums": queue_nums,
            "perm": 6, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False})
        await self.checked(addr, cmd, f"creation of topic {topic!r}")
        self.forget_route(topic)

    async def send(self, mq: MessageQueue, header: dict, body: bytes, batch: bool,
                   route_topic: Optional[str] = None) -> SendResult:
        """route_topic: whose route names the broker (the default topic's, for a topic the broker will create)."""
        addr = await self.broker_addr(route_topic or mq.topic, mq.broker_name)
        code = RequestCode.SEND_BATCH_MESSAGE if batch else RequestCode.SEND_MESSAGE
        if batch:
            header = v2_send_fields(header)
        resp = await self.checked(addr, RemotingCommand.request(code, header, body=body),
                                   f"send to {mq.topic}/{mq.broker_name}/{mq.queue_id}")
        h = SendMessageResponseHeader.from_ext_fields(resp.ext_fields)
        return SendResult(h.msg_id, MessageQueue(mq.topic, mq.broker_name, h.queue_id), h.queue_offset)
