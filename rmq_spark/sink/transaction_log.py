"""The wire sink's decisions: which half batches make up each committed microbatch, in the query's checkpoint
(<checkpointLocation>/rmq-wire-sink/<batchId>.json, written and fsynced before any END_TRANSACTION is sent).

A decision is what "committed" means for the wire sink: the driver commits the halves it lists, a restarted query
that replays the batch commits those again (the broker answers SUCCESS for halves it committed already) and rolls
back its own new ones, and a broker's check-back is answered from it: halves a decision lists commit, halves of a
decided batch that it does not list (a failed task attempt's) roll back, halves of a batch not decided yet stay
unknown while it may still be committed.
"""
from __future__ import annotations

import json
import os
import re
from typing import Optional

from rmq_client import CheckRequest, HalfBatch, TransactionState

from .staging import fsync_dir

PROPERTY_SINK_BATCH = "SINK_BATCH"  # on each half (and message): the microbatch it belongs to
KEEP_DECISIONS = 100
_NAME = re.compile(r"(\d+)\.json")


def local_checkpoint(checkpoint: str) -> str:
    """A checkpoint location as a local path (file: URIs too); ValueError for other file systems."""
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", checkpoint) and not checkpoint.startswith("file:"):
        raise ValueError(f"{checkpoint}: the wire sink keeps its decisions in the checkpoint and needs it on a local "
                         "or mounted file system (file:/... or a path)")
    path = checkpoint[len("file:"):] if checkpoint.startswith("file:") else checkpoint
    return os.path.abspath(re.sub(r"^/+", "/", path) if path.startswith("//") else path)


class TransactionLog:
    def __init__(self, checkpoint: str):
        self.dir = os.path.join(local_checkpoint(checkpoint), "rmq-wire-sink")

    def _path(self, batch_id: int) -> str:
        return os.path.join(self.dir, f"{batch_id}.json")

    def read(self, batch_id: int) -> Optional[dict[int, list[HalfBatch]]]:
        """{partition: its halves} of a decided batch; None when the batch was never decided."""
        try:
            with open(self._path(batch_id), encoding="utf-8") as f:
                data = json.load(f)
        except FileNotFoundError:
            return None
        return {int(p): [HalfBatch.from_json(h) for h in hs] for p, hs in data["partitions"].items()}

    def write(self, batch_id: int, partitions: dict[int, list[HalfBatch]]) -> None:
        os.makedirs(self.dir, exist_ok=True)
        tmp = self._path(batch_id) + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"batchId": batch_id,
                       "partitions": {str(p): [h.to_json() for h in hs] for p, hs in sorted(partitions.items())}}, f)
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
        batch_id = int(raw)
        decision = self.read(batch_id)
        if decision is not None:
            listed = any(h.transaction_id == request.transaction_id for hs in decision.values() for h in hs)
            return TransactionState.COMMIT_MESSAGE if listed else TransactionState.ROLLBACK_MESSAGE
        decided = self.decided()
        if decided and batch_id < decided[-1]:
            # Spark decides batches in order, each once (an empty one too): an undecided half of an earlier batch
            # belongs to an attempt the decision left out, or to a decision pruned after all its halves ended
            return TransactionState.ROLLBACK_MESSAGE
        return TransactionState.UNKNOW  # its batch may still commit
