"""`rmq topics` and `rmq stat`: the topics with their queue and message counts, and per queue its offsets and a
group's committed offset and lag (on a store, or through brokers with --namesrv)."""
from __future__ import annotations

from .common import EXIT_OK, add_place_arguments, log_of, plural, print_topics, table, write_json


def add_topics_command(sub, common) -> None:
    p = sub.add_parser("topics", parents=[common], help="list topics",
                       description="List the topics with their queue counts and message counts.")
    p.add_argument("--json", action="store_true", help="print the topics as JSON")
    add_place_arguments(p)
    p.set_defaults(run=cmd_topics)


def add_stat_command(sub, common) -> None:
    p = sub.add_parser("stat", parents=[common], help="per-queue offsets and group lag",
                       description="Per queue: min and max offset and the messages between them; with --group, "
                                   "the group's committed offset and its lag (max - committed).")
    p.add_argument("-t", "--topic", help="only this topic")
    p.add_argument("-g", "--group", metavar="G", help="show this consumer group's committed offsets and lag")
    p.add_argument("--json", action="store_true", help="print the queues (and the group's offsets) as JSON")
    add_place_arguments(p)
    p.set_defaults(run=cmd_stat)


def cmd_topics(args) -> int:
    print_topics(log_of(args).topics(), args.json)
    return EXIT_OK


def cmd_stat(args) -> int:
    log = log_of(args)
    stats = log.queue_stats(args.topic, args.group)
    cl = log.commit_log_bounds()
    named = log.names_brokers
    rows = []
    for q in stats:
        row = {"topic": q.topic, **q.queue.fields(named), "min_offset": q.min_offset, "max_offset": q.max_offset,
               "messages": q.max_offset - q.min_offset}
        if args.group:
            row["committed_offset"] = q.committed
            row["lag"] = q.lag
        rows.append(row)
    if args.json:
        out = {**log.where(), **({"commit_log": cl} if cl is not None else {}), "queues": rows}
        if args.group:
            out["group"] = args.group
            out["total_lag"] = sum(r["lag"] for r in rows if r["lag"] is not None)
        write_json(out)
        return EXIT_OK
    header = ["TOPIC", "QUEUE", "MIN", "MAX", "MESSAGES"]
    if args.group:
        header += ["COMMITTED", "LAG"]
    cells: list[list] = [[q.topic, q.queue.name(named), q.min_offset, q.max_offset, q.max_offset - q.min_offset]
             + ([q.committed, q.lag] if args.group else []) for q in stats]
    if cl is not None:
        print(f"commitlog offsets {cl['min_offset']}..{cl['max_offset']}")
    print(table(cells, header) if rows else "no topics")
    total = sum(r["messages"] for r in rows)
    line = f"total: {plural(total, 'message')} in {plural(len(rows), 'queue')}"
    if args.group:
        line += f"; group {args.group} lag {sum(r['lag'] for r in rows if r['lag'] is not None)}"
    print(line)
    return EXIT_OK
