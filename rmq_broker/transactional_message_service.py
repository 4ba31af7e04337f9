"""TransactionalMessageService: half messages wait in RMQ_SYS_TRANS_HALF_TOPIC, invisible to consumers, until an
END_TRANSACTION commits them into their topic or rolls them back; each decision is an op message in
RMQ_SYS_TRANS_OP_HALF_TOPIC (tag "d", body: the half queue offsets it removes, comma-separated as RocketMQ 5
writes them), so the decisions survive a restart.

Beyond RocketMQ 4.x, kept compatible with its frames:
- a SEND_BATCH_MESSAGE whose messages carry TRAN_MSG=true stores them as consecutive halves marked with one
  TRAN_BATCH id, and an END_TRANSACTION with `tranStateTableCount` N decides the N halves from
  tranStateTableOffset at once (without the field: one half, as RocketMQ);
- a commit appends the messages to their queues and its op message in ONE atomic put_batch, so a broker killed
  in between never holds a committed half that a later check-back could commit again;
- ending a half twice is answered from the decisions: SUCCESS when it was decided the same way,
  TRANSACTION_SHOULD_ROLLBACK (asked to commit what was rolled back) or TRANSACTION_SHOULD_COMMIT (the
  opposite), where RocketMQ 4.x would put a committed message again;
- op messages carry TRAN_STATE (COMMIT or ROLLBACK): RocketMQ's only say "removed".
"""
from __future__ import annotations

import bisect
import logging
import re
import threading
from dataclasses import dataclass
from typing import Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rmq_common.message_codec import PROPERTY_TAGS, PROPERTY_UNIQ_KEY
from rmq_common.message_properties import PropertiesText
from rmq_common.properties_column import map_lookup, text_with_entries, text_without_keys
from store import MessageStore

log = logging.getLogger(__name__)

HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
OP_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
REMOVE_TAG = "d"
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
PROPERTY_PRODUCER_GROUP = "PGROUP"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
PROPERTY_TRANSACTION_BATCH = "TRAN_BATCH"
PROPERTY_TRANSACTION_STATE = "TRAN_STATE"

# MessageSysFlag's transaction types
TRANSACTION_NOT_TYPE = 0
TRANSACTION_COMMIT_TYPE = 0x8
TRANSACTION_ROLLBACK_TYPE = 0xC
STATE_NAMES = {TRANSACTION_COMMIT_TYPE: "COMMIT", TRANSACTION_ROLLBACK_TYPE: "ROLLBACK"}
_STATES = {v: k for k, v in STATE_NAMES.items()}
_DONE = {TRANSACTION_COMMIT_TYPE: "committed", TRANSACTION_ROLLBACK_TYPE: "rolled back"}
# what an op message's body may list (its body must stay far below maxMessageSize)
MAX_HALVES_PER_END = 65536
_OP_BODY = re.compile(rb"[0-9]{1,18}(,[0-9]{1,18})*")


class Decisions:
    """Which half queue offsets were committed or rolled back: disjoint ranges, merged when adjacent."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.states: list[int] = []

    def __len__(self) -> int:
        return len(self.starts)

    def add(self, start: int, end: int, state: int) -> None:
        if start >= end:
            return
        i = bisect.bisect_left(self.starts, start)
        if i > 0 and self.ends[i - 1] == start and self.states[i - 1] == state:
            self.ends[i - 1] = end
            i -= 1
        else:
            self.starts.insert(i, start)
            self.ends.insert(i, end)
            self.states.insert(i, state)
        if i + 1 < len(self.starts) and self.starts[i + 1] == self.ends[i] and self.states[i + 1] == state:
            self.ends[i] = self.ends[i + 1]
            del self.starts[i + 1], self.ends[i + 1], self.states[i + 1]

    def parts(self, start: int, end: int) -> list[tuple[int, int, Optional[int]]]:
        """[start, end) cut into (from, to, state or None when undecided), in order."""
        out: list[tuple[int, int, Optional[int]]] = []
        i = max(0, bisect.bisect_right(self.starts, start) - 1)
        pos = start
        while pos < end and i < len(self.starts):
            s, e, st = self.starts[i], self.ends[i], self.states[i]
            if e <= pos:
                i += 1
                continue
            if s >= end:
                break
            if s > pos:
                out.append((pos, s, None))
                pos = s
            out.append((pos, min(e, end), st))
            pos = min(e, end)
            i += 1
        if pos < end:
            out.append((pos, end, None))
        return out

    def undecided_mask(self, offsets: np.ndarray) -> np.ndarray:
        """True where a (sorted) half offset was never decided."""
        if not len(self.starts):
            return np.ones(len(offsets), dtype=bool)
        starts, ends = np.asarray(self.starts), np.asarray(self.ends)
        i = np.searchsorted(starts, offsets, side="right") - 1
        inside = (i >= 0) & (offsets < ends[np.maximum(i, 0)])
        return ~inside

    def first_undecided(self, start: int) -> int:
        i = bisect.bisect_right(self.starts, start) - 1
        while 0 <= i < len(self.starts) and self.starts[i] <= start < self.ends[i]:
            start = self.ends[i]
            i += 1
        return start


def _offsets_text(offsets: np.ndarray) -> bytes:
    """Half queue offsets as an op message's body: decimal, comma-separated."""
    decimal = pa.array(offsets).cast(pa.string())
    return pc.binary_join(pa.ListArray.from_arrays(pa.array([0, len(offsets)], pa.int32()), decimal),
                          ",")[0].as_py().encode()


def _op_offsets(body: Optional[bytes]) -> Optional[np.ndarray]:
    """An op message's half queue offsets, sorted; None when the body is not decimal offsets, comma-separated."""
    if not body or not _OP_BODY.fullmatch(body):
        return None
    return np.sort(np.array(body.split(b",")).astype(np.int64))


@dataclass(frozen=True)
class EndResult:
    code: int        # a ResponseCode
    remark: Optional[str]
    topics: tuple = ()  # (topic, queue id) that received messages


@dataclass(frozen=True)
class PendingHalves:
    """Undecided halves to check back: one half, or the consecutive halves of one batch."""
    offset: int
    count: int
    commit_log_offset: int
    group: str
    transaction_id: str
    msg_id: str
    unique_key: str


class TransactionalMessageService:
    def __init__(self, store: MessageStore):
        self.store = store
        self.decisions = Decisions()
        self.checks: dict[int, int] = {}  # first half offset -> check-backs sent (in memory: a restart starts over)
        # Ends run in several threads at once (their reads, checks and texts overlap; the store serialises the
        # appends): a range being decided is claimed, and an end that overlaps a claim waits for its outcome.
        self._lock = threading.Lock()
        self._decided = threading.Condition(self._lock)
        self._claims: list[tuple[int, int]] = []
        self._load()

    def create_topics(self) -> None:
        for topic in (HALF_TOPIC, OP_TOPIC):
            if not self.store.has_topic(topic):
                self.store.create_topic(topic, 1)

    # -- state ----------------------------------------------------------------------------------------------------

    def _load(self) -> None:
        if not self.store.has_topic(OP_TOPIC):
            return
        start = self.store.min_offset(OP_TOPIC, 0)
        for rb in self.store.scan(OP_TOPIC, 0, start, None, columns=("body", "properties")):
            states = map_lookup(rb.column(1), PROPERTY_TRANSACTION_STATE).to_pylist()
            for body, state in zip(rb.column(0).to_pylist(), states):
                offsets = _op_offsets(body)
                if offsets is None:  # not the broker's (fillOpRemoveMap skips what does not parse)
                    log.warning("an op message in %s lists no half offsets (%r): skipped", OP_TOPIC, body[:40])
                    continue
                breaks = np.flatnonzero(np.diff(offsets) != 1) + 1
                for run in np.split(offsets, breaks):
                    self.decisions.add(int(run[0]), int(run[-1]) + 1,
                                       _STATES.get(state or "", TRANSACTION_ROLLBACK_TYPE))

    def half_bounds(self) -> tuple[int, int]:
        if not self.store.has_topic(HALF_TOPIC):
            return 0, 0
        return self.store.min_offset(HALF_TOPIC, 0), self.store.max_offset(HALF_TOPIC, 0)

    def undecided_count(self) -> int:
        lo, hi = self.half_bounds()
        with self._lock:
            return sum(e - s for s, e, st in self.decisions.parts(lo, hi) if st is None)

    # -- prepare ----------------------------------------------------------------------------------------------------

    def prepare(self, topic: str, queue_id: int, bodies, properties: Optional[pa.StringArray], **put_args):
        """Halves of messages for topic/queue_id (properties: their texts as sent): stored in the half topic's
        queue 0 with REAL_TOPIC and REAL_QID, their transaction type cleared (parseHalfMessageInner)."""
        props = text_with_entries(properties, len(bodies),
                                  {PROPERTY_REAL_TOPIC: topic, PROPERTY_REAL_QUEUE_ID: queue_id})
        if not self.store.has_topic(HALF_TOPIC):
            self.store.create_topic(HALF_TOPIC, 1)
        put_args["sys_flag"] = int(put_args.get("sys_flag", 0)) & ~TRANSACTION_ROLLBACK_TYPE
        return self.store.put_batch(HALF_TOPIC, bodies, properties=props, queue_id=0, **put_args)

    # -- end ------------------------------------------------------------------------------------------------------

    def end(self, group: str, offset: int, count: int, commit_log_offset: int, transaction_id: str,
            state: int) -> EndResult:
        """EndTransactionProcessor: commit (into the real queues) or roll back halves [offset, offset+count).
        Thread-safe: the undecided part of the range is claimed while it is decided."""
        from remoting.codes import ResponseCode

        what = f"half messages [{offset}, {offset + count})" if count > 1 else f"half message {offset}"
        with self._lock:
            while True:
                todo = self._undecided(offset, count, transaction_id, state, what)
                if isinstance(todo, EndResult):
                    return todo
                if not any(s < ce and cs < e for s, e in todo for cs, ce in self._claims):
                    break
                self._decided.wait()
            self._claims.extend(todo)
        outcome = None
        try:
            outcome = self._decide(group, offset, count, commit_log_offset, transaction_id, state, what, todo)
            return outcome
        finally:
            with self._lock:
                if outcome is not None and outcome.code == ResponseCode.SUCCESS:
                    for s, e in todo:
                        self.decisions.add(s, e, state)
                        for o in [o for o in self.checks if s <= o < e]:
                            del self.checks[o]
                for r in todo:
                    self._claims.remove(r)
                self._decided.notify_all()

    def _undecided(self, offset: int, count: int, transaction_id: str, state: int, what: str):
        """The ranges of [offset, offset+count) still to decide, or the answer when there is nothing to do."""
        from remoting.codes import ResponseCode

        name = STATE_NAMES[state]
        lo, hi = self.half_bounds()
        if count < 1 or count > MAX_HALVES_PER_END or offset < lo or offset + count > hi:
            return EndResult(ResponseCode.SYSTEM_ERROR, f"Find prepared transaction message failed: {what} not "
                                                         f"in the half queue [{lo}, {hi}) (tranStateTableOffset, "
                                                         f"tranStateTableCount 1..{MAX_HALVES_PER_END})")
        parts = self.decisions.parts(offset, offset + count)
        other = [p for p in parts if p[2] is not None and p[2] != state]
        if other:
            code = ResponseCode.TRANSACTION_SHOULD_ROLLBACK if state == TRANSACTION_COMMIT_TYPE else \
                ResponseCode.TRANSACTION_SHOULD_COMMIT
            s, e, st = other[0]
            return EndResult(code, f"{what} of transaction {transaction_id}: [{s}, {e}) was already "
                                    f"{_DONE[st or 0]} (asked: {name})")
        todo = [(s, e) for s, e, st in parts if st is None]
        if not todo:
            return EndResult(ResponseCode.SUCCESS, f"{what} already {_DONE[state]}")
        return todo

    def _decide(self, group: str, offset: int, count: int, commit_log_offset: int, transaction_id: str, state: int,
                what: str, todo: list) -> EndResult:
        """Commit or roll back the claimed ranges `todo` (the halves checked against the request first)."""
        from remoting.codes import ResponseCode

        table = self._read_halves(todo)
        if table.num_rows != sum(e - s for s, e in todo):
            return EndResult(ResponseCode.SYSTEM_ERROR, f"Find prepared transaction message failed: {what} (the "
                                                         f"half queue holds {table.num_rows} of them)")
        texts = table.column("properties_text").combine_chunks()
        props = PropertiesText(texts)
        props.prefetch([PROPERTY_PRODUCER_GROUP, PROPERTY_TRANSACTION_BATCH, PROPERTY_REAL_TOPIC,
                        PROPERTY_REAL_QUEUE_ID])
        groups = props.column(PROPERTY_PRODUCER_GROUP)
        if pc.any(pc.invert(pc.fill_null(pc.equal(groups, pa.scalar(group)), False))).as_py():
            return EndResult(ResponseCode.SYSTEM_ERROR, f"The producer group wrong: {what} belongs to "
                                                         f"{groups[0].as_py()!r}, not {group!r}")
        if int(table.column("queue_offset")[0].as_py()) == offset and \
                int(table.column("commit_log_offset")[0].as_py()) != commit_log_offset:
            return EndResult(ResponseCode.SYSTEM_ERROR, f"The commit log offset wrong: {what} lies at "
                                                         f"{table.column('commit_log_offset')[0].as_py()}, not "
                                                         f"{commit_log_offset}")
        if count > 1:
            batch = props.column(PROPERTY_TRANSACTION_BATCH)
            if pc.any(pc.invert(pc.fill_null(pc.equal(batch, pa.scalar(transaction_id)), False))).as_py():
                return EndResult(ResponseCode.SYSTEM_ERROR, f"{what} are not all of transaction batch "
                                                             f"{transaction_id!r} (TRAN_BATCH)")
        op_props = {PROPERTY_TAGS: REMOVE_TAG, PROPERTY_TRANSACTION_STATE: STATE_NAMES[state]}
        op_body = _offsets_text(np.concatenate([np.arange(s, e, dtype=np.int64) for s, e in todo]))
        if not self.store.has_topic(OP_TOPIC):
            self.store.create_topic(OP_TOPIC, 1)
        moved: tuple = ()
        if state == TRANSACTION_ROLLBACK_TYPE:
            self.store.put(OP_TOPIC, op_body, properties=op_props, queue_id=0)
        else:
            moved = self._commit(table, texts, props, op_body, op_props)
        return EndResult(ResponseCode.SUCCESS, None, moved)

    def _read_halves(self, ranges: list) -> pa.Table:
        cols = ("queue_offset", "commit_log_offset", "properties_text", "body", "flag", "born_timestamp", "born_host",
                "reconsume_times", "sys_flag", "store_timestamp")
        batches = [rb for s, e in ranges for rb in self.store.scan(HALF_TOPIC, 0, s, e, columns=cols,
                                                                   release_pages=False)]
        if not batches:
            return pa.table({c: pa.array([], pa.int64()) for c in ("queue_offset", "commit_log_offset")})
        return pa.Table.from_batches(batches)

    def _commit(self, table: pa.Table, texts: pa.StringArray, props: PropertiesText, op_body: bytes,
                op_props: dict) -> tuple:
        """endMessageTransaction for every half, and the op message, in one atomic append."""
        n = table.num_rows
        topics = props.column(PROPERTY_REAL_TOPIC)
        queues = pc.cast(props.column(PROPERTY_REAL_QUEUE_ID), pa.int32())
        # as endMessageTransaction, and our batch id with them (TRAN_MSG and PGROUP stay, as in RocketMQ); the
        # texts are rewritten, not parsed and built again
        clean = text_without_keys(texts, (PROPERTY_REAL_TOPIC, PROPERTY_REAL_QUEUE_ID, PROPERTY_TRANSACTION_BATCH))
        op_text = pa.array(["".join(f"{k}\x01{v}\x02" for k, v in op_props.items())], pa.string())
        sys_flags = (table.column("sys_flag").to_numpy() & ~TRANSACTION_ROLLBACK_TYPE) | TRANSACTION_COMMIT_TYPE
        born = table.column("born_timestamp").combine_chunks().cast(pa.int64()).to_numpy()
        self.store.put_batch(
            pa.concat_arrays([topics.cast(pa.string()), pa.array([OP_TOPIC], pa.string())]),
            pa.concat_arrays([table.column("body").combine_chunks(), pa.array([op_body], pa.binary())]),
            properties=pa.concat_arrays([clean, op_text]),
            queue_id=np.concatenate([queues.to_numpy(zero_copy_only=False), [0]]).astype(np.int32),
            flag=np.concatenate([table.column("flag").to_numpy(), [0]]).astype(np.int32),
            sys_flag=np.concatenate([sys_flags, [0]]).astype(np.int32),
            born_timestamp=np.concatenate([born, [born[-1]]]),
            born_host=table.column("born_host")[0].as_py(),
            reconsume_times=np.concatenate([table.column("reconsume_times").to_numpy(), [0]]).astype(np.int32),
            atomic=True)
        moved = pa.table({"t": topics, "q": queues}).group_by(["t", "q"]).aggregate([])
        pairs = sorted(zip(moved.column("t").to_pylist(), moved.column("q").to_pylist()))
        log.debug("committed %d half messages into %s", n, pairs)
        return tuple(pairs)

    # -- check-back -------------------------------------------------------------------------------------------------

    def due(self, now_ms: int, timeout_ms: int) -> list[PendingHalves]:
        """Undecided halves stored more than timeout_ms ago, batch by batch (TransactionalMessageCheckService)."""
        lo, hi = self.half_bounds()
        with self._lock:
            start = self.decisions.first_undecided(lo)
        if start >= hi:
            return []
        out: list[PendingHalves] = []
        cols = ("queue_offset", "commit_log_offset", "store_timestamp", "properties", "msg_id")
        for rb in self.store.scan(HALF_TOPIC, 0, start, hi, columns=cols, release_pages=False):
            offsets = rb.column(0).to_numpy()
            with self._lock:
                keep = self.decisions.undecided_mask(offsets)
            stamps = rb.column(2).cast(pa.int64()).to_numpy()
            keep &= stamps <= now_ms - timeout_ms
            if not keep.any():
                continue
            idx = np.flatnonzero(keep)
            props = rb.column(3)
            groups = map_lookup(props, PROPERTY_PRODUCER_GROUP).to_pylist()
            batches = map_lookup(props, PROPERTY_TRANSACTION_BATCH).to_pylist()
            uniq = map_lookup(props, PROPERTY_UNIQ_KEY).to_pylist()
            clog = rb.column(1).to_numpy()
            ids = rb.column(4).to_pylist()
            for i in idx:
                o, b = int(offsets[i]), batches[i]
                last = out[-1] if out else None
                if last is not None and b is not None and last.transaction_id == b and \
                        last.offset + last.count == o:
                    out[-1] = PendingHalves(last.offset, last.count + 1, last.commit_log_offset, last.group, b,
                                            last.msg_id, last.unique_key)
                else:
                    out.append(PendingHalves(o, 1, int(clog[i]), groups[i] or "", b or uniq[i] or "", ids[i],
                                             uniq[i] or ""))
        return out

    def record_bytes(self, offset: int) -> bytes:
        """The stored bytes of one half (CHECK_TRANSACTION_STATE's body: the message as RocketMQ encodes it)."""
        _, body = self.store.get_message_records(HALF_TOPIC, 0, offset, 1)
        return b"" if body is None else body.tobytes()
