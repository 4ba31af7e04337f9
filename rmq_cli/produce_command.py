"""`rmq produce`: append messages given as arguments, or JSON lines from a file or stdin (checked whole before
anything is written when the input is a file), or send them through brokers with --namesrv."""
from __future__ import annotations

import argparse
import re
import time
from typing import Optional

from .common import (
    EXIT_OK,
    UsageError,
    add_namesrv_options,
    check_topic_name,
    key_value,
    non_negative,
    open_store,
    over_the_wire,
    positive,
    write_json,
)
from .message_lines import Message, print_file_summary, produce_file


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
    add_namesrv_options(p)
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


def _write_queue_count(store, topic: str) -> int:
    """Write queues the topic has, or will have when this write creates it."""
    store.topic_config.load()
    cfg = store.topic_config.table.get(topic)
    return cfg.writeQueueNums if cfg is not None else store.config.defaultTopicQueueNums


def _check_message(store, m: Message, lineno: int, queue_counts: dict) -> None:
    """What put_batch would refuse, found before anything is written (so the error names the line)."""
    nq = queue_counts.get(m.topic)
    if nq is None:
        nq = queue_counts[m.topic] = _write_queue_count(store, m.topic)
    if m.queue_id is not None and m.queue_id >= nq:
        raise UsageError(f"line {lineno}: queue_id {m.queue_id} is outside topic {m.topic!r}'s queues 0..{nq - 1}")
    if len(m.body) > store.config.maxMessageSize:
        raise UsageError(f"line {lineno}: body is {len(m.body)} bytes, more than maxMessageSize "
                         f"({store.config.maxMessageSize})")


def _put(store, batch: list[Message], first_line: int):
    from store.errors import InvalidMessageError
    try:
        return store.put_batch(
            [m.topic for m in batch], [m.body for m in batch], tags=[m.tags for m in batch],
            keys=[m.keys for m in batch], properties=[m.properties for m in batch],
            queue_id=[m.queue_id for m in batch] if any(m.queue_id is not None for m in batch) else None,
            sharding_key=[m.sharding_key for m in batch] if any(m.sharding_key for m in batch) else None,
            born_timestamp=[m.born_timestamp if m.born_timestamp is not None else int(time.time() * 1000)
                            for m in batch] if any(m.born_timestamp is not None for m in batch) else None)
    except InvalidMessageError as e:
        # put_batch names the message by its index in the batch: say which line that was.
        text = str(e)
        match = re.match(r"message (\d+): (.*)", text, re.S)
        if match and first_line:
            raise UsageError(f"line {first_line + int(match.group(1))}: {match.group(2)}") from None
        raise UsageError(text) from None


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
    if args.namesrv:
        from . import wire_commands
        if args.file is not None:
            return over_the_wire(lambda: print_file_summary(wire_commands.produce_file(args), args.json))
        return over_the_wire(lambda: wire_commands.produce(args, props))
    if args.queue is not None and args.queue[0] is not None:
        raise UsageError(f"--queue {args.queue[0]}:{args.queue[1]}: a store has no brokers; give the queue id "
                         f"(BROKER:N is for --namesrv)")
    queue_id = args.queue[1] if args.queue is not None else None
    with open_store(args, read_only=False) as store:
        if args.file is not None:
            queue_counts: dict[str, int] = {}
            summary = produce_file(args, lambda m, lineno: _check_message(store, m, lineno, queue_counts),
                                   lambda batch, first_line: _put(store, batch, first_line), args.batch_size)
            print_file_summary(summary, args.json)
            return EXIT_OK
        nq = _write_queue_count(store, args.topic)
        if queue_id is not None and queue_id >= nq:
            raise UsageError(f"--queue {queue_id}: topic {args.topic!r} has queues 0..{nq - 1}")
        batch = [Message(args.topic, b.encode("utf-8", "surrogateescape"), args.tags, args.keys, props, queue_id,
                          args.sharding_key) for b in args.bodies]
        result = _put(store, batch, 0)
        for r in result:
            if args.json:
                write_json({"status": str(r.status), "topic": r.topic, "queue_id": r.queue_id,
                             "queue_offset": r.queue_offset, "msg_id": r.msg_id, "uniq_key": r.uniq_key,
                             "commit_log_offset": r.commit_log_offset})
            else:
                print(f"{r.status} {r.topic}/{r.queue_id}@{r.queue_offset} msg_id={r.msg_id} uniq_key={r.uniq_key}")
    return EXIT_OK
