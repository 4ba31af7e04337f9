"""`rmq query`: find messages through RocketMQ's index, on a store or through brokers with --namesrv.

    rmq query --topic T --key K [--begin TIME] [--end TIME] [--max N]   by one of the messages' KEYS (mqadmin
                                                                        queryMsgByKey)
    rmq query --topic T --msg-id ID                                     by the msgId a producer's SendResult shows
                                                                        (UNIQ_KEY; queryMsgByUniqueKey)
    rmq query --offset-msg-id ID                                        by the broker's offset msgId (store host
                                                                        and commitlog offset; queryMsgByOffset)
"""
from __future__ import annotations

import datetime
import sys

from rmq_log import FOREVER

from .common import (
    EXIT_OK,
    Failure,
    UsageError,
    add_place_arguments,
    check_topic_name,
    log_of,
    message_text,
    message_to_json,
    plural,
    positive,
    write_json,
)


def add_query_command(sub, common) -> None:
    p = sub.add_parser("query", parents=[common], help="find messages by key, msgId or offset msgId",
                       description="Find messages through the store's index (RocketMQ's IndexFile): by one of "
                                   "their KEYS, by the msgId a producer was given (UNIQ_KEY), or by an offset "
                                   "msgId. Newest first.")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("-k", "--key", help="a key among the messages' KEYS (needs --topic)")
    what.add_argument("-i", "--msg-id", metavar="ID", help="the msgId a producer's SendResult showed (needs --topic)")
    what.add_argument("--offset-msg-id", metavar="ID", help="an offset msgId (32 hex digits: store host, port, "
                                                            "commitlog offset)")
    p.add_argument("-t", "--topic", help="the topic to search")
    p.add_argument("--begin", metavar="TIME", help="with --key: stored at or after TIME (ISO-8601 or ms)")
    p.add_argument("--end", metavar="TIME", help="with --key: stored at or before TIME (ISO-8601 or ms)")
    p.add_argument("--max", type=positive, default=64, metavar="N", help="with --key: at most N messages (64)")
    p.add_argument("--json", action="store_true", help="print each message as a JSON line")
    add_place_arguments(p)
    p.set_defaults(run=cmd_query)


def _time(text, option: str, default: int) -> int:
    if text is None:
        return default
    if text.isdigit():
        return int(text)
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(f"{option} {text!r}: expected an ISO-8601 time or milliseconds since the epoch") from None
    if when.tzinfo is None:
        when = when.astimezone()  # local time, as a user typing it means
    return int(when.timestamp() * 1000)


def _check(args) -> tuple[int, int]:
    if (args.key is not None or args.msg_id is not None) and not args.topic:
        raise UsageError(f"{'--key' if args.key is not None else '--msg-id'} needs --topic")
    if args.topic:
        check_topic_name(args.topic)
    if args.key is None and (args.begin or args.end):
        raise UsageError("--begin and --end go with --key")
    begin, end = _time(args.begin, "--begin", 0), _time(args.end, "--end", FOREVER)
    if begin > end:
        raise UsageError(f"--begin {args.begin} is after --end {args.end}")
    if args.offset_msg_id is not None:
        from rmq_common.message_codec import decode_message_id
        try:
            decode_message_id(args.offset_msg_id)
        except ValueError as e:
            raise UsageError(f"--offset-msg-id: {e}") from None
    return begin, end


def cmd_query(args) -> int:
    begin, end = _check(args)
    log = log_of(args)
    if args.key is not None:
        found = log.find_by_key(args.topic, args.key, args.max, begin, end)
    elif args.msg_id is not None:
        found = log.find_by_msg_id(args.topic, args.msg_id)
    else:
        found = log.find_by_offset_msg_id(args.offset_msg_id)
    return _show(args, found)


def _show(args, found: list) -> int:
    for m in found:
        if args.json:
            write_json(message_to_json(m))
        else:
            print(f"{m.properties.get('UNIQ_KEY', '-')} {m.msg_id} {message_text(m)}")
    if args.key is None and not found:
        what = f"msgId {args.msg_id} in topic {args.topic}" if args.msg_id else f"offset msgId {args.offset_msg_id}"
        raise Failure(f"no message with {what}")
    print(f"found {plural(len(found), 'message')}", file=sys.stderr)
    return EXIT_OK
