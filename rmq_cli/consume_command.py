"""`rmq consume`: pull messages as a RocketMQ pull consumer does, from one queue or every queue of a topic in turn,
optionally following and committing a group's offsets; on a store, or through brokers with --namesrv."""
from __future__ import annotations

import datetime
import sys
from typing import Optional

from rmq_log import Consume, QueueKey, Start, message_filter

from .common import (
    EXIT_OK,
    UsageError,
    add_place_arguments,
    log_of,
    message_text,
    message_to_json,
    non_negative,
    positive,
    write_json,
)


def add_consume_command(sub, common) -> None:
    p = sub.add_parser("consume", parents=[common], help="pull messages from a topic",
                       description="Pull messages the way a RocketMQ consumer does (get_message, advancing "
                                   "next_begin_offset), from one queue or every queue of the topic in turn.")
    p.add_argument("-t", "--topic", required=True, help="the topic to read")
    p.add_argument("-q", "--queue", type=non_negative, metavar="N", help="one queue (default: all queues)")
    p.add_argument("--from", dest="start", metavar="WHERE",
                   help="earliest, latest, group (the group's committed offset; earliest when it has none), a "
                        "queue offset N, or an ISO-8601 time (the first message stored at or after it). Default: "
                        "group with --group, else earliest")
    p.add_argument("-n", "--max", type=positive, metavar="N", help="stop after N messages")
    p.add_argument("--tags", metavar="SEL", help="a tag selector, e.g. 'TagA || TagC'")
    p.add_argument("--sql", metavar="SEL", help="a SQL92 selector on the properties, e.g. \"region = 'EU'\"")
    p.add_argument("-g", "--group", metavar="G", help="the consumer group (for --from group and --commit)")
    p.add_argument("--commit", action="store_true", help="commit the group's offsets after consuming")
    p.add_argument("--follow", action="store_true", help="keep waiting for new messages (long polling); Ctrl-C stops")
    p.add_argument("--json", action="store_true", help="one JSON object per message")
    add_place_arguments(p)
    p.set_defaults(run=cmd_consume)


def _parse_start(text: Optional[str], has_group: bool) -> Start:
    """('earliest'|'latest'|'group', None) or ('offset', N) or ('time', ms)."""
    if text is None:
        return ("group", None) if has_group else ("earliest", None)
    if text in ("earliest", "latest", "group"):
        if text == "group" and not has_group:
            raise UsageError("--from group needs --group G")
        return text, None
    if text.isdigit():
        return "offset", int(text)
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(f"--from {text!r}: expected earliest, latest, group, a queue offset or an ISO-8601 "
                         f"time") from None
    if when.tzinfo is None:
        when = when.astimezone()  # local time, as a user typing it means
    return "time", int(when.timestamp() * 1000)


def cmd_consume(args) -> int:
    if args.commit and not args.group:
        raise UsageError("--commit needs --group G")
    start = _parse_start(args.start, bool(args.group))
    message_filter(args.tags, args.sql)  # a bad selector fails before anything is opened
    log = log_of(args, follow=args.follow)
    named = log.names_brokers

    def emit(m, queue: QueueKey) -> None:
        if args.json:
            write_json(dict(message_to_json(m), broker_name=queue.broker_name) if named else message_to_json(m))
        else:
            sys.stdout.write(message_text(m, str(queue.name(named)) if named else None) + "\n")

    log.consume(Consume(args.topic, args.queue, start, args.max, args.tags, args.sql, args.group, args.commit,
                        args.follow), emit)
    return EXIT_OK
