"""produce, consume, topics and stat with --namesrv HOST:PORT: the same commands through RocketMQ brokers (the
project's client, rmq_client), with the same output; a queue is shown as brokerName:queueId."""
from __future__ import annotations

import sys
from typing import Optional

from rmq_acl import SessionCredentials
from rmq_client import MQClientError, Producer, PullConsumer, PullStatus, Subscription

from .common import DEFAULT_GROUP, message_text, message_to_json, plural, print_topics, table, write_json


def credentials(args) -> Optional[SessionCredentials]:
    """--access-key / --secret-key, else $RMQ_ACCESS_KEY / $RMQ_SECRET_KEY; None: requests go unsigned."""
    return SessionCredentials.resolve(args.access_key, args.secret_key, names=("--access-key", "--secret-key"))


def _subscription(args) -> Subscription:
    if args.sql is not None:
        return Subscription(args.sql, "SQL92")
    return Subscription(args.tags or "*", "TAG")


def produce(args, props: Optional[dict]) -> None:
    with Producer(args.namesrv, credentials=credentials(args)) as p:
        for body in args.bodies:
            r = p.send(args.topic, body.encode("utf-8", "surrogateescape"), tags=args.tags, keys=args.keys,
                       properties=props, sharding_key=args.sharding_key)
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
                        sys.stdout.write(message_text(m) + "\n")
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
