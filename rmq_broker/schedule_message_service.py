"""RocketMQ's ScheduleMessageService: delayed messages wait in SCHEDULE_TOPIC_XXXX (queue = delay level - 1) and
are delivered to their real topic and queue when due; each level's progress is kept in config/delayOffset.json.

A message is due at its store time plus its level's delay (messageDelayLevel). The store keeps that time in the
consume-queue unit's tagsCode, as RocketMQ does (store/delay_levels.py); this service computes it from the record,
reading each waiting record's header once it reaches the head of its level.
"""
from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Optional

from rmq_common.message_codec import check_topic
from store import GetMessageStatus, MessageStore
from store.delay_levels import DEFAULT_DELAY_LEVELS, SCHEDULE_TOPIC, parse_delay_levels
from store.json_file import atomic_write_json, load_rocketmq_json

log = logging.getLogger(__name__)

PROPERTY_DELAY = "DELAY"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
MAX_QUEUES = 1024  # a topic's queues, as the broker creates them


class ScheduleMessageService:
    def __init__(self, store: MessageStore, delay_levels: str = DEFAULT_DELAY_LEVELS, on_deliver=None,
                 poll_s: float = 0.1):
        self.store = store
        self.delays_ms = parse_delay_levels(delay_levels)
        self.on_deliver = on_deliver  # called with (topic, queue_id) after a delivery, to wake held pulls
        self.poll_s = poll_s
        self.path = os.path.join(store.path, "config", "delayOffset.json")
        data = load_rocketmq_json(self.path) or {}
        self.offsets: dict[int, int] = {int(k): int(v) for k, v in (data.get("offsetTable") or {}).items()}
        self._task: Optional[asyncio.Task] = None
        self._dirty = False
        self._head_due: dict[int, int] = {}  # level -> when its first waiting message is due (ms)
        self._wake = asyncio.Event()

    @property
    def max_level(self) -> int:
        return len(self.delays_ms)

    def schedule(self, topic: str, queue_id: int, body: bytes, properties: dict, level: int, **put_args):
        """Store a message for delivery after `level`'s delay (levels past the last mean the last)."""
        level = max(1, min(level, self.max_level))
        if not self.store.has_topic(SCHEDULE_TOPIC):
            self.store.create_topic(SCHEDULE_TOPIC, self.max_level)
        props = dict(properties, **{PROPERTY_DELAY: str(level), PROPERTY_REAL_TOPIC: topic,
                                    PROPERTY_REAL_QUEUE_ID: str(queue_id)})
        result = self.store.put(SCHEDULE_TOPIC, body, properties=props, queue_id=level - 1, **put_args)
        self._wake.set()
        return result

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            except Exception:  # the progress made so far is still kept
                log.exception("the schedule service had failed")
        self.persist()

    def persist(self) -> None:
        if self._dirty:
            atomic_write_json(self.path, {"offsetTable": {str(k): v for k, v in sorted(self.offsets.items())}})
            self._dirty = False

    async def _run(self) -> None:
        """Deliver what is due, then sleep until the earliest head of a level is due or a message is scheduled
        (no polling while nothing waits)."""
        last_persist = time.monotonic()
        while True:
            next_due: Optional[int] = None
            if self.store.has_topic(SCHEDULE_TOPIC):
                for level in range(1, self.max_level + 1):
                    try:
                        self.deliver_due(level)
                    except Exception:  # the store refused a put (disk full...): tried again, other levels go on
                        log.exception("delivering the delayed messages of level %d failed; trying again", level)
                        self._head_due[level] = int(time.time() * 1000) + 1000
                    due = self._head_due.get(level)
                    if due is not None and (next_due is None or due < next_due):
                        next_due = due
            if self._dirty and time.monotonic() - last_persist > 1.0:
                self.persist()
                last_persist = time.monotonic()
            wait = 60.0 if next_due is None else max(self.poll_s, (next_due - time.time() * 1000) / 1000)
            if self._dirty:
                wait = min(wait, 1.0)
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), wait)
            except asyncio.TimeoutError:
                pass

    def deliver_due(self, level: int, now_ms: Optional[int] = None) -> int:
        """Deliver the due messages at the head of a level; returns how many."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        queue_id = level - 1
        self._head_due.pop(level, None)
        if queue_id not in self.store.queues(SCHEDULE_TOPIC):
            return 0
        offset = self.offsets.get(level, 0)
        delivered = 0
        while True:
            got = self.store.get_message("SCHEDULE", SCHEDULE_TOPIC, queue_id, offset, 32)
            if got.status == GetMessageStatus.OFFSET_TOO_SMALL:
                offset = got.next_begin_offset
                continue
            if got.status != GetMessageStatus.FOUND:
                break
            for m in got.messages:
                if m.store_timestamp + self.delays_ms[level - 1] > now_ms:
                    self._head_due[level] = m.store_timestamp + self.delays_ms[level - 1]
                    self._advance(level, offset)
                    return delivered
                offset = m.queue_offset + 1
                if self._deliver(m, level):
                    delivered += 1
        self._advance(level, offset)
        return delivered

    def _deliver(self, m, level: int) -> bool:
        """Put a due message into its real topic and queue; a message that names none the broker can deliver to
        is logged and passed over (RocketMQ's messageTimeup drops it) so that it never holds up its level."""
        props = {k: v for k, v in m.properties.items()
                 if k not in (PROPERTY_DELAY, PROPERTY_REAL_TOPIC, PROPERTY_REAL_QUEUE_ID)}
        topic, qid_text = m.properties.get(PROPERTY_REAL_TOPIC, ""), m.properties.get(PROPERTY_REAL_QUEUE_ID, "0")
        try:
            check_topic(topic)
            qid = int(qid_text) if qid_text.isdigit() and qid_text.isascii() else -1
            if not 0 <= qid < MAX_QUEUES:
                raise ValueError(f"{PROPERTY_REAL_QUEUE_ID} {qid_text!r} is not a queue id")
            if not self.store.has_topic(topic):
                self.store.create_topic(topic, qid + 1)
            self.store.put(topic, m.body, properties=props or None, queue_id=qid, flag=m.flag,
                           born_timestamp=m.born_timestamp, reconsume_times=m.reconsume_times)
        except ValueError as e:
            log.error("the delayed message at %s/%d@%d cannot be delivered (%s): dropped", SCHEDULE_TOPIC, level - 1,
                      m.queue_offset, e)
            return False
        if self.on_deliver is not None:
            self.on_deliver(topic, qid)
        return True

    def _advance(self, level: int, offset: int) -> None:
        if self.offsets.get(level, 0) != offset:
            self.offsets[level] = offset
            self._dirty = True
