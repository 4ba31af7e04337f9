"""produce, consume, topics and stat with --namesrv HOST:PORT: the same commands through RocketMQ brokers (the
project's client, rmq_client), with the same output; a queue is shown as brokerName:queueId."""
from __future__ import annotations

import asyncio
import sys
from typing import Optional

from rmq_acl import SessionCredentials
from rmq_client import AsyncProducer, MessageQueue, MQClientError, Producer, PullConsumer, PullStatus, Subscription
from rmq_client.event_loop import run_blocking
from rmq_client.producer import DEFAULT_TOPIC

from .common import (
    DEFAULT_GROUP,
    Failure,
    UsageError,
    message_text,
    message_to_json,
    plural,
    print_topics,
    table,
    write_json,
)
from .message_lines import PartialFlush
from .message_lines import produce_file as read_lines_and_flush


def credentials(args) -> Optional[SessionCredentials]:
    """--access-key / --secret-key, else $RMQ_ACCESS_KEY / $RMQ_SECRET_KEY; None: requests go unsigned."""
    return SessionCredentials.resolve(args.access_key, args.secret_key, names=("--access-key", "--secret-key"))


def _subscription(args) -> Subscription:
    if args.sql is not None:
        return Subscription(args.sql, "SQL92")
    return Subscription(args.tags or "*", "TAG")


MAX_MESSAGE_SIZE = 4 * 1024 * 1024  # the most a RocketMQ producer sends in one message (maxMessageSize)
BATCH_BYTES = 1024 * 1024  # a SEND_BATCH_MESSAGE's bodies at most this: far within a broker's maxMessageSize
FILE_ROUND = 8  # --file sends batch-size x this many lines at a time, each queue's share as batches


def produce(args, props: Optional[dict]) -> None:
    with Producer(args.namesrv, credentials=credentials(args)) as p:
        queue = None
        if args.queue is not None:
            broker, qid = args.queue
            queues = run_blocking(_Queues(p.aio).known, args.topic)
            queue = _chosen_queue(args.topic, queues, broker, qid, f"--queue {args.queue[0] or ''}"
                                  f"{':' if args.queue[0] else ''}{qid}", "--queue BROKER:N")
        for body in args.bodies:
            r = p.send(args.topic, body.encode("utf-8", "surrogateescape"), tags=args.tags, keys=args.keys,
                       properties=props, sharding_key=args.sharding_key, queue=queue)
            if args.json:
                write_json({"status": "SEND_OK", "topic": args.topic, "broker_name": r.queue.broker_name,
                            "queue_id": r.queue.queue_id, "queue_offset": r.queue_offset, "msg_id": r.msg_id})
            else:
                print(f"SEND_OK {args.topic}/{r.queue.key()}@{r.queue_offset} msg_id={r.msg_id}")


def consume(args, start) -> None:
    """Every queue of the topic in turn (or --queue's id on every broker), printed as the store's consume does."""
    group = args.group or DEFAULT_GROUP
    sub = _subscription(args)
    remaining = args.max
    with PullConsumer(args.namesrv, group, credentials=credentials(args)) as c:
        queues = c.queues(args.topic)
        if not queues:
            raise MQClientError(17, f"topic {args.topic!r} has no route", args.namesrv, "consume")
        if args.queue is not None:
            queues = [q for q in queues if q.queue_id == args.queue]
        kind, value = start
        for mq in queues:
            if kind == "earliest":
                pos = c.min_offset(mq)
            elif kind == "latest":
                pos = c.max_offset(mq)
            elif kind == "offset":
                pos = value
            elif kind == "time":
                pos = c.offset_by_timestamp(mq, value)
            else:
                committed = c.query_offset(mq)
                pos = committed if committed is not None and committed >= 0 else c.min_offset(mq)
            while remaining is None or remaining > 0:
                r = c.pull(mq, pos, sub, 32 if remaining is None else min(32, remaining))
                if r.status is PullStatus.OFFSET_ILLEGAL:
                    print(f"rmq: warning: offset {pos} is outside {args.topic}/{mq.key()} [{r.min_offset}, "
                          f"{r.max_offset})", file=sys.stderr)
                    pos = r.max_offset if pos > r.max_offset else r.min_offset
                    continue
                for m in r.messages.to_pylist():
                    m = _Row(m)
                    if args.json:
                        write_json(dict(message_to_json(m), broker_name=mq.broker_name))
                    else:
                        sys.stdout.write(message_text(m, mq.key()) + "\n")
                    if remaining is not None:
                        remaining -= 1
                        if remaining == 0:
                            pos = m.queue_offset + 1
                            break
                else:
                    pos = max(pos, r.next_begin_offset)
                if r.status is PullStatus.NO_NEW_MSG or r.next_begin_offset >= r.max_offset:
                    break
            sys.stdout.flush()
            if args.commit:
                c.commit_offset(mq, pos)


class _Row:
    """A pulled row with the attributes the store's message printers read (timestamps in ms)."""

    queue_offset: int

    def __init__(self, row: dict):
        self.__dict__.update(row)
        self.keys = row["keys"] or []
        self.properties = dict(row["properties"] or [])
        for name in ("born_timestamp", "store_timestamp"):
            setattr(self, name, int(row[name].timestamp() * 1000))


def topics(args) -> None:
    with PullConsumer(args.namesrv, DEFAULT_GROUP, credentials=credentials(args)) as c:
        rows = []
        for topic in c.topics():
            bounds = c.queue_bounds(topic)
            if not bounds:
                continue
            rows.append({"topic": topic, "queues": len(bounds), "brokers": sorted({q.broker_name for q in bounds}),
                         "messages": sum(mx - mn for mn, mx in bounds.values())})
    print_topics(rows, args.json)


def stat(args) -> None:
    """Per queue of every broker: offsets, and with --group the committed offset and lag as the brokers keep them
    (QUERY_CONSUMER_OFFSET, the lag a RocketMQ admin sees with consumerProgress)."""
    with PullConsumer(args.namesrv, args.group or DEFAULT_GROUP, credentials=credentials(args)) as c:
        rows: list[dict] = []
        for topic in ([args.topic] if args.topic else c.topics()):
            for mq, (lo, hi) in sorted(c.queue_bounds(topic).items()):
                row = {"topic": topic, "broker_name": mq.broker_name, "queue_id": mq.queue_id, "min_offset": lo,
                       "max_offset": hi, "messages": hi - lo}
                if args.group:
                    committed = c.query_offset(mq)
                    row["committed_offset"] = committed
                    row["lag"] = None if committed is None else hi - committed
                rows.append(row)
    if args.json:
        out: dict = {"namesrv": args.namesrv, "queues": rows}
        if args.group:
            out["group"] = args.group
            out["total_lag"] = sum(r["lag"] for r in rows if r["lag"] is not None)
        write_json(out)
        return
    header = ["TOPIC", "QUEUE", "MIN", "MAX", "MESSAGES"] + (["COMMITTED", "LAG"] if args.group else [])
    cells = [[r["topic"], f"{r['broker_name']}:{r['queue_id']}", r["min_offset"], r["max_offset"], r["messages"]]
             + ([r["committed_offset"], r["lag"]] if args.group else []) for r in rows]
    print(table(cells, header) if rows else "no topics")
    line = f"total: {plural(sum(r['messages'] for r in rows), 'message')} in {plural(len(rows), 'queue')}"
    if args.group:
        line += f"; group {args.group} lag {sum(r['lag'] for r in rows if r['lag'] is not None)}"
    print(line)


def _chosen_queue(topic: str, queues: list[MessageQueue], broker: Optional[str], qid: int, where: str,
                  name_broker: str) -> MessageQueue:
    """The queue a line's "broker_name"/"queue_id" (or --queue) names among the topic's write queues; UsageError
    starting with `where` when it names none, or a queue id that more than one broker has."""
    if broker is not None:
        mq = MessageQueue(topic, broker, qid)
        if mq not in queues:
            raise UsageError(f"{where}: topic {topic!r} has no write queue {mq.key()} (it has "
                             f"{_queue_names(queues)})")
        return mq
    same = [q for q in queues if q.queue_id == qid]
    if not same:
        raise UsageError(f"{where}: topic {topic!r} has no write queue {qid} (it has {_queue_names(queues)})")
    if len(same) > 1:
        raise UsageError(f"{where}: topic {topic!r} has a queue {qid} on {len(same)} brokers "
                         f"({', '.join(q.broker_name for q in same)}); name one with {name_broker}")
    return same[0]


def _queue_names(queues: list[MessageQueue]) -> str:
    by_broker: dict[str, list[int]] = {}
    for q in sorted(queues):
        by_broker.setdefault(q.broker_name, []).append(q.queue_id)
    return ", ".join(f"{b}:{ids[0]}..{ids[-1]}" if ids == list(range(ids[0], ids[-1] + 1)) and len(ids) > 1
                     else ", ".join(f"{b}:{i}" for i in ids) for b, ids in by_broker.items())


class _Queues:
    """Each topic's write queues, and the queue of each message as the producer chooses it: the line's
    broker_name/queue_id, else its sharding key's, else round robin over the topic's queues."""

    def __init__(self, aio: AsyncProducer):
        self.aio = aio
        self.queues: dict[str, list[MessageQueue]] = {}
        self.made: set[str] = set()
        self.turn: dict[str, int] = {}

    async def known(self, topic: str) -> list[MessageQueue]:
        """The write queues the topic has, or will have when its first send makes it (asks nothing to change)."""
        if topic not in self.queues:
            queues = await self.aio.api.queues(topic, readable=False)
            if not queues:
                defaults = await self.aio.api.queues(DEFAULT_TOPIC, readable=False)
                if not defaults:
                    raise MQClientError(17, f"topic {topic!r} has no route and no broker allows auto-creation "
                                            f"({DEFAULT_TOPIC})", ";".join(self.aio.api.namesrv_addrs), "send")
                queues = [MessageQueue(topic, b, i) for b in sorted({q.broker_name for q in defaults})
                          for i in range(self.aio.default_topic_queue_nums)]
            self.queues[topic] = queues
        return self.queues[topic]

    async def made_queues(self, topic: str) -> list[MessageQueue]:
        """The write queues, the topic made first when it has no route yet."""
        if topic not in self.made:
            self.queues[topic] = await self.aio.write_queues(topic)
            self.made.add(topic)
        return self.queues[topic]

    def choose(self, m, lineno: int, queues: list[MessageQueue]) -> MessageQueue:
        if m.queue_id is not None:
            return _chosen_queue(m.topic, queues, m.broker_name, m.queue_id, f"line {lineno}",
                                 '"broker_name" in the line')
        if m.broker_name is not None:
            raise UsageError(f'line {lineno}: "broker_name" {m.broker_name!r} needs a "queue_id"')
        if m.sharding_key:
            return self.aio.queue_for(queues, m.sharding_key)
        turn = self.turn.get(m.topic, 0)
        self.turn[m.topic] = turn + 1
        return queues[turn % len(queues)]


def produce_file(args) -> dict:
    """`produce --file` through brokers: the lines checked as for a store (a regular file whole, first), each
    message's queue chosen, and each queue's messages sent as SEND_BATCH_MESSAGE batches of up to --batch-size
    messages (and BATCH_BYTES), the queues' batches at once, in input order within a queue."""
    with Producer(args.namesrv, credentials=credentials(args)) as p:
        chooser = _Queues(p.aio)

        def check(m, lineno: int) -> None:
            if len(m.body) > MAX_MESSAGE_SIZE:
                raise UsageError(f"line {lineno}: body is {len(m.body)} bytes, more than a RocketMQ producer "
                                 f"sends ({MAX_MESSAGE_SIZE}, maxMessageSize)")
            if m.queue_id is not None or m.broker_name is not None:
                chooser.choose(m, lineno, run_blocking(chooser.known, m.topic))

        def flush(batch: list, first_line: int) -> None:
            try:
                run_blocking(_send_round, chooser, batch, first_line, args.batch_size)
            except MQClientError as e:
                raise Failure(str(e)) from None
            except PartialFlush as e:
                if isinstance(e.cause, MQClientError):
                    e.cause = Failure(str(e.cause))
                raise

        return read_lines_and_flush(args, check, flush, args.batch_size * FILE_ROUND)


async def _send_round(chooser: _Queues, batch: list, first_line: int, batch_size: int) -> None:
    per_queue: dict[MessageQueue, list] = {}
    for i, m in enumerate(batch):
        queues = await chooser.made_queues(m.topic)
        per_queue.setdefault(chooser.choose(m, first_line + i, queues), []).append(m)
    sent = dict.fromkeys(per_queue, 0)

    async def send_queue(mq: MessageQueue, messages: list) -> None:
        start = 0
        while start < len(messages):
            end, size = start, 0
            while end < len(messages) and end - start < batch_size and (end == start or size < BATCH_BYTES):
                size += len(messages[end].body)
                end += 1
            chunk = messages[start:end]
            await chooser.aio.send_batch(mq.topic, [m.body for m in chunk], tags=[m.tags for m in chunk],
                                         keys=[m.keys for m in chunk], properties=[m.properties for m in chunk],
                                         queue=mq)
            sent[mq] += len(chunk)
            start = end

    results = await asyncio.gather(*(send_queue(mq, ms) for mq, ms in per_queue.items()), return_exceptions=True)
    failures = [r for r in results if isinstance(r, BaseException)]
    if not failures:
        return
    total = sum(sent.values())
    if not total:
        raise failures[0]
    detail = f"{total} ({', '.join(f'{n} to {mq.topic}/{mq.key()}' for mq, n in sorted(sent.items()) if n)})"
    raise PartialFlush(failures[0] if isinstance(failures[0], Exception) else RuntimeError(str(failures[0])),
                       total, detail)
