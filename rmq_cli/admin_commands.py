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

from .common import (
    EXIT_OK,
    UsageError,
    add_namesrv_options,
    check_topic_name,
    over_the_wire,
    plural,
    positive,
    require_topic,
    store_path,
    table,
    write_json,
)

EARLIEST, LATEST = 0, -1  # rmq_client.admin's


def add_admin_commands(sub, common) -> None:
    p = sub.add_parser("create-topic", parents=[common], help="create a topic with N queues",
                       description="Create a topic with N read and write queues (mqadmin updateTopic): in the store, "
                                   "or with --namesrv on every master broker (of --cluster). A topic that exists "
                                   "with N queues is left as it is.")
    p.add_argument("-t", "--topic", required=True, help="the topic to create")
    p.add_argument("-q", "--queues", type=positive, required=True, metavar="N", help="queues (1..1024)")
    p.add_argument("--cluster", metavar="C", help="with --namesrv: only the brokers of this cluster")
    add_namesrv_options(p)
    p.set_defaults(run=cmd_create_topic)

    p = sub.add_parser("delete-topic", parents=[common], help="delete a topic, its queues and offsets",
                       description="Delete a topic (mqadmin deleteTopic): its config, its consume queues and every "
                                   "group's offsets of it. Its messages stay in the commitlog until retention "
                                   "(rmq clean) removes their files. With --namesrv: on every master broker that "
                                   "has it (of --cluster), then from the name servers.")
    p.add_argument("-t", "--topic", required=True, help="the topic to delete")
    p.add_argument("--cluster", metavar="C", help="with --namesrv: only the brokers of this cluster")
    add_namesrv_options(p)
    p.set_defaults(run=cmd_delete_topic)

    p = sub.add_parser("groups", parents=[common], help="list consumer groups with their offsets and lag",
                       description="Every consumer group with committed offsets, per topic: its queues, the sum of "
                                   "the committed offsets and the lag (messages after them); with --namesrv over "
                                   "every broker, with the members online (mqadmin consumerProgress).")
    p.add_argument("--json", action="store_true", help="print the groups as JSON")
    add_namesrv_options(p)
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
    add_namesrv_options(p)
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


def _group_name(group: str) -> None:
    from store.offset_store import check_group
    try:
        check_group(group)
    except ValueError as e:
        raise UsageError(f"--group: {e}") from None


def _admin(args):
    from rmq_client.admin import Admin

    from .wire_commands import credentials
    return Admin(args.namesrv, credentials=credentials(args))


def _store_only(args, option: str) -> None:
    if getattr(args, option.lstrip("-"), None):
        raise UsageError(f"{option} is for --namesrv; a store is one broker's")


# -- create-topic / delete-topic -----------------------------------------------------------------------------------

def cmd_create_topic(args) -> int:
    check_topic_name(args.topic)
    if args.queues > 1024:
        raise UsageError(f"--queues {args.queues}: at most 1024")
    if args.namesrv:
        def run() -> None:
            with _admin(args) as admin:
                brokers = admin.create_topic(args.topic, args.queues, args.cluster)
            print(f"topic {args.topic}: {plural(args.queues, 'queue')} on {', '.join(brokers)}")
        return over_the_wire(run)
    _store_only(args, "--cluster")
    from store.message_store import MessageStore
    with MessageStore(store_path(args, must_exist=False), _config(args)) as store:
        if store.has_topic(args.topic):
            have = len(store.queues(args.topic))
            if have != args.queues:
                raise UsageError(f"--queues {args.queues}: topic {args.topic} exists with {have} queues (a store "
                                 "does not change a topic's queue count)")
            print(f"topic {args.topic}: exists with {plural(have, 'queue')}")
            return EXIT_OK
        store.create_topic(args.topic, args.queues)
    print(f"topic {args.topic}: created with {plural(args.queues, 'queue')}")
    return EXIT_OK


def _config(args):
    from .common import store_config
    return store_config(args)


def cmd_delete_topic(args) -> int:
    check_topic_name(args.topic)
    if args.namesrv:
        def run() -> None:
            with _admin(args) as admin:
                brokers = admin.delete_topic(args.topic, args.cluster)
            print(f"topic {args.topic}: deleted on {', '.join(brokers)} and from the name server")
        return over_the_wire(run)
    _store_only(args, "--cluster")
    from store.message_store import MessageStore
    from store.offset_store import OffsetStore, committed_groups
    path = store_path(args, must_exist=True)
    with MessageStore(path, _config(args)) as store:
        queues = len(require_topic(store, args.topic))
        store.delete_topic(args.topic)
    groups = [g for g, topics in committed_groups(path).items() if args.topic in topics]
    for group in groups:
        offsets = OffsetStore(path, group)
        offsets.load()
        offsets.remove_topic(args.topic)
        offsets.persist_all()
    print(f"topic {args.topic}: deleted ({plural(queues, 'queue')}"
          f"{'; offsets of ' + ', '.join(groups) if groups else ''}); its messages stay in the commitlog until "
          "retention (rmq clean) removes their files")
    return EXIT_OK


# -- groups ----------------------------------------------------------------------------------------------------

def cmd_groups(args) -> int:
    if args.namesrv:
        def run() -> None:
            with _admin(args) as admin:
                rows = [r.__dict__ for r in admin.groups()]
            _print_groups(rows, args.json, online=True)
        return over_the_wire(run)
    from store.message_store import MessageStore
    from store.offset_store import OffsetStore, committed_groups
    path = store_path(args, must_exist=True)
    rows = []
    with MessageStore(path, _config(args), read_only=True) as store:
        for group, topics in committed_groups(path).items():
            offsets = OffsetStore(path, group)
            offsets.load()
            for topic in topics:
                table_ = offsets.clone_offset_table(topic)
                exists = store.has_topic(topic)
                lag = sum(max(0, store.max_offset(topic, q) - o) for q, o in table_.items()
                          if exists and q in store.queues(topic)) if exists else None
                rows.append({"group": group, "topic": topic, "queues": len(table_),
                             "committed": sum(table_.values()), "lag": lag})
    _print_groups(rows, args.json, online=False)
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
    _group_name(args.group)
    check_topic_name(args.topic)
    when = parse_when(args.to)
    if args.namesrv:
        def run() -> None:
            with _admin(args) as admin:
                result = admin.reset_offsets(args.group, args.topic, when)
            rows = [{"broker_name": r.queue.broker_name, "queue_id": r.queue.queue_id, "old": r.old, "new": r.new}
                    for r in result.queues]
            how = []
            if result.told_brokers:
                how.append(f"online members told by {', '.join(result.told_brokers)}")
            if result.set_brokers:
                how.append(f"offsets committed on {', '.join(result.set_brokers)} (no member online)")
            _print_reset(args, rows, "; ".join(how))
        return over_the_wire(run)
    from store.message_store import MessageStore
    from store.offset_store import OffsetStore
    path = store_path(args, must_exist=True)
    offsets = OffsetStore(path, args.group)
    offsets.load()
    rows = []
    with MessageStore(path, _config(args), read_only=True) as store:
        for q in require_topic(store, args.topic):
            if when == LATEST:
                new = store.max_offset(args.topic, q)
            elif when == EARLIEST:
                new = store.min_offset(args.topic, q)
            else:
                new = store.offset_for_timestamp(args.topic, q, when)
            old = offsets.read_offset((args.topic, q))
            offsets.update_offset((args.topic, q), max(0, new))
            rows.append({"queue_id": q, "old": old if old >= 0 else None, "new": max(0, new)})
    offsets.persist_all()
    _print_reset(args, rows, "committed in the store")
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
