"""`rmq topics` and `rmq stat`: the topics with their queue and message counts, and per queue its offsets and a
group's committed offset and lag (on a store, or through brokers with --namesrv)."""
from __future__ import annotations

import os

from .common import (
    EXIT_OK,
    add_namesrv_options,
    group_offsets,
    open_store,
    over_the_wire,
    plural,
    print_topics,
    require_topic,
    table,
    write_json,
)


def add_topics_command(sub, common) -> None:
    p = sub.add_parser("topics", parents=[common], help="list topics",
                       description="List the topics with their queue counts and message counts.")
    p.add_argument("--json", action="store_true", help="print the topics as JSON")
    add_namesrv_options(p)
    p.set_defaults(run=cmd_topics)


def add_stat_command(sub, common) -> None:
    p = sub.add_parser("stat", parents=[common], help="per-queue offsets and group lag",
                       description="Per queue: min and max offset and the messages between them; with --group, "
                                   "the group's committed offset and its lag (max - committed).")
    p.add_argument("-t", "--topic", help="only this topic")
    p.add_argument("-g", "--group", metavar="G", help="show this consumer group's committed offsets and lag")
    p.add_argument("--json", action="store_true", help="print the queues (and the group's offsets) as JSON")
    add_namesrv_options(p)
    p.set_defaults(run=cmd_stat)


def cmd_topics(args) -> int:
    if args.namesrv:
        from . import wire_commands
        return over_the_wire(lambda: wire_commands.topics(args))
    with open_store(args, read_only=True) as store:
        rows = []
        for topic in store.topics():
            cfg = store.topic_config.table[topic]
            queues = store.queues(topic)
            messages = sum(store.max_offset(topic, q) - store.min_offset(topic, q) for q in queues)
            rows.append({"topic": topic, "queues": len(queues), "read_queue_nums": cfg.readQueueNums,
                         "write_queue_nums": cfg.writeQueueNums, "messages": messages})
    print_topics(rows, args.json)
    return EXIT_OK


def cmd_stat(args) -> int:
    if args.namesrv:
        from . import wire_commands
        return over_the_wire(lambda: wire_commands.stat(args))
    offsets = group_offsets(args) if args.group else None
    with open_store(args, read_only=True) as store:
        topics = [args.topic] if args.topic else store.topics()
        rows = []
        for topic in topics:
            for qid in require_topic(store, topic):
                lo, hi = store.min_offset(topic, qid), store.max_offset(topic, qid)
                row = {"topic": topic, "queue_id": qid, "min_offset": lo, "max_offset": hi, "messages": hi - lo}
                if offsets is not None:
                    from store.offset_store import ReadOffsetType
                    committed = offsets.read_offset((topic, qid), ReadOffsetType.READ_FROM_STORE)
                    row["committed_offset"] = committed if committed >= 0 else None
                    row["lag"] = hi - committed if committed >= 0 else None
                rows.append(row)
        cl = {"min_offset": store.commit_log_min_offset(), "max_offset": store.commit_log_max_offset()}
    if args.json:
        out = {"store": os.path.abspath(args.store), "commit_log": cl, "queues": rows}
        if args.group:
            out["group"] = args.group
            out["total_lag"] = sum(r["lag"] for r in rows if r["lag"] is not None)
        write_json(out)
        return EXIT_OK
    header = ["TOPIC", "QUEUE", "MIN", "MAX", "MESSAGES"]
    if offsets is not None:
        header += ["COMMITTED", "LAG"]
    cells = [[r["topic"], r["queue_id"], r["min_offset"], r["max_offset"], r["messages"]]
             + ([r["committed_offset"], r["lag"]] if offsets is not None else []) for r in rows]
    print(f"commitlog offsets {cl['min_offset']}..{cl['max_offset']}")
    print(table(cells, header) if rows else "no topics")
    total = sum(r["messages"] for r in rows)
    line = f"total: {plural(total, 'message')} in {plural(len(rows), 'queue')}"
    if offsets is not None:
        line += f"; group {args.group} lag {sum(r['lag'] for r in rows if r['lag'] is not None)}"
    print(line)
    return EXIT_OK
