"""What every `rmq` command shares: exit codes and the errors that set them, the argument parser and option
types, opening where the messages are (rmq_log), and printing (tables, JSON lines, messages)."""
from __future__ import annotations

import argparse
import base64
import datetime
import difflib
import json
import sys
from typing import Optional

from rmq_log import Failure, MessageLog, UsageError, open_log, places

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
__all__ = ["Failure", "UsageError"]  # rmq_log's: the log and the commands raise the same ones

ARGV: list[str] = []  # the command line being parsed, for naming a misspelled option


class Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse's own usage errors: exit 2 with the usage line, as it does
        # a misspelled option first: argparse would blame a required option it then misses, or say nothing near
        message = _misspelled_option(self) or message
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _misspelled_option(parser: argparse.ArgumentParser) -> Optional[str]:
    """'unrecognized argument --topik; did you mean --topic?' for the first long option on the command line
    that the command does not have (the top-level parser hands unknown arguments up: look in the command's)."""
    command = parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            command = next((action.choices[t] for t in ARGV if t in action.choices), parser)
    known = [o for o in command._option_string_actions if o.startswith("--")]
    for token in ARGV:
        if token == "--":
            break
        name = token.split("=", 1)[0]
        if name.startswith("--") and len(name) > 2 and not any(k.startswith(name) for k in known):
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
            return f"unrecognized argument {name}" + (f"; did you mean {close[0]}?" if close else "")
    return None


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return value


def positive(text: str) -> int:
    value = non_negative(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def add_place_arguments(p) -> None:
    """The arguments of a command that works on any place the messages live (rmq_log.places): each place's."""
    for place in places.PLACES:
        place.add_command_arguments(p)


def add_global_place_arguments(parser, common) -> None:
    """The arguments every command takes, before the command or after it (common's)."""
    for place in places.PLACES:
        place.add_arguments(parser, common)


def log_of(args, **options) -> MessageLog:
    """Where the command's messages are: the place its arguments name (rmq_log.open_log); `options` are the
    command's that a place may refuse (e.g. cluster=args.cluster)."""
    return open_log(options, **vars(args))


def store_path(args, must_exist: bool) -> str:
    from rmq_log.store_log import store_path as checked
    return checked(args.store, must_exist)


def store_config(args):
    from rmq_log.store_log import store_config as loaded
    return loaded(args.config)


def open_store(args, read_only: bool):
    from rmq_log.store_log import open_store as opened
    return opened(args.store, args.config, read_only)


def show_progress(args) -> bool:
    return bool(getattr(args, "progress", False)) or sys.stderr.isatty()


def write_json(obj) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, separators=(", ", ": ")) + "\n")


def check_topic_name(topic: str, option: str = "--topic") -> None:
    from rmq_common.message_codec import check_topic
    try:
        check_topic(topic)
    except ValueError as e:
        raise UsageError(f"{option}: {e}") from None


def table(rows: list[list], header: list[str]) -> str:
    cells = [header] + [["-" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = []
    for r in cells:
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
    return "\n".join(line.rstrip() for line in lines)


def _body_fields(body: bytes) -> dict:
    try:
        return {"body": body.decode("utf-8")}
    except UnicodeDecodeError:
        return {"body": base64.b64encode(body).decode("ascii"), "body_base64": True}


def message_to_json(m) -> dict:
    out = {"topic": m.topic, "queue_id": m.queue_id, "queue_offset": m.queue_offset, "msg_id": m.msg_id,
           "tags": m.tags, "keys": list(m.keys), "properties": dict(m.properties)}
    out.update(_body_fields(m.body))
    out.update({"born_timestamp": m.born_timestamp, "store_timestamp": m.store_timestamp,
                "born_host": m.born_host, "store_host": m.store_host, "commit_log_offset": m.commit_log_offset})
    return out


def message_text(m, queue: Optional[str] = None) -> str:
    """One line per message: topic/queue@offset (queue: the queue's name, brokerName:queueId through brokers;
    the queue id on a store), the store time, tags, keys, user properties, then the body."""
    from rmq_common.message_codec import PROPERTY_KEYS, PROPERTY_TAGS, PROPERTY_UNIQ_KEY
    stamp = datetime.datetime.fromtimestamp(m.store_timestamp / 1000).isoformat(timespec="milliseconds")
    user = {k: v for k, v in m.properties.items() if k not in (PROPERTY_TAGS, PROPERTY_KEYS, PROPERTY_UNIQ_KEY)}
    fields = _body_fields(m.body)
    body = ("base64:" + fields["body"]) if fields.get("body_base64") else fields["body"]
    props = " ".join(f"{k}={v}" for k, v in user.items())
    return (f"{m.topic}/{m.queue_id if queue is None else queue}@{m.queue_offset} {stamp} tags={m.tags or '-'} "
            f"keys={','.join(m.keys) or '-'}{' ' + props if props else ''} | {body}")


def print_topics(rows: list[dict], as_json: bool) -> None:
    """`rmq topics` output, from a store or through brokers."""
    if as_json:
        write_json(rows)
    elif not rows:
        print("no topics")
    else:
        print(table([[r["topic"], r["queues"], r["messages"]] for r in rows], ["TOPIC", "QUEUES", "MESSAGES"]))
