"""A consume on a store: get_message in a loop, the way RocketMQ's pull consumer does (advancing
next_begin_offset), from one queue or every queue of a topic in turn, optionally following (long polling) and
committing a group's offsets."""
from __future__ import annotations

import inspect
import sys
import time
from typing import Any, Callable, Optional

from store.errors import UnknownTopicError
from store.get_message_result import GetMessageStatus as S
from store.message_store import MessageStore
from store.offset_store import OffsetStore, ReadOffsetType

from .errors import UsageError
from .message_log import DEFAULT_GROUP, Consume
from .selector import message_filter

PULL_BATCH = 32


class _Consumer:
    """Pulls with get_message in a loop and hands on what it gets."""

    def __init__(self, store: MessageStore, request: Consume, offsets: Optional[OffsetStore],
                 emit: Callable[[Any], None]):
        self.store = store
        self.request = request
        self.filter = message_filter(request.tags, request.sql)
        self.offsets = offsets
        self.group = request.group or DEFAULT_GROUP
        self.remaining = request.max
        self.emit_message = emit
        self.positions: dict[int, int] = {}
        self.printed = 0

    def start(self, qid: int) -> int:
        kind, value = self.request.start
        topic = self.request.topic
        if kind == "earliest":
            return self.store.min_offset(topic, qid)
        if kind == "latest":
            return self.store.max_offset(topic, qid)
        if kind == "offset":
            assert value is not None
            return value
        if kind == "time":
            assert value is not None
            return self.store.offset_for_timestamp(topic, qid, value)
        assert self.offsets is not None
        committed = self.offsets.read_offset((topic, qid), ReadOffsetType.READ_FROM_STORE)
        return committed if committed >= 0 else self.store.min_offset(topic, qid)

    def emit(self, m) -> None:
        self.emit_message(m)
        self.printed += 1

    def pull(self, qid: int, suspend_ms: int = 0) -> bool:
        """Pull once from a queue; False when it has nothing more for now."""
        pos = self.positions[qid]
        want = PULL_BATCH if self.remaining is None else min(PULL_BATCH, self.remaining)
        kwargs = {"suspend_timeout_ms": suspend_ms} if suspend_ms else {}
        r = self.store.get_message(self.group, self.request.topic, qid, pos, want, self.filter, **kwargs)
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
            print(f"rmq: warning: offset {pos} is past the end of {self.request.topic}/{qid} (max offset "
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
        if self.offsets is None or not self.request.commit:
            return
        for qid, pos in self.positions.items():
            self.offsets.update_offset((self.request.topic, qid), pos)
        self.offsets.persist_all()


def consume(store: MessageStore, request: Consume, offsets: Optional[OffsetStore],
            emit: Callable[[Any], None]) -> None:
    try:
        queues = store.queues(request.topic)
    except UnknownTopicError as e:
        raise UsageError(f"--topic: {e}") from None
    if request.queue_id is not None:
        if request.queue_id not in queues:
            raise UsageError(f"--queue {request.queue_id}: topic {request.topic!r} has queues 0..{len(queues) - 1}")
        queues = [request.queue_id]
    held = "suspend_timeout_ms" in inspect.signature(store.get_message).parameters
    if request.follow and not held:
        raise UsageError("--follow is not supported by this store version (no long polling)")
    consumer = _Consumer(store, request, offsets, emit)
    for qid in queues:
        consumer.positions[qid] = consumer.start(qid)
    try:
        for qid in queues:  # each queue drained in turn, so output is ordered per queue
            while not consumer.done() and consumer.pull(qid):
                pass
            if consumer.done():
                break
        if request.follow:
            _follow(consumer, queues)
    except KeyboardInterrupt:
        pass  # Ctrl-C ends --follow: commit what was printed
    sys.stdout.flush()  # a reader that went away raises here, and nothing is committed
    consumer.commit()


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
