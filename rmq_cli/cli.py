"""The `rmq` command line: produce, consume, topics, stat and check over a store directory.

    rmq --store PATH produce --topic T [--tags X] [--keys "k1 k2"] [-p k=v]... [--queue N] BODY...
    rmq --store PATH produce [--topic T] --file F|-          (JSON lines)
    rmq --store PATH consume --topic T [--queue N] [--from earliest|latest|group|N] [--max N]
                             [--tags SEL] [--sql SEL] [--group G [--commit]] [--follow] [--json]
    rmq --store PATH topics [--json]
    rmq --store PATH stat [--topic T] [--group G] [--json]
    rmq --store PATH check [--json] [--progress]
    rmq --store PATH create-topic -t T -q N | delete-topic -t T | groups | reset-offsets -g G -t T --to WHEN
    rmq --store PATH query --topic T --key K [--begin TIME] [--end TIME] [--max N] | --topic T --msg-id ID
                           | --offset-msg-id ID    [--json]        (by key, msgId or offset msgId: the index)

Exit codes: 0 success, 1 a failure (corruption found, an I/O or store error), 2 a usage error (bad option or
value, malformed input, unknown topic or queue, unparsable selector). Errors go to stderr.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Optional

from rmq_log import Refused

from .admin_commands import add_admin_commands
from .common import ARGV, EXIT_FAILURE, EXIT_USAGE, Failure, Parser, UsageError, add_global_place_arguments
from .consume_command import add_consume_command
from .doctor import add_doctor_command
from .produce_command import add_produce_command
from .query_commands import add_query_command
from .serve import add_serve_commands
from .store_commands import add_check_command, add_clean_command, add_recover_command
from .topic_commands import add_stat_command, add_topics_command

# The page of the project's documentation (docs/ in its source) each command's --help names for more.
DOCS_PAGE = {"rmq": "docs/cli.md", "serve": "docs/broker.md", "namesrv": "docs/broker.md"}


def build_parser() -> argparse.ArgumentParser:
    # a place's arguments every command takes (--store, --config) are accepted before or after the command;
    # after it they override
    common = Parser(add_help=False)

    parser = Parser(prog="rmq", description="Produce, consume and inspect an rmq-spark message store (Apache "
                                             "RocketMQ's CommitLog + ConsumeQueue format).",
                     epilog="Exit codes: 0 success, 1 failure (e.g. corruption found), 2 usage error. "
                            f"More: {DOCS_PAGE['rmq']} in the rmq-spark source.")
    add_global_place_arguments(parser, common)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True

    for add in (add_produce_command, add_consume_command, add_topics_command, add_stat_command, add_check_command,
                add_clean_command, add_recover_command, add_admin_commands, add_serve_commands, add_doctor_command,
                add_query_command):
        add(sub, common)
    for name, command in sub.choices.items():
        command.epilog = f"More: {DOCS_PAGE.get(name, DOCS_PAGE['rmq'])} in the rmq-spark source."
    return parser


def main(argv: Optional[list[str]] = None) -> int:
    """The `rmq` console script; returns the exit code."""
    try:
        return _main(argv)
    except BrokenPipeError:
        # The reader went away (`rmq consume ... | head`): stop quietly, as other Unix tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except KeyboardInterrupt:
        return 130


def _main(argv: Optional[list[str]]) -> int:
    parser = build_parser()
    ARGV[:] = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    from store.errors import CorruptRecordError, StoreError, UnknownTopicError
    try:
        return args.run(args)
    except UsageError as e:
        print(f"rmq {args.command}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except Refused as e:  # a broker's refusal or silence, with its code and remark
        print(f"rmq: error: {e}", file=sys.stderr)
        return EXIT_FAILURE
    except UnknownTopicError as e:
        print(f"rmq {args.command}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except CorruptRecordError as e:
        print(f"rmq {args.command}: error: {e} (`rmq check` lists every problem)", file=sys.stderr)
        return EXIT_FAILURE
    except (Failure, StoreError, OSError) as e:
        if isinstance(e, BrokenPipeError):
            raise
        print(f"rmq {args.command}: error: {e}", file=sys.stderr)
        return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
