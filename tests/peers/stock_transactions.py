"""What a stock broker holds of transactions, read as its check service reads them: the half queue
(RMQ_SYS_TRANS_HALF_TOPIC, every half and every copy its checks made of one) and the op queue
(RMQ_SYS_TRANS_OP_HALF_TOPIC, whose bodies list the half offsets ended, by the producer or by a check's answer).
Read from the live broker's store directory with the project's read-only store (a stock 4.9 broker refuses pulls
of its op topic, TOPIC_NOT_EXIST: the topic has no config, its messages are put straight into the store)."""
from __future__ import annotations

import pyarrow as pa

from rmq_common.message_codec import PROPERTY_UNIQ_KEY
from rmq_common.properties_column import map_lookup
from store import MessageStore

HALF_TOPIC, OP_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC"
GIVEN_UP_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"  # where a broker moves a half checked transactionCheckMax times


def _queue(store: MessageStore, topic: str, queues=(0,)) -> pa.Table:
    batches = [b for q in (queues if topic in store.topics() else ()) for b in store.scan(topic, q, 0)]
    if not batches:
        return pa.table({"queue_offset": pa.array([], pa.int64()), "body": pa.array([], pa.binary()),
                         "properties": pa.array([], pa.map_(pa.string(), pa.string()))})
    return pa.Table.from_batches(batches)


def half_count(store_dir: str) -> int:
    """How many halves (and copies of halves) the broker's half queue holds."""
    with MessageStore(store_dir, read_only=True) as store:
        return _queue(store, HALF_TOPIC).num_rows


def undecided_halves(store_dir: str) -> dict[str, int]:
    """The half messages of the broker whose store is `store_dir` that nothing ended: {UNIQ_KEY: how many copies
    the broker's checks made of it}. A half counts as ended when an op message lists it or any copy of it (a
    check's answer ends the copy it asked about; the producer ends the half it sent), or when the broker gave up
    asking about it (moved to TRANS_CHECK_MAX_TIME_TOPIC: checked, never visible, as RocketMQ documents)."""
    with MessageStore(store_dir, read_only=True) as store:
        ops, halves = _queue(store, OP_TOPIC), _queue(store, HALF_TOPIC)
        given_up = _queue(store, GIVEN_UP_TOPIC, store.queues(GIVEN_UP_TOPIC) if GIVEN_UP_TOPIC in store.topics()
                          else ())
    ended = {int(x) for body in ops.column("body").to_pylist() for x in body.decode().split(",") if x.strip()}
    keys = map_lookup(halves.column("properties").combine_chunks(), PROPERTY_UNIQ_KEY).to_pylist() \
        if halves.num_rows else []
    copies: dict[str, int] = {}
    done: set[str] = set(map_lookup(given_up.column("properties").combine_chunks(), PROPERTY_UNIQ_KEY).to_pylist()
                         if given_up.num_rows else [])
    for offset, key in zip(halves.column("queue_offset").to_pylist(), keys):
        copies[key] = copies.get(key, 0) + 1
        if offset in ended:
            done.add(key)
    return {k: n - 1 for k, n in copies.items() if k not in done}
