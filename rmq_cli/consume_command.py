"""`rmq consume`: pull messages as a RocketMQ pull consumer does (get_message, advancing next_begin_offset), from
one queue or every queue of a topic in turn, optionally following and committing a group's offsets; through
brokers with --namesrv."""
from __future__ import annotations

import datetime
import inspect
import sys
import time
from typing import Optional

from .common import (
    DEFAULT_GROUP,
    EXIT_OK,
    UsageError,
    add_namesrv_options,
    group_offsets,
    message_text,
    message_to_json,
    non_negative,
    open_store,
    over_the_wire,
    positive,
    require_topic,
    write_json,
)

PULL_BATCH = 32


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
    add_namesrv_options(p)
    p.set_defaults(run=cmd_consume)


def _build_filter(args):
    if args.tags is None and args.sql is None:
        return None
    from filters import FilterParseError, MessageFilter
    try:
        tag_filter = MessageFilter.by_tags(args.tags) if args.tags is not None else None
    except FilterParseError as e:
        raise UsageError(f"--tags: {e}") from None
    try:
        sql_filter = MessageFilter.by_sql(args.sql) if args.sql is not None else None
    except FilterParseError as e:
        raise UsageError(f"--sql: {e}") from None
    return MessageFilter.both(tag_filter, sql_filter)


def _parse_start(text: Optional[str], has_group: bool):
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


class _Consumer:
    """Pulls with get_message in a loop, the way RocketMQ's pull consumer does, and prints what it gets."""

    def __init__(self, store, args, message_filter, offset_store, held: bool):
        self.store = store
        self.args = args
        self.filter = message_filter
        self.offsets = offset_store
        self.group = args.group or DEFAULT_GROUP
        self.remaining = args.max
        self.held = held
        self.positions: dict[int, int] = {}
        self.printed = 0

    def start(self, qid: int, start) -> int:
        kind, value = start
        topic = self.args.topic
        if kind == "earliest":
            return self.store.min_offset(topic, qid)
        if kind == "latest":
            return self.store.max_offset(topic, qid)
        if kind == "offset":
            return value
        if kind == "time":
            return self.store.offset_for_timestamp(topic, qid, value)
        from store.offset_store import ReadOffsetType
        committed = self.offsets.read_offset((topic, qid), ReadOffsetType.READ_FROM_STORE)
        return committed if committed >= 0 else self.store.min_offset(topic, qid)

    def emit(self, m) -> None:
        if self.args.json:
            write_json(message_to_json(m))
        else:
            sys.stdout.write(message_text(m) + "\n")
        self.printed += 1

    def pull(self, qid: int, suspend_ms: int = 0) -> bool:
        """Pull once from a queue; False when it has nothing more for now."""
        from store.get_message_result import GetMessageStatus as S
        pos = self.positions[qid]
        want = PULL_BATCH if self.remaining is None else min(PULL_BATCH, self.remaining)
        kwargs = {"suspend_timeout_ms": suspend_ms} if suspend_ms else {}
        r = self.store.get_message(self.group, self.args.topic, qid, pos, want, self.filter, **kwargs)
        if r.status == S.FOUND:
            for m in r.messages:
                self.emit(m)
                if self.remaining is not None:
                    self.remaining -= 1
                    if self.remaining == 0:
                        self.positions[qid] = m.queue_offset + 1
                        return False
            self.positions[qid] = r.next_begin_offset
            return r.next_begin_offset < r.max_offset
        if r.status == S.OFFSET_OVERFLOW_BADLY or (r.status == S.NO_MESSAGE_IN_QUEUE and pos > r.max_offset):
            print(f"rmq: warning: offset {pos} is past the end of {self.args.topic}/{qid} (max offset "
                  f"{r.max_offset})", file=sys.stderr)
            self.positions[qid] = r.max_offset
            return False
        if r.status in (S.NO_MESSAGE_IN_QUEUE, S.OFFSET_OVERFLOW_ONE, S.NO_MATCHED_LOGIC_QUEUE):
            return False
        # NO_MATCHED_MESSAGE, OFFSET_TOO_SMALL, OFFSET_FOUND_NULL, MESSAGE_WAS_REMOVING: move on as told.
        moved = r.next_begin_offset != pos
        self.positions[qid] = r.next_begin_offset
        return moved and r.next_begin_offset < r.max_offset

    def done(self) -> bool:
        return self.remaining == 0

    def commit(self) -> None:
        if self.offsets is None or not self.args.commit:
            return
        for qid, pos in self.positions.items():
            self.offsets.update_offset((self.args.topic, qid), pos)
        self.offsets.persist_all()


def cmd_consume(args) -> int:
    if args.commit and not args.group:
        raise UsageError("--commit needs --group G")
    start = _parse_start(args.start, bool(args.group))
    message_filter = _build_filter(args)  # a bad selector fails before the store is opened
    if args.namesrv:
        from . import wire_commands
        if args.follow:
            raise UsageError("--follow is not supported with --namesrv yet")
        return over_the_wire(lambda: wire_commands.consume(args, start))
    offset_store = group_offsets(args) if args.group else None
    with open_store(args, read_only=True) as store:
        queues = require_topic(store, args.topic)
        if args.queue is not None:
            if args.queue not in queues:
                raise UsageError(f"--queue {args.queue}: topic {args.topic!r} has queues 0..{len(queues) - 1}")
            queues = [args.queue]
        held = "suspend_timeout_ms" in inspect.signature(store.get_message).parameters
        if args.follow and not held:
            raise UsageError("--follow is not supported by this store version (no long polling)")
        consumer = _Consumer(store, args, message_filter, offset_store, held)
        for qid in queues:
            consumer.positions[qid] = consumer.start(qid, start)
        try:
            for qid in queues:  # each queue drained in turn, so output is ordered per queue
                while not consumer.done() and consumer.pull(qid):
                    pass
                if consumer.done():
                    break
            if args.follow:
                _follow(consumer, queues)
        except KeyboardInterrupt:
            pass  # Ctrl-C ends --follow: commit what was printed
        sys.stdout.flush()  # a reader that went away raises here, and nothing is committed
        consumer.commit()
    return EXIT_OK


def _follow(consumer: _Consumer, queues: list[int]) -> None:
    """Round robin over the queues; when a whole pass finds nothing, hold the pulls (long polling)."""
    hold_ms = max(50, 1000 // len(queues))
    last_commit = time.monotonic()
    while not consumer.done():
        before = consumer.printed
        for qid in queues:
            while not consumer.done() and consumer.pull(qid):
                pass
        if consumer.printed != before:
            sys.stdout.flush()
            if time.monotonic() - last_commit > 1.0:
                consumer.commit()
                last_commit = time.monotonic()
            continue
        for qid in queues:
            if consumer.done():
                break
            consumer.pull(qid, suspend_ms=hold_ms)
        sys.stdout.flush()
