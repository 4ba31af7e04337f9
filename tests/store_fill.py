"""The tests' one way to fill a store with known messages: one put_batch of n messages whose bodies follow a
pattern, into a store directory (opened and closed) or a store a test holds open."""
from __future__ import annotations

from typing import Callable, Union

from store import MessageStore, PutBatchResult

Body = Union[bytes, Callable[[int], bytes]]
QueueId = Union[int, None, Callable[[int], int]]


def fill_store(target, n: int, *, topic: str = "T", body: Body = b"m%d", start: int = 0, queue_id: QueueId = 0,
               queues: int | None = None, config=None, **put_options) -> PutBatchResult:
    """Messages start..start+n-1 of `topic` in one put_batch, and its PutResults. Message i's body is `body % i`
    (a bytes pattern; bytes without one are every message's body) or `body(i)`; its queue is `queue_id`, or
    `queue_id(i)`. queues: the topic is created with that many queues first, unless it exists. put_options (tags,
    keys, properties, ...) go to put_batch as given. target: a store directory, opened with `config` and closed
    after, or an open MessageStore."""
    if isinstance(target, MessageStore):
        return _put(target, n, topic, body, start, queue_id, queues, put_options)
    with MessageStore(target, config) as s:
        return _put(s, n, topic, body, start, queue_id, queues, put_options)


def _put(s: MessageStore, n, topic, body, start, queue_id, queues, put_options) -> PutBatchResult:
    if queues is not None and topic not in s.topics():
        s.create_topic(topic, queues)
    idx = range(start, start + n)
    if callable(body):
        bodies = [body(i) for i in idx]
    else:
        bodies = [body % i for i in idx] if b"%" in body else [body] * n
    qids = [queue_id(i) for i in idx] if callable(queue_id) else queue_id
    return s.put_batch(topic, bodies, queue_id=qids, **put_options)
