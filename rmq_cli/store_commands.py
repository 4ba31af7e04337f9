"""The store's own commands: `rmq check` (verify every record and unit, read-only), `rmq clean` (retention) and
`rmq recover` (open for writing, running the recovery and the consume-queue repairs)."""
from __future__ import annotations

from .common import (
    EXIT_FAILURE,
    EXIT_OK,
    UsageError,
    open_store,
    plural,
    show_progress,
    store_config,
    store_path,
    table,
    write_json,
)


def add_check_command(sub, common) -> None:
    p = sub.add_parser("check", parents=[common], help="verify every record and consume-queue unit",
                       description="Walk every commitlog record (MAGICCODE, sizes, PHYSICALOFFSET, body CRC) and "
                                   "every consume-queue unit (it points at a valid record of its topic and queue "
                                   "with the same QUEUEOFFSET, size and tag hash; units dense). Read-only. Exits 1 "
                                   "when it finds a problem.")
    p.add_argument("--json", action="store_true", help="print the findings as JSON")
    p.add_argument("--progress", action="store_true", help="show progress bars even when stderr is not a terminal")
    p.set_defaults(run=cmd_check)


def cmd_check(args) -> int:
    from store.store_check import check_store
    path = store_path(args, must_exist=True)
    config = store_config(args)
    try:
        report = check_store(path, config, progress=show_progress(args))
    except FileNotFoundError as e:
        raise UsageError(f"--store: {e}") from None
    if args.json:
        write_json(report.to_dict())
    else:
        for p in report.problems:
            print(p)
        if report.omitted_problems:
            print(f"... and {report.omitted_problems} more errors not listed")
        print(report.summary())
    return EXIT_OK if report.ok else EXIT_FAILURE


def add_clean_command(sub, common) -> None:
    p = sub.add_parser("clean", parents=[common], help="delete expired commitlog and consume-queue files",
                       description="RocketMQ's expired-file cleanup: commitlog files whose last write is older than "
                                   "fileReservedTime hours (default 72; set it with --config) are deleted oldest "
                                   "first, never the file being written; then consume-queue files wholly below the "
                                   "commitlog's new minimum. Prints what went and each queue's new min offset.")
    p.add_argument("--now", type=float, default=None, metavar="EPOCH_SECONDS",
                   help="judge expiry as of this time (default: now)")
    p.add_argument("--periodic", action="store_true",
                   help="behave as the periodic service: delete only in a deleteWhen hour or when the disk is "
                        "fuller than diskMaxUsedSpaceRatio")
    p.add_argument("--json", action="store_true", help="print what was deleted as JSON")
    p.set_defaults(run=cmd_clean)


def cmd_clean(args) -> int:
    store_path(args, must_exist=True)
    with open_store(args, read_only=False) as store:
        try:
            summary = store.clean_expired(now=args.now, periodic=args.periodic)
        except ValueError as e:
            raise UsageError(str(e)) from None
    if args.json:
        write_json(summary.to_dict())
        return EXIT_OK
    files = summary.commit_log_files_deleted
    print(f"deleted {plural(len(files), 'commitlog file')}{': ' + ', '.join(files) if files else ''} and "
          f"{plural(summary.consume_queue_files_deleted, 'consume-queue file')} ({summary.reason})")
    print(f"commitlog min offset: {summary.commit_log_min_offset}")
    rows = [[t, q, off] for t, qs in sorted(summary.min_offsets.items()) for q, off in sorted(qs.items())]
    if rows:
        print(table(rows, ["topic", "queue", "min offset"]))
    return EXIT_OK


def add_recover_command(sub, common) -> None:
    p = sub.add_parser("recover", parents=[common], help="open the store for writing, running its recovery",
                       description="Open the store as a writer does: after an unclean stop this runs the crash "
                                   "recovery (cut a torn tail, re-dispatch complete records). When the commitlog "
                                   "is damaged with intact messages after the damage, or flushed messages are "
                                   "missing, recovery refuses and says how many messages a cut would drop; "
                                   "--truncate cuts anyway. Run `rmq check` first to see the damage.")
    p.add_argument("--truncate", action="store_true",
                   help="cut the log at the damage even when that drops messages that still validate")
    p.set_defaults(run=cmd_recover)


def cmd_recover(args) -> int:
    from store.message_store import MessageStore
    path = store_path(args, must_exist=True)
    with MessageStore(path, store_config(args), recover_truncate=args.truncate) as store:
        rebuilt = store.rebuild_consume_queues()
        end = store.commit_log_max_offset()
        total = sum(store.max_offset(t, q) - store.min_offset(t, q) for t in store.topics() for q in store.queues(t))
    if rebuilt:
        print(f"rebuilt {plural(rebuilt, 'consume-queue unit')} below the queues' first files from the commitlog")
    print(f"store {path} recovered: commitlog ends at offset {end}; {plural(total, 'message')} in the consume "
          "queues")
    return EXIT_OK
