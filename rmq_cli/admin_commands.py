"""The operator's commands for a user without Java (what mqadmin's updateTopic, deleteTopic, consumerProgress and
resetOffsetByTime do), on a store directory or with --namesrv through brokers (rmq_client.Admin):

    rmq -s DIR create-topic -t T -q N            rmq create-topic --namesrv NS -t T -q N [--cluster C]
    rmq -s DIR delete-topic -t T                 rmq delete-topic --namesrv NS -t T [--cluster C]
    rmq -s DIR groups [--json]                   rmq groups --namesrv NS [--json]
    rmq -s DIR reset-offsets -g G -t T --to earliest|latest|TIME   (the same with --namesrv NS)

On a store, the store is changed in place: a broker serving it keeps the groups' offsets it has read in memory, so
reset a served store's group with --namesrv instead (the broker then tells its online members, as RocketMQ's)."""
from __future__ import annotations

import datetime
import sys

from rmq_log import EARLIEST, LATEST, check_group

from .common import (
    EXIT_OK,
    UsageError,
    add_place_arguments,
    check_topic_name,
    log_of,
    plural,
    positive,
    table,
    write_json,
)


def add_admin_commands(sub, common) -> None:
    p = sub.add_parser("create-topic", parents=[common], help="create a topic with N queues",
                       description="Create a topic with N read and write queues (mqadmin updateTopic): in the store, "
                                   "or with --namesrv on every master broker (of --cluster). A topic that exists "
                                   "with N queues is left as it is.")
    p.add_argument("-t", "--topic", required=True, help="the topic to create")
    p.add_argument("-q", "--queues", type=positive, required=True, metavar="N", help="queues (1..1024)")
    p.add_argument("--cluster", metavar="C", help="with --namesrv: only the brokers of this cluster")
    add_place_arguments(p)
    p.set_defaults(run=cmd_create_topic)

    p = sub.add_parser("delete-topic", parents=[common], help="delete a topic, its queues and offsets",
                       description="Delete a topic (mqadmin deleteTopic): its config, its consume queues and every "
                                   "group's offsets of it. Its messages stay in the commitlog until retention "
                                   "(rmq clean) removes their files. With --namesrv: on every master broker that "
                                   "has it (of --cluster), then from the name servers.")
    p.add_argument("-t", "--topic", required=True, help="the topic to delete")
    p.add_argument("--cluster", metavar="C", help="with --namesrv: only the brokers of this cluster")
    add_place_arguments(p)
    p.set_defaults(run=cmd_delete_topic)

    p = sub.add_parser("groups", parents=[common], help="list consumer groups with their offsets and lag",
                       description="Every consumer group with committed offsets, per topic: its queues, the sum of "
                                   "the committed offsets and the lag (messages after them); with --namesrv over "
                                   "every broker, with the members online (mqadmin consumerProgress).")
    p.add_argument("--json", action="store_true", help="print the groups as JSON")
    add_place_arguments(p)
    p.set_defaults(run=cmd_groups)

    p = sub.add_parser("reset-offsets", parents=[common], help="reset a group's offsets to a time or either end",
                       description="Set a group's committed offset of every queue of a topic to the first message "
                                   "stored at or after a time, or to the earliest or latest message (mqadmin "
                                   "resetOffsetByTime). With --namesrv the group's online members are told by their "
                                   "brokers and move there; an offline group's offsets are committed directly.")
    p.add_argument("-g", "--group", required=True, help="the consumer group whose offsets to reset")
    p.add_argument("-t", "--topic", required=True, help="every queue of this topic")
    p.add_argument("--to", required=True, metavar="WHEN",
                   help="earliest, latest, now, milliseconds since the epoch, or an ISO-8601 time (local time "
                        "unless it names its zone)")
    p.add_argument("--json", action="store_true", help="print the queues' old and new offsets as JSON")
    add_place_arguments(p)
    p.set_defaults(run=cmd_reset_offsets)


def parse_when(text: str) -> int:
    """--to's value as a timestamp in ms, or EARLIEST / LATEST."""
    if text == "earliest":
        return EARLIEST
    if text in ("latest", "now"):
        return LATEST
    if text.isdigit():
        return int(text)
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(f"--to {text!r}: expected earliest, latest, now, milliseconds since the epoch or an "
                         "ISO-8601 time") from None
    if when.tzinfo is None:
        when = when.astimezone()
    return int(when.timestamp() * 1000)


# -- create-topic / delete-topic -----------------------------------------------------------------------------------

def cmd_create_topic(args) -> int:
    check_topic_name(args.topic)
    if args.queues > 1024:
        raise UsageError(f"--queues {args.queues}: at most 1024")
    done = log_of(args, cluster=args.cluster).create_topic(args.topic, args.queues, args.cluster)
    if done.brokers is not None:
        print(f"topic {args.topic}: {plural(args.queues, 'queue')} on {', '.join(done.brokers)}")
    else:
        print(f"topic {args.topic}: {'exists' if done.existed else 'created'} with {plural(done.queues, 'queue')}")
    return EXIT_OK


def cmd_delete_topic(args) -> int:
    check_topic_name(args.topic)
    done = log_of(args, cluster=args.cluster).delete_topic(args.topic, args.cluster)
    if done.brokers is not None:
        print(f"topic {args.topic}: deleted on {', '.join(done.brokers)} and from the name server")
    else:
        print(f"topic {args.topic}: deleted ({plural(done.queues, 'queue')}"
              f"{'; offsets of ' + ', '.join(done.groups) if done.groups else ''}); its messages stay in the "
              "commitlog until retention (rmq clean) removes their files")
    return EXIT_OK


# -- groups ----------------------------------------------------------------------------------------------------

def cmd_groups(args) -> int:
    log = log_of(args)
    _print_groups(log.groups(), args.json, online=log.knows_members)
    return EXIT_OK


def _print_groups(rows: list[dict], as_json: bool, online: bool) -> None:
    if as_json:
        write_json(rows)
        return
    if not rows:
        print("no consumer groups")
        return
    header = ["GROUP", "TOPIC", "QUEUES", "COMMITTED", "LAG"] + (["ONLINE"] if online else [])
    print(table([[r["group"], r["topic"] or "-", r["queues"], r["committed"], r["lag"]]
                 + ([r["online"]] if online else []) for r in rows], header))
    print(f"total: {plural(len({r['group'] for r in rows}), 'group')}, lag "
          f"{sum(r['lag'] or 0 for r in rows)}")


# -- reset-offsets -----------------------------------------------------------------------------------------------

def cmd_reset_offsets(args) -> int:
    check_group(args.group)
    check_topic_name(args.topic)
    when = parse_when(args.to)
    rows, how = log_of(args).reset_offsets(args.group, args.topic, when)
    _print_reset(args, rows, how)
    return EXIT_OK


def _print_reset(args, rows: list[dict], how: str) -> None:
    if args.json:
        write_json({"group": args.group, "topic": args.topic, "queues": rows})
        return
    cells = [[f"{r['broker_name']}:{r['queue_id']}" if "broker_name" in r else r["queue_id"], r["old"], r["new"]]
             for r in rows]
    print(table(cells, ["QUEUE", "OLD", "NEW"]))
    print(f"group {args.group}: {plural(len(rows), 'queue')} of {args.topic} reset to {args.to}; {how}",
          file=sys.stderr if args.json else sys.stdout)
