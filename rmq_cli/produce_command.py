"""`rmq produce`: append messages given as arguments, or JSON lines from a file or stdin (checked whole before
anything is written when the input is a file), or send them through brokers with --namesrv."""
from __future__ import annotations

import argparse
from typing import Optional

from rmq_log import Sent

from .common import (
    EXIT_OK,
    UsageError,
    add_place_arguments,
    check_topic_name,
    key_value,
    log_of,
    non_negative,
    positive,
    write_json,
)
from .message_lines import print_file_summary, produce_file


def add_produce_command(sub, common) -> None:
    p = sub.add_parser("produce", parents=[common], help="append messages",
                       description="Append messages: each BODY argument is one message, or --file reads JSON lines "
                                   '({"body": "...", "tags": "...", "keys": [...], "properties": {...}, '
                                   '"queue_id": 0}; "topic", "sharding_key", "born_timestamp", "broker_name" '
                                   '(with --namesrv: the queue\'s broker) and "body_base64": true are accepted too). '
                                   "The topic is created with defaultTopicQueueNums queues on first write.")
    p.add_argument("-t", "--topic", help='the topic (for --file: every line goes to it, whatever its "topic"; '
                                          "without it, each line's own)")
    p.add_argument("--tags", help="the message tag (RocketMQ's TAGS)")
    p.add_argument("--keys", help='space-separated keys, e.g. "order-1 user-7"')
    p.add_argument("-p", "--property", type=key_value, action="append", default=[], metavar="KEY=VALUE",
                   help="a user property (repeatable)")
    p.add_argument("-q", "--queue", type=queue_arg, metavar="N",
                   help="the queue (default: round robin); with --namesrv BROKER:N, or N when one broker has it")
    p.add_argument("--sharding-key", metavar="KEY", help="keep every message with this key in one queue")
    p.add_argument("-f", "--file", metavar="FILE", help="read JSON lines from FILE, or - for stdin")
    p.add_argument("--batch-size", type=positive, default=1000, metavar="N",
                   help="with --file: messages per put_batch append, or with --namesrv per SEND_BATCH_MESSAGE to "
                        "one queue (default 1000)")
    p.add_argument("--progress", action="store_true", help="show a progress bar even when stderr is not a terminal")
    p.add_argument("--json", action="store_true", help="print results as JSON")
    p.add_argument("bodies", nargs="*", metavar="BODY", help="message bodies, one message each")
    add_place_arguments(p)
    p.set_defaults(run=cmd_produce)


def queue_arg(text: str) -> tuple[Optional[str], int]:
    """--queue N, or BROKER:N (a queue of one broker, through brokers): (broker name or None, queue id)."""
    broker, sep, qid = text.rpartition(":")
    if sep and not broker:
        raise argparse.ArgumentTypeError(f"expected N or BROKER:N, got {text!r}")
    try:
        return (broker if sep else None), non_negative(qid)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected N or BROKER:N (N a non-negative integer), got {text!r}") from None


def cmd_produce(args) -> int:
    if args.file is not None and args.bodies:
        raise UsageError("give message bodies as arguments or --file, not both")
    if args.file is None and not args.bodies:
        raise UsageError("nothing to produce: give BODY arguments, or --file FILE (--file - reads JSON lines "
                         "from stdin)")
    if args.file is None:
        if not args.topic:
            raise UsageError("--topic is required")
        check_topic_name(args.topic)
        props = dict(args.property) or None
        for k, v in args.property:
            if not v:
                raise UsageError(f"--property {k}=: empty values are not stored")
    elif args.topic:
        check_topic_name(args.topic)
    log = log_of(args)
    if args.file is not None:
        with log.line_writer(args.batch_size) as writer:
            summary = produce_file(args, writer.check, writer.flush, writer.lines_per_flush)
        print_file_summary(summary, args.json)
        return EXIT_OK
    named = log.names_brokers

    def show(r: Sent) -> None:
        if args.json:
            write_json({"status": r.status, "topic": r.topic, **r.queue.fields(named), "queue_offset": r.queue_offset,
                        "msg_id": r.msg_id, **r.details})
        else:
            uniq = f" uniq_key={r.details['uniq_key']}" if "uniq_key" in r.details else ""
            print(f"{r.status} {r.topic}/{r.queue.name(named)}@{r.queue_offset} msg_id={r.msg_id}{uniq}")

    log.send(args.topic, [b.encode("utf-8", "surrogateescape") for b in args.bodies], args.tags, args.keys, props,
             args.sharding_key, args.queue, show)
    return EXIT_OK
