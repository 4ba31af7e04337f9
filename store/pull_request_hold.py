"""Long polling: RocketMQ's PullRequestHoldService for an embedded store.

A pull that finds nothing new is held until a message arrives in its queue or the timeout passes. Appends in
this process wake held pulls at once through a condition shared by every MessageStore object over the same
directory; appends by other processes are seen by re-reading the consume queue's end every few milliseconds
(one directory listing and a few bytes of the mapped last file, no lock).
"""
from __future__ import annotations

import threading
import time

from .get_message_result import GetMessageResult, GetMessageStatus

POLL_INTERVAL_S = 0.005  # the cross-process check of the consume-queue end

_conditions: dict[str, threading.Condition] = {}
_registry_lock = threading.Lock()

# Statuses after which RocketMQ's broker suspends the pull (PULL_NOT_FOUND) or, for a filter that matched
# nothing up to the end of the queue, waits for more to scan.
_HOLD = (GetMessageStatus.NO_MESSAGE_IN_QUEUE, GetMessageStatus.OFFSET_OVERFLOW_ONE,
         GetMessageStatus.NO_MATCHED_MESSAGE)


def _condition_for(path: str) -> threading.Condition:
    with _registry_lock:
        cond = _conditions.get(path)
        if cond is None:
            cond = _conditions[path] = threading.Condition()
        return cond


class PullRequestHoldService:
    def __init__(self, store_path: str):
        self._cond = _condition_for(store_path)

    def notify_message_arriving(self) -> None:
        """Called after an append's consume-queue units are written."""
        with self._cond:
            self._cond.notify_all()

    def wait(self, timeout_s: float) -> None:
        with self._cond:
            self._cond.wait(timeout_s)


def get_message_held(store, group, topic, queue_id, offset, max_msgs, message_filter,
                     suspend_timeout_ms: int) -> GetMessageResult:
    """get_message that holds an empty pull up to suspend_timeout_ms. Returns as soon as something is FOUND
    (or a status that waiting cannot change, such as OFFSET_TOO_SMALL); on timeout returns
    NO_MESSAGE_IN_QUEUE when nothing arrived, NO_MATCHED_MESSAGE when messages arrived but none passed the
    filter, with next_begin_offset past everything scanned."""
    from .get_message import get_message

    deadline = time.monotonic() + suspend_timeout_ms / 1000.0
    hold = store.pull_request_hold
    pos = offset
    scanned = False
    while True:
        result = get_message(store, group, topic, queue_id, pos, max_msgs, message_filter)
        if result.status not in _HOLD:
            return result
        if result.status == GetMessageStatus.NO_MATCHED_MESSAGE:
            scanned = True
            pos = result.next_begin_offset
            if pos < result.max_offset:
                continue  # the scan stopped at its byte limit: more to look at, no need to wait
        cq = store.consume_queue(topic, queue_id)
        while cq.max_offset() <= pos:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                result.status = (GetMessageStatus.NO_MATCHED_MESSAGE if scanned
                                 else GetMessageStatus.NO_MESSAGE_IN_QUEUE)
                result.next_begin_offset = pos
                result.max_offset = cq.max_offset()
                return result
            hold.wait(min(POLL_INTERVAL_S, remaining))
