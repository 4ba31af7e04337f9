"""What the failover tests look at: a broker's queue ends and a group's offsets, asked of one broker node directly
(not through the route), and a Spark stream's progress events and Parquet output."""
from __future__ import annotations

import json
from datetime import datetime

from remoting import RemotingCommand, RequestCode, ResponseCode
from remoting.admin_bodies import TopicStatsTable
from remoting.blocking_client import BlockingRemotingClient
from remoting.broker_headers import OffsetResponseHeader


def ask(addr: str, code: int, fields: dict, ok=(ResponseCode.SUCCESS,)) -> RemotingCommand:
    with BlockingRemotingClient(addr, connect_timeout=5) as client:
        answer = client.invoke(RemotingCommand.request(code, fields), 10)
    assert answer.code in ok, f"{RequestCode(code).name} at {addr}: {answer.code} {answer.remark}"
    return answer


def max_offsets(addr: str, topic: str) -> dict[int, int]:
    """{queue id: max offset} of the topic on the node at addr."""
    stats = TopicStatsTable.decode(ask(addr, RequestCode.GET_TOPIC_STATS_INFO, {"topic": topic}).body)
    return {mq.queue_id: o.maxOffset for mq, o in stats.offsetTable.items()}


def group_offsets(addr: str, topic: str, group: str, queues: int) -> dict[int, int]:
    """{queue id: the group's offset} on the node at addr, for the queues where it has one."""
    out = {}
    for q in range(queues):
        answer = ask(addr, RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": group, "topic": topic, "queueId": q},
                     ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND))
        if answer.code == ResponseCode.SUCCESS:
            out[q] = OffsetResponseHeader.from_ext_fields(answer.ext_fields).offset
    return out


def offsets(progress: dict, topic: str, which: str) -> dict[str, int]:
    """{"broker:queue": offset} at the start or end (which: startOffset, endOffset) of a progress event's batch."""
    at = progress["sources"][0][which]
    return dict((json.loads(at) if isinstance(at, str) else at or {}).get(topic, {}))


def read_from(progress: dict, topic: str, broker: str) -> int:
    """How many offsets of the broker's queues the progress event's batch read."""
    start, end = offsets(progress, topic, "startOffset"), offsets(progress, topic, "endOffset")
    return sum(o - start.get(k, o) for k, o in end.items() if k.startswith(broker + ":"))


def written(spark, q, path: str) -> int:
    """Rows in the query's Parquet output so far; the query's own error at once if it failed."""
    if q.exception() is not None:
        raise AssertionError(f"the query failed: {q.exception()}")
    try:
        return spark.read.parquet(path).count()
    except Exception:  # no file yet
        return 0


def at(stamp: str) -> float:
    """A progress event's timestamp in seconds since the epoch."""
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
