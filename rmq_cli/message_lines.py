"""The JSON lines `rmq produce --file` reads, one message each (the fields `rmq consume --json` writes), and the
loop that checks them and hands them on in batches, to a store or to brokers, saying how far it got on a failure."""
from __future__ import annotations

import base64
import binascii
import json
import os
import sys
from typing import Iterator, Optional

from rmq_log import PartialFlush

from .common import Failure, UsageError, plural, show_progress, write_json

# Fields of `rmq consume --json` output that `rmq produce --file` accepts and ignores, so one can be piped
# into the other (they describe where a message was stored, which the new store decides).
_STORED_FIELDS = {"queue_offset", "msg_id", "commit_log_offset", "store_timestamp", "born_host", "store_host",
                  "sys_flag", "flag", "reconsume_times", "body_crc", "store_size"}
_LINE_FIELDS = {"body", "body_base64", "topic", "tags", "keys", "properties", "queue_id", "broker_name",
                "sharding_key", "born_timestamp"}


class Message:
    __slots__ = ("topic", "body", "tags", "keys", "properties", "queue_id", "sharding_key", "born_timestamp",
                 "broker_name")

    def __init__(self, topic, body, tags=None, keys=None, properties=None, queue_id=None, sharding_key=None,
                 born_timestamp=None, broker_name=None):
        self.topic, self.body, self.tags, self.keys = topic, body, tags, keys
        self.properties, self.queue_id, self.sharding_key = properties, queue_id, sharding_key
        self.born_timestamp, self.broker_name = born_timestamp, broker_name


class _LineError(Exception):
    """What is wrong with one input line (parse_line adds its number)."""


def parse_line(text: str, lineno: int, default_topic: Optional[str]) -> Message:
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
        broker_name = obj.get("broker_name")
        if broker_name is not None and (not isinstance(broker_name, str) or not broker_name):
            raise _LineError(f'"broker_name" must be a non-empty string, got {broker_name!r}')
        sharding_key = obj.get("sharding_key")
        if sharding_key is not None and not isinstance(sharding_key, str):
            raise _LineError(f'"sharding_key" must be a string, got {sharding_key!r}')
        born = obj.get("born_timestamp")
        if born is not None and (isinstance(born, bool) or not isinstance(born, int)):
            raise _LineError(f'"born_timestamp" must be an integer (ms since the epoch), got {born!r}')
    except _LineError as e:
        raise UsageError(f"line {lineno}: {e}") from None
    return Message(topic, body, tags, keys, props, queue_id, sharding_key, born, broker_name)


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
    from rmq_common.message_codec import check_topic
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


def produce_file(args, check, flush, lines_per_flush: int) -> dict:
    """`--file`'s JSON lines, each parsed and check(message, lineno)-ed (a regular file: all of them before
    anything is written), then handed to flush(messages, first_line) lines_per_flush at a time. A failure after
    some were written says which lines were and which were not."""
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
    produced = 0
    try:
        if size is not None:
            # A regular file is validated whole before anything is written.
            for lineno, text, _ in _read_lines(source):
                check(parse_line(text, lineno, args.topic), lineno)
            source.seek(0)
        bar = progress_bar(show_progress(args), total=size, desc="produce", unit="B")
        batch: list[Message] = []
        first_line = last_line = 0
        done_bytes = 0
        written_through = 0  # the last input line whose message is written
        try:
            for lineno, text, consumed in _read_lines(source):
                m = parse_line(text, lineno, args.topic)
                if size is None:
                    check(m, lineno)
                if not batch:
                    first_line = lineno
                batch.append(m)
                last_line = lineno
                if len(batch) >= lines_per_flush:
                    produced += _flush(flush, batch, first_line, counts)
                    written_through = lineno
                    batch = []
                    bar.update(consumed - done_bytes)
                    done_bytes = consumed
            if batch:
                produced += _flush(flush, batch, first_line, counts)
        except PartialFlush as e:
            produced += e.sent
            written = f"lines 1-{written_through}, " if written_through else ""
            raise (UsageError if isinstance(e.cause, UsageError) else Failure)(
                f"{e} ({plural(produced, 'message')} written before the failure: {written}and {e.detail} of lines "
                f"{first_line}-{last_line}; the other lines were not)") from None
        except (UsageError, Failure, OSError) as e:
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


def _flush(flush, batch, first_line, counts) -> int:
    flush(batch, first_line)
    for m in batch:
        counts[m.topic] = counts.get(m.topic, 0) + 1
    return len(batch)


def print_file_summary(summary: dict, as_json: bool) -> None:
    if as_json:
        write_json(summary)
    else:
        per_topic = ", ".join(f"{t}: {n}" for t, n in sorted(summary["topics"].items()))
        print(f"produced {plural(summary['produced'], 'message')}" + (f" ({per_topic})" if per_topic else ""))


