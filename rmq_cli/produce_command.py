"""`rmq produce`: append messages given as arguments, or JSON lines from a file or stdin (checked whole before
anything is written when the input is a file), or send them through brokers with --namesrv."""
from __future__ import annotations

import base64
import binascii
import json
import os
import re
import sys
import time
from typing import Iterator, Optional

from .common import (
    EXIT_OK,
    Failure,
    UsageError,
    add_namesrv_options,
    check_topic_name,
    key_value,
    non_negative,
    open_store,
    over_the_wire,
    plural,
    positive,
    show_progress,
    write_json,
)

# Fields of `rmq consume --json` output that `rmq produce --file` accepts and ignores, so one can be piped
# into the other (they describe where a message was stored, which the new store decides).
_STORED_FIELDS = {"queue_offset", "msg_id", "commit_log_offset", "store_timestamp", "born_host", "store_host",
                  "sys_flag", "flag", "reconsume_times", "body_crc", "store_size"}
_LINE_FIELDS = {"body", "body_base64", "topic", "tags", "keys", "properties", "queue_id", "sharding_key",
                "born_timestamp"}


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
    p.add_argument("-p", "--property", type=key_value, action="append", default=[], metavar="KEY=VALUE",
                   help="a user property (repeatable)")
    p.add_argument("-q", "--queue", type=non_negative, metavar="N", help="the queue (default: round robin)")
    p.add_argument("--sharding-key", metavar="KEY", help="keep every message with this key in one queue")
    p.add_argument("-f", "--file", metavar="FILE", help="read JSON lines from FILE, or - for stdin")
    p.add_argument("--batch-size", type=positive, default=1000, metavar="N",
                   help="messages per put_batch append with --file (default 1000)")
    p.add_argument("--progress", action="store_true", help="show a progress bar even when stderr is not a terminal")
    p.add_argument("--json", action="store_true", help="print results as JSON")
    p.add_argument("bodies", nargs="*", metavar="BODY", help="message bodies, one message each")
    add_namesrv_options(p)
    p.set_defaults(run=cmd_produce)


def _write_queue_count(store, topic: str) -> int:
    """Write queues the topic has, or will have when this write creates it."""
    store.topic_config.load()
    cfg = store.topic_config.table.get(topic)
    return cfg.writeQueueNums if cfg is not None else store.config.defaultTopicQueueNums


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
        bar = progress_bar(show_progress(args), total=size, desc="produce", unit="B")
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
        check_topic_name(args.topic)
        props = dict(args.property) or None
        for k, v in args.property:
            if not v:
                raise UsageError(f"--property {k}=: empty values are not stored")
    elif args.topic:
        check_topic_name(args.topic)
    if args.namesrv:
        from . import wire_commands
        if args.file is not None or args.queue is not None:
            raise UsageError("--namesrv: --file and --queue are not supported over the wire yet; give BODY "
                             "arguments (and --sharding-key to choose a queue)")
        return over_the_wire(lambda: wire_commands.produce(args, props))
    with open_store(args, read_only=False) as store:
        if args.file is not None:
            summary = _produce_file(store, args)
            if args.json:
                write_json(summary)
            else:
                per_topic = ", ".join(f"{t}: {n}" for t, n in sorted(summary["topics"].items()))
                print(f"produced {plural(summary['produced'], 'message')}" + (f" ({per_topic})" if per_topic else ""))
            return EXIT_OK
        nq = _write_queue_count(store, args.topic)
        if args.queue is not None and args.queue >= nq:
            raise UsageError(f"--queue {args.queue}: topic {args.topic!r} has queues 0..{nq - 1}")
        batch = [_Message(args.topic, b.encode("utf-8", "surrogateescape"), args.tags, args.keys, props, args.queue,
                          args.sharding_key) for b in args.bodies]
        result = _put(store, batch, 0)
        for r in result:
            if args.json:
                write_json({"status": str(r.status), "topic": r.topic, "queue_id": r.queue_id,
                             "queue_offset": r.queue_offset, "msg_id": r.msg_id, "uniq_key": r.uniq_key,
                             "commit_log_offset": r.commit_log_offset})
            else:
                print(f"{r.status} {r.topic}/{r.queue_id}@{r.queue_offset} msg_id={r.msg_id} uniq_key={r.uniq_key}")
    return EXIT_OK
