"""What an operator does through brokers (RocketMQ's DefaultMQAdminExt, for users without Java): create and delete
a topic on every master broker, list the consumer groups with their offsets and lag, reset a group's offsets to a
time or to either end. Works against any RocketMQ 4.x broker (`rmq serve` or stock). `AsyncAdmin` is the asyncio
form; `Admin` its blocking face."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from remoting import RemotingCommand, RequestCode, ResponseCode
from remoting import remoting_serializable as rs
from remoting.admin_bodies import ConsumeStats, ResetOffsetBody
from rmq_acl import SessionCredentials

from .event_loop import run_blocking
from .mq_client_api import MessageQueue, MQClientAPI, MQClientError

EARLIEST, LATEST = 0, -1  # the timestamps of a reset to either end (INVOKE_BROKER_TO_RESET_OFFSET's -1: the end)


@dataclass
class GroupTopic:
    """One consumer group's progress in one topic, over every broker."""
    group: str
    topic: str
    queues: int
    committed: int  # the sum of the queues' committed offsets
    lag: int  # the sum of max offset - committed offset
    online: int  # members connected now (the most any broker sees)


@dataclass
class QueueReset:
    queue: MessageQueue
    old: Optional[int]  # the committed offset before (None: none)
    new: int


@dataclass
class ResetResult:
    queues: list[QueueReset] = field(default_factory=list)
    told_brokers: list[str] = field(default_factory=list)  # brokers whose online members were told to reset
    set_brokers: list[str] = field(default_factory=list)  # brokers of an offline group, offsets committed directly


class AsyncAdmin:
    def __init__(self, namesrv_addr: str, timeout: float = 5.0, credentials: Optional[SessionCredentials] = None):
        self.api = MQClientAPI(namesrv_addr, timeout, credentials)

    async def close(self) -> None:
        await self.api.close()

    async def masters(self, cluster: Optional[str] = None) -> dict[str, str]:
        """{broker name: master address} of every broker (or the cluster's); ValueError naming an unknown
        cluster."""
        info = await self.api.cluster_info()
        names = set(info.broker_addr_table)
        if cluster is not None:
            if cluster not in info.cluster_addr_table:
                raise ValueError(f"--cluster {cluster}: no such cluster; the name server has: "
                                 f"{', '.join(sorted(info.cluster_addr_table)) or 'none'}")
            names = set(info.cluster_addr_table[cluster])
        out = {}
        for name in sorted(names):
            addr = info.broker_addr_table[name].master_addr() if name in info.broker_addr_table else None
            if addr:
                out[name] = str(addr)
        return out

    async def create_topic(self, topic: str, queues: int, cluster: Optional[str] = None) -> list[str]:
        """UPDATE_AND_CREATE_TOPIC on every master (mqadmin updateTopic -c): the brokers it is on."""
        masters = await self.masters(cluster)
        if not masters:
            raise MQClientError(-1, "no master broker is registered", ";".join(self.api.namesrv_addrs),
                                "topic creation", unreachable=True)
        for name, addr in masters.items():
            cmd = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
                "topic": topic, "defaultTopic": "TBW102", "readQueueNums": queues, "writeQueueNums": queues,
                "perm": 6, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False})
            await self.api.checked(addr, cmd, f"creation of topic {topic!r} on {name}")
        self.api.forget_route(topic)
        return list(masters)

    async def delete_topic(self, topic: str, cluster: Optional[str] = None) -> list[str]:
        """DELETE_TOPIC_IN_BROKER on every master that has it, then DELETE_TOPIC_IN_NAMESRV on every name server
        (mqadmin deleteTopic): the brokers it was deleted on. ValueError when no broker has the topic."""
        route = await self.api.route(topic, max_age=0)
        masters = await self.masters(cluster)
        having = {q.broker_name for q in route.queue_datas} if route is not None else set()
        targets = {n: a for n, a in masters.items() if n in having}
        if not targets:
            raise ValueError(f"--topic {topic}: no broker{' of cluster ' + cluster if cluster else ''} has it")
        for name, addr in targets.items():
            cmd = RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic})
            await self.api.checked(addr, cmd, f"deletion of topic {topic!r} on {name}")
        fields = {"topic": topic, **({"clusterName": cluster} if cluster else {})}
        for ns in self.api.namesrv_addrs:
            await self.api.checked(ns, RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_NAMESRV, dict(fields)),
                                   f"deletion of topic {topic!r} from the name server")
        self.api.forget_route(topic)
        return list(targets)

    async def groups(self) -> list[GroupTopic]:
        """Every group some master has committed offsets of (GET_ALL_CONSUMER_OFFSET) or a config of
        (GET_ALL_SUBSCRIPTIONGROUP_CONFIG), per topic: committed offsets and lag summed over the queues of every
        broker (GET_CONSUME_STATS), members online (GET_CONSUMER_CONNECTION_LIST). Groups with neither offsets nor
        members (RocketMQ's built-in ones) are left out."""
        masters = await self.masters()
        names: set[str] = set()
        for addr in masters.values():
            resp = await self.api.checked(addr, RemotingCommand.request(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG),
                                          "the subscription groups")
            table = rs.as_object(rs.decode(resp.body), "SubscriptionGroupWrapper").get("subscriptionGroupTable")
            names |= set(table or {})
            resp = await self.api.checked(addr, RemotingCommand.request(RequestCode.GET_ALL_CONSUMER_OFFSET),
                                          "the consumer offsets")
            offsets = rs.as_object(rs.decode(resp.body), "ConsumerOffsetSerializeWrapper").get("offsetTable")
            names |= {str(key).rpartition("@")[2] for key in offsets or {} if "@" in str(key)}
        rows: dict[tuple[str, str], GroupTopic] = {}
        for group in sorted(names):
            online = 0
            for addr in masters.values():
                cmd = RemotingCommand.request(RequestCode.GET_CONSUME_STATS, {"consumerGroup": group})
                stats = ConsumeStats.decode((await self.api.checked(addr, cmd, f"consume stats of {group}")).body)
                for mq, o in stats.offsetTable.items():
                    row = rows.setdefault((group, mq.topic), GroupTopic(group, mq.topic, 0, 0, 0, 0))
                    row.queues += 1
                    row.committed += o.consumerOffset
                    row.lag += max(0, o.brokerOffset - o.consumerOffset)
                conn = await self.api.invoke(addr, RemotingCommand.request(
                    RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group}), f"members of {group}")
                if conn.code == ResponseCode.SUCCESS:
                    members = rs.as_object(rs.decode(conn.body), "ConsumerConnection").get("connectionSet") or []
                    online = max(online, len(members))
            for (g, _), row in rows.items():
                if g == group:
                    row.online = online
            if online and not any(g == group for g, _ in rows):
                rows[(group, "")] = GroupTopic(group, "", 0, 0, 0, online)
        return [rows[k] for k in sorted(rows)]

    async def reset_offsets(self, group: str, topic: str, timestamp: int) -> ResetResult:
        """Every queue of the topic to the offset of the first message stored at or after `timestamp` (ms;
        EARLIEST, LATEST: either end). Online members are told by their broker and move there themselves
        (INVOKE_BROKER_TO_RESET_OFFSET); for a group with none online (CONSUMER_NOT_ONLINE) the offsets are
        committed here (UPDATE_CONSUMER_OFFSET), as mqadmin resetOffsetByTime does."""
        route = await self.api.route(topic, max_age=0)
        if route is None:
            raise ValueError(f"--topic {topic}: no broker has it")
        before = {mq: await self.api.query_consumer_offset(mq, group) for mq in await self.api.queues(topic)}
        out = ResetResult()
        for broker in sorted({q.broker_name for q in route.queue_datas}):
            addr = await self.api.broker_addr(topic, broker)
            # an offline group is set here: a broker refuses a reset of one that lacks an offset on some queue
            members = await self.api.invoke(addr, RemotingCommand.request(
                RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group}), f"members of {group}")
            if members.code == ResponseCode.SUCCESS:
                cmd = RemotingCommand.request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, {
                    "topic": topic, "group": group, "timestamp": timestamp, "isForce": "true"})
                resp = await self.api.checked(addr, cmd, f"offset reset of group {group!r} in {topic!r} on {broker}",
                                              ok=(ResponseCode.SUCCESS, ResponseCode.CONSUMER_NOT_ONLINE))
                if resp.code == ResponseCode.SUCCESS:
                    out.told_brokers.append(broker)
                    for mq, offset in sorted(ResetOffsetBody.decode(resp.body).offsetTable.items()):
                        out.queues.append(QueueReset(mq, before.get(mq), offset))
                    continue
            out.set_brokers.append(broker)
            for mq in sorted(m for m in before if m.broker_name == broker):
                if timestamp == LATEST:
                    new = await self.api.max_offset(mq)
                elif timestamp == EARLIEST:
                    new = await self.api.min_offset(mq)
                else:
                    new = await self.api.offset_by_timestamp(mq, timestamp)
                await self.api.update_consumer_offset(mq, group, new)
                out.queues.append(QueueReset(mq, before[mq], new))
        return out


class Admin:
    """The blocking face: each method runs its AsyncAdmin counterpart on the client's event-loop thread."""

    def __init__(self, namesrv_addr: str, timeout: float = 5.0, credentials: Optional[SessionCredentials] = None):
        self.aio = run_blocking(_make_async, namesrv_addr, timeout, credentials)

    def close(self) -> None:
        run_blocking(self.aio.close)

    def __enter__(self) -> "Admin":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def create_topic(self, topic: str, queues: int, cluster: Optional[str] = None) -> list[str]:
        return run_blocking(self.aio.create_topic, topic, queues, cluster)

    def delete_topic(self, topic: str, cluster: Optional[str] = None) -> list[str]:
        return run_blocking(self.aio.delete_topic, topic, cluster)

    def groups(self) -> list[GroupTopic]:
        return run_blocking(self.aio.groups)

    def reset_offsets(self, group: str, topic: str, timestamp: int) -> ResetResult:
        return run_blocking(self.aio.reset_offsets, group, topic, timestamp)


async def _make_async(namesrv_addr: str, timeout: float, credentials: Optional[SessionCredentials]) -> AsyncAdmin:
    return AsyncAdmin(namesrv_addr, timeout, credentials)
