"""The `rmq` command line: produce, consume, topics, stat and check over a store directory.

    rmq --store PATH produce --topic T [--tags X] [--keys "k1 k2"] [-p k=v]... [--queue N] BODY...
    rmq --store PATH produce [--topic T] --file F|-          (JSON lines)
    rmq --store PATH consume --topic T [--queue N] [--from earliest|latest|group|N] [--max N]
                             [--tags SEL] [--sql SEL] [--group G [--commit]] [--follow] [--json]
    rmq --store PATH topics [--json]
    rmq --store PATH stat [--topic T] [--group G] [--json]
    rmq --store PATH check [--json] [--progress]

Exit codes: 0 success, 1 a failure (corruption found, an I/O or store error), 2 a usage error (bad option or
value, malformed input, unknown topic or queue, unparsable selector). Errors go to stderr.
"""
from __future__ import annotations

import argparse
import base64
import binascii
import datetime
import difflib
import inspect
import json
import os
import re
import sys
import time
from typing import Iterator, Optional

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
DEFAULT_GROUP = "rmq-cli"
PULL_BATCH = 32
# Fields of `rmq consume --json` output that `rmq produce --file` accepts and ignores, so one can be piped
# into the other (they describe where a message was stored, which the new store decides).
_STORED_FIELDS = {"queue_offset", "msg_id", "commit_log_offset", "store_timestamp", "born_host", "store_host",
                  "sys_flag", "flag", "reconsume_times", "body_crc", "store_size"}
_LINE_FIELDS = {"body", "body_base64", "topic", "tags", "keys", "properties", "queue_id", "sharding_key",
                "born_timestamp"}


class UsageError(Exception):
    """Bad options, values or input: exit code 2."""


class Failure(Exception):
    """The command ran and failed (corruption found, a store error): exit code 1."""


# ---------------------------------------------------------------------------------------------------------------
# Argument parsing
# ---------------------------------------------------------------------------------------------------------------

_ARGV: list[str] = []  # the command line being parsed, for naming a misspelled option


class _Parser(argparse.ArgumentParser):
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
            command = next((action.choices[t] for t in _ARGV if t in action.choices), parser)
    known = [o for o in command._option_string_actions if o.startswith("--")]
    for token in _ARGV:
        if token == "--":
            break
        name = token.split("=", 1)[0]
        if name.startswith("--") and len(name) > 2 and not any(k.startswith(name) for k in known):
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
            return f"unrecognized argument {name}" + (f"; did you mean {close[0]}?" if close else "")
    return None


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return value


def _positive(text: str) -> int:
    value = _non_negative(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _property(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def add_serve_commands(sub, common) -> None:
    from .serve import add_serve_commands as add
    add(sub, common)


def add_doctor_command(sub, common) -> None:
    from .doctor import add_doctor_command as add
    add(sub, common)


def build_parser() -> argparse.ArgumentParser:
    # --store/--config are accepted before or after the command; after it they override.
    common = _Parser(add_help=False)
    common.add_argument("-s", "--store", default=argparse.SUPPRESS, metavar="PATH",
                        help="the store directory (default: $RMQ_STORE)")
    common.add_argument("--config", default=argparse.SUPPRESS, metavar="FILE",
                        help="a broker.conf-style store config (e.g. conf/store.conf); an existing store keeps "
                             "the file sizes it was written with")

    parser = _Parser(prog="rmq", description="Produce, consume and inspect an rmq-spark message store (Apache "
                                             "RocketMQ's CommitLog + ConsumeQueue format).",
                     epilog="Exit codes: 0 success, 1 failure (e.g. corruption found), 2 usage error.")
    parser.add_argument("-s", "--store", default=os.environ.get("RMQ_STORE"), metavar="PATH",
                        help="the store directory (default: $RMQ_STORE)")
    parser.add_argument("--config", default=None, metavar="FILE",
                        help="a broker.conf-style store config (e.g. conf/store.conf)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    for add in (add_produce_command, add_consume_command, add_topics_command, add_stat_command, add_check_command,
                add_clean_command, add_recover_command, add_serve_commands, add_doctor_command):
        add(sub, common)
    return parser


def add_produce_command(sub, common) -> None:
    p = sub.add_parser("produce", parents=[common], help="append messages",
                       description="Append messages: each BODY argument is one message, or --file reads JSON lines "
                                   '({"body": "...", "tags": "...", "keys": [...], "properties": {...}, '
                                   '"queue_id": 0}; "topic", "sharding_key", "born_timestamp" and '
                                   '"body_base64": true are accepted too). The topic is created with '
                                   "defaultTopicQueueNums queues on first write.")
    p.add_argument("-t", "--topic", help='the topic (for --file: every line goes to it, whatever its "topic"; '
                                          "without it, each line's own)")
    p.add_argument("--tags", help="the message tag (RocketMQ's TAGS)")
    p.add_argument("--keys", help='space-separated keys, e.g. "order-1 user-7"')
    p.add_argument("-p", "--property", type=_property, action="append", default=[], metavar="KEY=VALUE",
                   help="a user property (repeatable)")
    p.add_argument("-q", "--queue", type=_non_negative, metavar="N", help="the queue (default: round robin)")
    p.add_argument("--sharding-key", metavar="KEY", help="keep every message with this key in one queue")
    p.add_argument("-f", "--file", metavar="FILE", help="read JSON lines from FILE, or - for stdin")
    p.add_argument("--batch-size", type=_positive, default=1000, metavar="N",
                   help="messages per put_batch append with --file (default 1000)")
    p.add_argument("--progress", action="store_true", help="show a progress bar even when stderr is not a terminal")
    p.add_argument("--json", action="store_true", help="print results as JSON")
    p.add_argument("bodies", nargs="*", metavar="BODY", help="message bodies, one message each")
    _add_namesrv(p)
    p.set_defaults(run=cmd_produce)


def add_consume_command(sub, common) -> None:
    p = sub.add_parser("consume", parents=[common], help="pull messages from a topic",
                       description="Pull messages the way a RocketMQ consumer does (get_message, advancing "
                                   "next_begin_offset), from one queue or every queue of the topic in turn.")
    p.add_argument("-t", "--topic", required=True, help="the topic to read")
    p.add_argument("-q", "--queue", type=_non_negative, metavar="N", help="one queue (default: all queues)")
    p.add_argument("--from", dest="start", metavar="WHERE",
                   help="earliest, latest, group (the group's committed offset; earliest when it has none), a "
                        "queue offset N, or an ISO-8601 time (the first message stored at or after it). Default: "
                        "group with --group, else earliest")
    p.add_argument("-n", "--max", type=_positive, metavar="N", help="stop after N messages")
    p.add_argument("--tags", metavar="SEL", help="a tag selector, e.g. 'TagA || TagC'")
    p.add_argument("--sql", metavar="SEL", help="a SQL92 selector on the properties, e.g. \"region = 'EU'\"")
    p.add_argument("-g", "--group", metavar="G", help="the consumer group (for --from group and --commit)")
    p.add_argument("--commit", action="store_true", help="commit the group's offsets after consuming")
    p.add_argument("--follow", action="store_true", help="keep waiting for new messages (long polling); Ctrl-C stops")
    p.add_argument("--json", action="store_true", help="one JSON object per message")
    _add_namesrv(p)
    p.set_defaults(run=cmd_consume)


def add_topics_command(sub, common) -> None:
    p = sub.add_parser("topics", parents=[common], help="list topics",
                       description="List the topics with their queue counts and message counts.")
    p.add_argument("--json", action="store_true", help="print the topics as JSON")
    _add_namesrv(p)
    p.set_defaults(run=cmd_topics)


def add_stat_command(sub, common) -> None:
    p = sub.add_parser("stat", parents=[common], help="per-queue offsets and group lag",
                       description="Per queue: min and max offset and the messages between them; with --group, "
                                   "the group's committed offset and its lag (max - committed).")
    p.add_argument("-t", "--topic", help="only this topic")
    p.add_argument("-g", "--group", metavar="G", help="show this consumer group's committed offsets and lag")
    p.add_argument("--json", action="store_true", help="print the queues (and the group's offsets) as JSON")
    _add_namesrv(p)
    p.set_defaults(run=cmd_stat)


def _add_namesrv(p) -> None:
    p.add_argument("--namesrv", metavar="HOST:PORT", help="work through RocketMQ brokers found through this name "
                                                          "server (host:port;host2:port) instead of a store directory")
    p.add_argument("--access-key", metavar="KEY", help="with --namesrv: sign every request as this account of the "
                                                       "brokers' plain_acl.yml (default: $RMQ_ACCESS_KEY)")
    p.add_argument("--secret-key", metavar="SECRET", help="with --namesrv: the account's secret key (default: "
                                                          "$RMQ_SECRET_KEY, which other users cannot see in the "
                                                          "process list: prefer it)")


def _over_the_wire(run) -> int:
    """A --namesrv command; a broker's refusal or silence is exit 1 with its code and remark."""
    from rmq_client import MQClientError
    try:
        run()
    except MQClientError as e:
        print(f"rmq: error: {e}", file=sys.stderr)
        return EXIT_FAILURE
    except ValueError as e:
        raise UsageError(str(e)) from None
    return EXIT_OK


def add_check_command(sub, common) -> None:
    p = sub.add_parser("check", parents=[common], help="verify every record and consume-queue unit",
                       description="Walk every commitlog record (MAGICCODE, sizes, PHYSICALOFFSET, body CRC) and "
                                   "every consume-queue unit (it points at a valid record of its topic and queue "
                                   "with the same QUEUEOFFSET, size and tag hash; units dense). Read-only. Exits 1 "
                                   "when it finds a problem.")
    p.add_argument("--json", action="store_true", help="print the findings as JSON")
    p.add_argument("--progress", action="store_true", help="show progress bars even when stderr is not a terminal")
    p.set_defaults(run=cmd_check)


# ---------------------------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------------------------

def _store_path(args, must_exist: bool) -> str:
    if not args.store:
        raise UsageError("no store given: use --store PATH (or set RMQ_STORE)")
    if os.path.exists(args.store) and not os.path.isdir(args.store):
        raise UsageError(f"--store {args.store}: is a file, not a store directory")
    if must_exist and not os.path.isdir(args.store):
        raise UsageError(f"--store {args.store}: no such store directory")
    return args.store


def _config(args):
    from store.store_config import StoreConfig
    if args.config is None:
        return None
    try:
        return StoreConfig.from_file(args.config)
    except FileNotFoundError:
        raise UsageError(f"--config {args.config}: no such file") from None
    except ValueError as e:
        raise UsageError(f"--config {args.config}: {e}") from None


def _open(args, read_only: bool):
    from store.message_store import MessageStore
    path = _store_path(args, must_exist=read_only)
    config = _config(args)
    try:
        return MessageStore(path, config, read_only=read_only)
    except NotADirectoryError as e:
        raise UsageError(f"--store: {e}") from None
    except ValueError as e:
        raise UsageError(f"--config {args.config}: {e}" if args.config else str(e)) from None


def _show_progress(args) -> bool:
    return bool(getattr(args, "progress", False)) or sys.stderr.isatty()


def _write_json(obj) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, separators=(", ", ": ")) + "\n")


def _check_topic_name(topic: str, option: str = "--topic") -> None:
    from store.message_codec import check_topic
    try:
        check_topic(topic)
    except ValueError as e:
        raise UsageError(f"{option}: {e}") from None


def _write_queue_count(store, topic: str) -> int:
    """Write queues the topic has, or will have when this write creates it."""
    store.topic_config.load()
    cfg = store.topic_config.table.get(topic)
    return cfg.writeQueueNums if cfg is not None else store.config.defaultTopicQueueNums


def _require_topic(store, topic: str) -> list[int]:
    from store.errors import UnknownTopicError
    try:
        return store.queues(topic)
    except UnknownTopicError as e:
        raise UsageError(f"--topic: {e}") from None


# ---------------------------------------------------------------------------------------------------------------
# produce
# ---------------------------------------------------------------------------------------------------------------

class _Message:
    __slots__ = ("topic", "body", "tags", "keys", "properties", "queue_id", "sharding_key", "born_timestamp")

    def __init__(self, topic, body, tags=None, keys=None, properties=None, queue_id=None, sharding_key=None,
                 born_timestamp=None):
        self.topic, self.body, self.tags, self.keys = topic, body, tags, keys
        self.properties, self.queue_id, self.sharding_key = properties, queue_id, sharding_key
        self.born_timestamp = born_timestamp


class _LineError(Exception):
    """What is wrong with one input line (_parse_line adds its number)."""


def _parse_line(text: str, lineno: int, default_topic: Optional[str]) -> _Message:
    """One JSON line of `produce --file` as a message; UsageError naming the line and the field at fault."""
    try:
        obj = _line_object(text)
        topic = _line_topic(obj, default_topic)
        body = _line_body(obj)
        tags, keys = _line_tags_and_keys(obj)
        props = _line_properties(obj)
        queue_id = obj.get("queue_id")
        if queue_id is not None and (isinstance(queue_id, bool) or not isinstance(queue_id, int) or queue_id < 0):
            raise _LineError(f'"queue_id" must be a non-negative integer, got {queue_id!r}')
        sharding_key = obj.get("sharding_key")
        if sharding_key is not None and not isinstance(sharding_key, str):
            raise _LineError(f'"sharding_key" must be a string, got {sharding_key!r}')
        born = obj.get("born_timestamp")
        if born is not None and (isinstance(born, bool) or not isinstance(born, int)):
            raise _LineError(f'"born_timestamp" must be an integer (ms since the epoch), got {born!r}')
    except _LineError as e:
        raise UsageError(f"line {lineno}: {e}") from None
    return _Message(topic, body, tags, keys, props, queue_id, sharding_key, born)


def _line_object(text: str) -> dict:
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise _LineError(f"not valid JSON: {e.msg} at column {e.colno}") from None
    if not isinstance(obj, dict):
        raise _LineError(f"expected a JSON object, got {type(obj).__name__}")
    unknown = sorted(set(obj) - _LINE_FIELDS - _STORED_FIELDS)
    if unknown:
        raise _LineError(f"unknown field {unknown[0]!r} (known: {', '.join(sorted(_LINE_FIELDS))})")
    return obj


def _line_topic(obj: dict, default_topic: Optional[str]) -> str:
    # --topic on the command line wins over the lines' "topic": `consume --json | produce --topic Copy` copies
    topic = default_topic if default_topic is not None else obj.get("topic")
    if topic is None:
        raise _LineError('no "topic" in the line and no --topic given')
    if not isinstance(topic, str):
        raise _LineError(f'"topic" must be a string, got {topic!r}')
    from store.message_codec import check_topic
    try:
        check_topic(topic)
    except ValueError as e:
        raise _LineError(str(e)) from None
    return topic


def _line_body(obj: dict) -> bytes:
    if "body" not in obj:
        raise _LineError('"body" is missing')
    body = obj["body"]
    if not isinstance(body, str):
        raise _LineError(f'"body" must be a string, got {type(body).__name__}')
    b64 = obj.get("body_base64", False)
    if not isinstance(b64, bool):
        raise _LineError(f'"body_base64" must be true or false, got {b64!r}')
    if not b64:
        return body.encode("utf-8", "surrogatepass")
    try:
        return base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):
        raise _LineError('"body" is not valid base64 (body_base64 is true)') from None


def _line_tags_and_keys(obj: dict) -> tuple[Optional[str], Optional[str]]:
    tags = obj.get("tags")
    if tags is not None and not isinstance(tags, str):
        raise _LineError(f'"tags" must be a string, got {tags!r}')
    keys = obj.get("keys")
    if isinstance(keys, list):
        if not all(isinstance(k, str) for k in keys):
            raise _LineError('"keys" must be a list of strings')
        keys = " ".join(k for k in keys if k) or None
    elif keys is not None and not isinstance(keys, str):
        raise _LineError(f'"keys" must be a list of strings or a space-separated string, got {keys!r}')
    for name, value in (("tags", tags), ("keys", keys)):
        if value is not None and ("\x01" in value or "\x02" in value):
            raise _LineError(f'"{name}" may not contain \\x01 or \\x02')
    return tags, keys


def _line_properties(obj: dict) -> Optional[dict]:
    props = obj.get("properties")
    if props is None:
        return None
    if not isinstance(props, dict):
        raise _LineError(f'"properties" must be an object, got {type(props).__name__}')
    converted = {}
    for k, v in props.items():
        if isinstance(v, bool):
            v = "true" if v else "false"
        elif isinstance(v, (int, float)):
            v = str(v)
        elif not isinstance(v, str):
            raise _LineError(f"property {k!r}: values must be strings, numbers or booleans, got {v!r}")
        if not k or not v:
            raise _LineError(f"property {k!r}={v!r}: empty keys or values are not stored")
        if "\x01" in k or "\x02" in k or "\x01" in v or "\x02" in v:
            raise _LineError(f"property {k!r}: keys and values may not contain \\x01 or \\x02")
        converted[k] = v
    # The line's own tags/keys fields say what TAGS/KEYS are (a consume --json line carries both).
    if "tags" in obj:
        converted.pop("TAGS", None)
    if "keys" in obj:
        converted.pop("KEYS", None)
    return converted or None


def _check_message(store, m: _Message, lineno: int, queue_counts: dict) -> None:
    """What put_batch would refuse, found before anything is written (so the error names the line)."""
    nq = queue_counts.get(m.topic)
    if nq is None:
        nq = queue_counts[m.topic] = _write_queue_count(store, m.topic)
    if m.queue_id is not None and m.queue_id >= nq:
        raise UsageError(f"line {lineno}: queue_id {m.queue_id} is outside topic {m.topic!r}'s queues 0..{nq - 1}")
    if len(m.body) > store.config.maxMessageSize:
        raise UsageError(f"line {lineno}: body is {len(m.body)} bytes, more than maxMessageSize "
                         f"({store.config.maxMessageSize})")


def _put(store, batch: list[_Message], first_line: int):
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


def _read_lines(source) -> Iterator[tuple[int, str, int]]:
    """(line number, text, bytes read so far) of each non-blank line."""
    consumed = 0
    for lineno, raw in enumerate(source, 1):
        consumed += len(raw)
        text = raw.strip()
        if text:
            yield lineno, text.decode("utf-8", "surrogateescape") if isinstance(text, bytes) else text, consumed


class _NoBar:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


def progress_bar(enabled: bool, total: Optional[int], desc: str, unit: str):
    """A tqdm bar on stderr, or one that does nothing."""
    if not enabled:
        return _NoBar()
    from tqdm import tqdm
    return tqdm(total=total, desc=desc, unit=unit, unit_scale=True, leave=False, dynamic_ncols=True)


def _produce_file(store, args) -> dict:
    from store.errors import StoreError
    path = args.file
    if path == "-":
        source, size = sys.stdin.buffer, None
    else:
        try:
            source = open(path, "rb")
        except OSError as e:
            raise UsageError(f"--file {path}: {e.strerror}") from None
        size = os.fstat(source.fileno()).st_size
    counts: dict[str, int] = {}
    queue_counts: dict[str, int] = {}
    produced = 0
    try:
        if size is not None:
            # A regular file is validated whole before anything is written.
            for lineno, text, _ in _read_lines(source):
                _check_message(store, _parse_line(text, lineno, args.topic), lineno, queue_counts)
            source.seek(0)
        bar = progress_bar(_show_progress(args), total=size, desc="produce", unit="B")
        batch: list[_Message] = []
        first_line = 0
        done_bytes = 0
        written_through = 0  # the last input line whose message is in the store
        try:
            for lineno, text, consumed in _read_lines(source):
                m = _parse_line(text, lineno, args.topic)
                if size is None:
                    _check_message(store, m, lineno, queue_counts)
                if not batch:
                    first_line = lineno
                batch.append(m)
                if len(batch) >= args.batch_size:
                    produced += _flush(store, batch, first_line, counts)
                    written_through = lineno
                    batch = []
                    bar.update(consumed - done_bytes)
                    done_bytes = consumed
            if batch:
                produced += _flush(store, batch, first_line, counts)
        except (UsageError, Failure, StoreError, OSError) as e:
            if not produced or isinstance(e, BrokenPipeError):
                raise
            # how far it got, so a rerun can start after what was written
            note = (f" ({produced} message{'s' if produced != 1 else ''}, lines 1-{written_through}, were written "
                    f"before the failure; lines from {written_through + 1} on were not)")
            raise (UsageError if isinstance(e, UsageError) else Failure)(f"{e}{note}") from None
        finally:
            bar.close()
    finally:
        if source is not sys.stdin.buffer:
            source.close()
    return {"produced": produced, "topics": counts}


def _flush(store, batch, first_line, counts) -> int:
    _put(store, batch, first_line)
    for m in batch:
        counts[m.topic] = counts.get(m.topic, 0) + 1
    return len(batch)


def cmd_produce(args) -> int:
    if args.file is not None and args.bodies:
        raise UsageError("give message bodies as arguments or --file, not both")
    if args.file is None and not args.bodies:
        raise UsageError("nothing to produce: give BODY arguments, or --file FILE (--file - reads JSON lines "
                         "from stdin)")
    if args.file is None:
        if not args.topic:
            raise UsageError("--topic is required")
        _check_topic_name(args.topic)
        props = dict(args.property) or None
        for k, v in args.property:
            if not v:
                raise UsageError(f"--property {k}=: empty values are not stored")
    elif args.topic:
        _check_topic_name(args.topic)
    if args.namesrv:
        from . import wire_commands
        if args.file is not None or args.queue is not None:
            raise UsageError("--namesrv: --file and --queue are not supported over the wire yet; give BODY "
                             "arguments (and --sharding-key to choose a queue)")
        return _over_the_wire(lambda: wire_commands.produce(args, props, _write_json, _plural))
    with _open(args, read_only=False) as store:
        if args.file is not None:
            summary = _produce_file(store, args)
            if args.json:
                _write_json(summary)
            else:
                per_topic = ", ".join(f"{t}: {n}" for t, n in sorted(summary["topics"].items()))
                print(f"produced {_plural(summary['produced'], 'message')}" + (f" ({per_topic})" if per_topic else ""))
            return EXIT_OK
        nq = _write_queue_count(store, args.topic)
        if args.queue is not None and args.queue >= nq:
            raise UsageError(f"--queue {args.queue}: topic {args.topic!r} has queues 0..{nq - 1}")
        batch = [_Message(args.topic, b.encode("utf-8", "surrogateescape"), args.tags, args.keys, props, args.queue,
                          args.sharding_key) for b in args.bodies]
        result = _put(store, batch, 0)
        for r in result:
            if args.json:
                _write_json({"status": str(r.status), "topic": r.topic, "queue_id": r.queue_id,
                             "queue_offset": r.queue_offset, "msg_id": r.msg_id, "uniq_key": r.uniq_key,
                             "commit_log_offset": r.commit_log_offset})
            else:
                print(f"{r.status} {r.topic}/{r.queue_id}@{r.queue_offset} msg_id={r.msg_id} uniq_key={r.uniq_key}")
    return EXIT_OK


# ---------------------------------------------------------------------------------------------------------------
# consume
# ---------------------------------------------------------------------------------------------------------------

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


def _message_text(m) -> str:
    from store.message_codec import PROPERTY_KEYS, PROPERTY_TAGS, PROPERTY_UNIQ_KEY
    stamp = datetime.datetime.fromtimestamp(m.store_timestamp / 1000).isoformat(timespec="milliseconds")
    user = {k: v for k, v in m.properties.items() if k not in (PROPERTY_TAGS, PROPERTY_KEYS, PROPERTY_UNIQ_KEY)}
    fields = _body_fields(m.body)
    body = ("base64:" + fields["body"]) if fields.get("body_base64") else fields["body"]
    props = " ".join(f"{k}={v}" for k, v in user.items())
    return (f"{m.topic}/{m.queue_id}@{m.queue_offset} {stamp} tags={m.tags or '-'} "
            f"keys={','.join(m.keys) or '-'}{' ' + props if props else ''} | {body}")


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
            _write_json(message_to_json(m))
        else:
            sys.stdout.write(_message_text(m) + "\n")
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
        return _over_the_wire(lambda: wire_commands.consume(args, start, _write_json, _message_text,
                                                            message_to_json))
    offset_store = None
    if args.group:
        from store.offset_store import OffsetStore
        try:
            offset_store = OffsetStore(_store_path(args, must_exist=True), args.group)
        except ValueError as e:
            raise UsageError(f"--group: {e}") from None
    with _open(args, read_only=True) as store:
        queues = _require_topic(store, args.topic)
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


# ---------------------------------------------------------------------------------------------------------------
# topics, stat, check
# ---------------------------------------------------------------------------------------------------------------

def _table(rows: list[list], header: list[str]) -> str:
    cells = [header] + [["-" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = []
    for r in cells:
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
    return "\n".join(line.rstrip() for line in lines)


def cmd_topics(args) -> int:
    if args.namesrv:
        from . import wire_commands
        return _over_the_wire(lambda: wire_commands.topics(args, _write_json, _table))
    with _open(args, read_only=True) as store:
        rows = []
        for topic in store.topics():
            cfg = store.topic_config.table[topic]
            queues = store.queues(topic)
            messages = sum(store.max_offset(topic, q) - store.min_offset(topic, q) for q in queues)
            rows.append({"topic": topic, "queues": len(queues), "read_queue_nums": cfg.readQueueNums,
                         "write_queue_nums": cfg.writeQueueNums, "messages": messages})
    if args.json:
        _write_json(rows)
    elif not rows:
        print("no topics")
    else:
        print(_table([[r["topic"], r["queues"], r["messages"]] for r in rows], ["TOPIC", "QUEUES", "MESSAGES"]))
    return EXIT_OK


def cmd_stat(args) -> int:
    if args.namesrv:
        from . import wire_commands
        return _over_the_wire(lambda: wire_commands.stat(args, _write_json, _table, _plural))
    offsets = None
    if args.group:
        from store.offset_store import OffsetStore
        try:
            offsets = OffsetStore(_store_path(args, must_exist=True), args.group)
        except ValueError as e:
            raise UsageError(f"--group: {e}") from None
    with _open(args, read_only=True) as store:
        topics = [args.topic] if args.topic else store.topics()
        rows = []
        for topic in topics:
            for qid in _require_topic(store, topic):
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
        _write_json(out)
        return EXIT_OK
    header = ["TOPIC", "QUEUE", "MIN", "MAX", "MESSAGES"]
    if offsets is not None:
        header += ["COMMITTED", "LAG"]
    table = [[r["topic"], r["queue_id"], r["min_offset"], r["max_offset"], r["messages"]]
             + ([r["committed_offset"], r["lag"]] if offsets is not None else []) for r in rows]
    print(f"commitlog offsets {cl['min_offset']}..{cl['max_offset']}")
    print(_table(table, header) if rows else "no topics")
    total = sum(r["messages"] for r in rows)
    line = f"total: {_plural(total, 'message')} in {_plural(len(rows), 'queue')}"
    if offsets is not None:
        line += f"; group {args.group} lag {sum(r['lag'] for r in rows if r['lag'] is not None)}"
    print(line)
    return EXIT_OK


def cmd_check(args) -> int:
    from store.store_check import check_store
    path = _store_path(args, must_exist=True)
    config = _config(args)
    try:
        report = check_store(path, config, progress=_show_progress(args))
    except FileNotFoundError as e:
        raise UsageError(f"--store: {e}") from None
    if args.json:
        _write_json(report.to_dict())
    else:
        for p in report.problems:
            print(p)
        if report.omitted_problems:
            print(f"... and {report.omitted_problems} more errors not listed")
        print(report.summary())
    return EXIT_OK if report.ok else EXIT_FAILURE


# ---------------------------------------------------------------------------------------------------------------
# rmq clean (retention)
# ---------------------------------------------------------------------------------------------------------------

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
    _store_path(args, must_exist=True)
    with _open(args, read_only=False) as store:
        try:
            summary = store.clean_expired(now=args.now, periodic=args.periodic)
        except ValueError as e:
            raise UsageError(str(e)) from None
    if args.json:
        _write_json(summary.to_dict())
        return EXIT_OK
    files = summary.commit_log_files_deleted
    print(f"deleted {_plural(len(files), 'commitlog file')}{': ' + ', '.join(files) if files else ''} and "
          f"{_plural(summary.consume_queue_files_deleted, 'consume-queue file')} ({summary.reason})")
    print(f"commitlog min offset: {summary.commit_log_min_offset}")
    rows = [[t, q, off] for t, qs in sorted(summary.min_offsets.items()) for q, off in sorted(qs.items())]
    if rows:
        print(_table(rows, ["topic", "queue", "min offset"]))
    return EXIT_OK


# ---------------------------------------------------------------------------------------------------------------
# rmq recover
# ---------------------------------------------------------------------------------------------------------------

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
    path = _store_path(args, must_exist=True)
    with MessageStore(path, _config(args), recover_truncate=args.truncate) as store:
        rebuilt = store.rebuild_consume_queues()
        end = store.commit_log_max_offset()
        total = sum(store.max_offset(t, q) - store.min_offset(t, q) for t in store.topics() for q in store.queues(t))
    if rebuilt:
        print(f"rebuilt {_plural(rebuilt, 'consume-queue unit')} below the queues' first files from the commitlog")
    print(f"store {path} recovered: commitlog ends at offset {end}; {_plural(total, 'message')} in the consume "
          "queues")
    return EXIT_OK


# ---------------------------------------------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------------------------------------------

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
    _ARGV[:] = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    from store.errors import CorruptRecordError, StoreError, UnknownTopicError
    try:
        return args.run(args)
    except UsageError as e:
        print(f"rmq {args.command}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
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
