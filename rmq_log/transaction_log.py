"""The wire sink's decisions: which halves make up each committed microbatch, in the query's checkpoint
(<checkpointLocation>/rmq-wire-sink/<batchId>.json, written and fsynced before any END_TRANSACTION is sent).

A decision is what "committed" means for the wire sink: the driver commits the halves it lists, and a restarted
query that replays the batch commits those again and rolls back its own new ones. It lists two kinds of halves:
- half batches (rmq serve): ended again as they are (the broker answers SUCCESS for a batch it committed already);
  a broker's check-back is answered from the decision: halves it lists commit, halves of a decided batch that it
  does not list (a failed task attempt's) roll back, halves of a batch not decided yet stay unknown;
- half messages (Apache RocketMQ), with the end of every target queue before the commit: a stock broker commits a
  half again each time it is told to, so the halves a killed commit ended already are found in those queues first
  (half_messages.py). Its check-backs name copies of the halves, never the halves the decision lists: every copy
  is rolled back at once (answer_copy), decided or not, since only the half the sink sent is ever committed.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Optional

from rmq_client import CheckRequest, HalfBatch, MessageHalves, TransactionState
from rmq_client.transaction_producer import PROPERTY_TRANSACTION_BATCH

from .staging import fsync_dir
from .writes import local_checkpoint

PROPERTY_SINK_BATCH = "SINK_BATCH"  # on each half (and message): the microbatch it belongs to
KEEP_DECISIONS = 100
_NAME = re.compile(r"(\d+)\.json")


@dataclass
class Decision:
    """A decided microbatch: per partition, its half batches and its half messages; `queue_ends`: the end of every
    target queue of the half messages before any was committed (half_messages.queue_key -> offset)."""
    halves: dict[int, list[HalfBatch]]
    messages: dict[int, list[MessageHalves]] = field(default_factory=dict)
    queue_ends: dict[str, int] = field(default_factory=dict)

    def lists(self, transaction_id: str) -> bool:
        return any(h.transaction_id == transaction_id for hs in self.halves.values() for h in hs)


def answer_copy(request: CheckRequest) -> Optional[TransactionState]:
    """ROLLBACK for a check of one of the sink's half messages (an Apache RocketMQ broker asks about a copy it made
    of the half, never the half itself, and the driver commits the half by its own offsets); None for anything
    else."""
    props = request.message.properties if request.message is not None else {}
    if PROPERTY_SINK_BATCH in props and PROPERTY_TRANSACTION_BATCH not in props:
        return TransactionState.ROLLBACK_MESSAGE
    return None


class TransactionLog:
    def __init__(self, checkpoint: str):
        self.dir = os.path.join(local_checkpoint(checkpoint), "rmq-wire-sink")

    def _path(self, batch_id: int) -> str:
        return os.path.join(self.dir, f"{batch_id}.json")

    def read(self, batch_id: int) -> Optional[Decision]:
        """A decided batch; None when the batch was never decided."""
        try:
            with open(self._path(batch_id), encoding="utf-8") as f:
                data = json.load(f)
        except FileNotFoundError:
            return None
        return Decision({int(p): [HalfBatch.from_json(h) for h in hs] for p, hs in data["partitions"].items()},
                        {int(p): [MessageHalves.from_json(h) for h in hs]
                         for p, hs in data.get("messages", {}).items()},
                        {k: int(v) for k, v in data.get("queueEnds", {}).items()})

    def write(self, batch_id: int, decision: Decision) -> None:
        os.makedirs(self.dir, exist_ok=True)
        tmp = self._path(batch_id) + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"batchId": batch_id,
                       "partitions": {str(p): [h.to_json() for h in hs]
                                      for p, hs in sorted(decision.halves.items())},
                       "messages": {str(p): [h.to_json() for h in hs] for p, hs in sorted(decision.messages.items())},
                       "queueEnds": decision.queue_ends}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._path(batch_id))
        fsync_dir(self.dir)

    def decided(self) -> list[int]:
        try:
            names = os.listdir(self.dir)
        except FileNotFoundError:
            return []
        return sorted(int(m.group(1)) for m in map(_NAME.fullmatch, names) if m)

    def prune(self) -> None:
        """Keep the last KEEP_DECISIONS decisions (a check-back only concerns the last few batches)."""
        for b in self.decided()[:-KEEP_DECISIONS]:
            try:
                os.remove(self._path(b))
            except FileNotFoundError:
                pass

    def answer(self, request: CheckRequest) -> TransactionState:
        """A broker's CHECK_TRANSACTION_STATE, answered from the decisions."""
        props = request.message.properties if request.message is not None else {}
        raw = props.get(PROPERTY_SINK_BATCH)
        if raw is None or not raw.isdigit():
            return TransactionState.UNKNOW  # not a half of this sink
        copy = answer_copy(request)
        if copy is not None:
            return copy
        batch_id = int(raw)
        decision = self.read(batch_id)
        if decision is not None:
            listed = decision.lists(request.transaction_id)
            return TransactionState.COMMIT_MESSAGE if listed else TransactionState.ROLLBACK_MESSAGE
        decided = self.decided()
        if decided and batch_id < decided[-1]:
            # Spark decides batches in order, each once (an empty one too): an undecided half of an earlier batch
            # belongs to an attempt the decision left out, or to a decision pruned after all its halves ended
            return TransactionState.ROLLBACK_MESSAGE
        return TransactionState.UNKNOW  # its batch may still commit
