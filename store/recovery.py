"""Recovery: what a store's open does before the first append (RocketMQ's CommitLog.recoverNormally and
recoverAbnormally with DefaultMessageStore.recover), and the same walk when a writer finds records it did not
write past the committed end.

The committed end lives in the `lock` file: after an append has written its commitlog bytes and then its
consume-queue units, the writer stores the new end; everything before it is complete and dispatched. A writer that
takes the lock walks from there, which is normally no record at all; records past it were left by a writer that
died mid-append: complete ones are dispatched, a torn one is cut. After an unclean stop (the abort file left
behind) the walk starts at the checkpoint's safe point and validates every record. Consume queues are derived
data: units missing between a queue's files, a torn last file, and files lost before a queue's first are rebuilt
from the commitlog. A cut that would drop messages which may have been acknowledged is refused
(StoreRecoveryError) unless asked for (recover_truncate).
"""
from __future__ import annotations

import logging
import os
from typing import Iterator, Optional, Sequence

import numpy as np

from rmq_common import message_codec as codec

from .commit_log import WalkedRecord
from .consume_queue import CQ_STORE_UNIT_SIZE, UNIT_DTYPE, ConsumeQueue
from .delay_levels import SCHEDULE_TOPIC, deliver_times
from .errors import CorruptRecordError, DiskFullError, StoreRecoveryError
from .put_batch import incomplete_atomic_start
from .tag_hash import tags_hash_code

log = logging.getLogger(__name__)


class Recovery:
    """A store's recovery, run under its write lock (store: the MessageStore)."""

    def __init__(self, store, truncate: bool = False):
        self.store = store
        self.truncate = truncate  # recover_truncate: cut where the log is damaged even when that drops messages

    def recover(self, abnormal: bool) -> None:
        """On open, under the write lock. After an unclean stop, RocketMQ's abnormal recovery: walk from the
        checkpoint's safe point validating every record, cut after the last valid one, drop consume-queue
        units at or past the new end, re-dispatch records without units. Otherwise continue from the committed
        end (or, in a store without one, from the end of what the consume queues point at), after checking
        that the records the consume queues end at are intact: a commitlog changed while the store was closed
        (a truncated or overwritten tail) gets the crash recovery too, never an append on top of the damage."""
        store = self.store
        # The consume queues' own end also bounds the start: a store whose consumequeue/ was deleted (to be
        # rebuilt) or copied without it is re-dispatched from the commitlog.
        for topic, queue_ids in store.consume_queue_ids().items():
            for qid in queue_ids:
                self.repair_consume_queue(store.consume_queue(topic, qid))
        if store.commit_log.min_offset() == 0:  # no file ever expired: a queue not starting at 0 lost its head
            self._rebuild_lost_heads()
        dispatched, damaged = self._dispatched_tail()
        if abnormal:
            log.warning("store %s was not closed cleanly (abort file present): recovering", store.path)
        elif damaged is not None:
            log.warning("store %s: %s, though the store was closed cleanly: recovering as after a crash",
                        store.path, damaged)
            abnormal = True
        if abnormal:
            start = min(self._safe_recovery_start(), dispatched)
        else:
            committed = store.lock_file.committed_end()
            start = dispatched if committed is None or committed < store.commit_log.min_offset() else \
                min(committed, dispatched)
        try:
            end = self.catch_up(full_check=abnormal, start=start)
        except DiskFullError as e:
            # A store that filled its disk opens to be read: what is dispatched is served, and every append
            # first tries the dispatch again (refused with this error until there is room).
            log.error("store %s: %s; it opens with those records not dispatched yet", store.path, e)
            store.appender.write_pos = None
            return
        try:
            store.index.catch_up(end)  # records a crash (or an index-less writer) left unindexed
        except Exception as e:
            log.error("store %s: the index could not be caught up (%s); it is tried again by the next writer",
                      store.path, e)

    def repair_consume_queue(self, cq: ConsumeQueue) -> None:
        """Consume queues are derived data, rebuilt from the commitlog as RocketMQ rebuilds them: units missing
        between files (a short or missing file) are re-dispatched from the records between their neighbours; a
        torn last file is extended, and recovery re-dispatches the records past its last unit."""
        store = self.store
        for lo, hi, path, size in cq.holes():
            self._fill_hole(cq, lo, hi, path, size)
        if cq.repair_short_last_file():
            log.warning("store %s: %s/%d: the last consume-queue file was short (a torn write); its lost units "
                        "are re-dispatched from the commitlog", store.path, cq.topic, cq.queue_id)

    def rebuild_consume_queues(self) -> int:
        """`rmq recover`: rebuild what recovery rebuilds on every open (units between a queue's files, a torn
        last file), and also the consume-queue files missing or emptied before a queue's first file while the
        commitlog still holds their records, which an open looks for only in a store whose commitlog never
        expired a file (elsewhere that takes a walk from the commitlog's first file). Returns how many units
        were rebuilt below the queues' first files."""
        store = self.store
        with store.write_lock():
            for topic, queue_ids in store.consume_queue_ids().items():
                for qid in queue_ids:
                    self.repair_consume_queue(store.consume_queue(topic, qid))
            return self._rebuild_lost_heads()

    def _rebuild_lost_heads(self) -> int:
        """Units below each queue's first consume-queue file whose records are still in the commitlog: the
        file was deleted or emptied, not expired (retention deletes a consume-queue file only once every unit
        in it points below the commitlog's first file). One walk from the commitlog's first record to the
        furthest first unit of such queues; each queue's run must end right below its first file."""
        store = self.store
        cl_min = store.commit_log.min_offset()
        heads: dict[tuple[str, int], int] = {}
        stop: Optional[int] = 0
        for topic, queue_ids in store.consume_queue_ids().items():
            for qid in queue_ids:
                cq = store.consume_queue(topic, qid)
                first = cq.first_unit_offset()
                if first == 0:
                    continue
                unit = cq.units(first, first + 1)
                at = int(unit["offset"][0]) if len(unit) and unit["size"][0] > 0 else None
                if at is not None and at <= cl_min:
                    continue  # nothing of the queue can lie below it in the commitlog
                heads[(topic, qid)] = first
                stop = None if stop is None or at is None else max(stop, at)
        if not heads:
            return 0
        found: dict[tuple[str, int], list[WalkedRecord]] = {}
        for rec in store.commit_log.walk(cl_min, check_crc=False):
            if stop is not None and rec.offset >= stop:
                break
            key = (rec.topic, rec.queue_id)
            if key in heads and rec.queue_offset < heads[key] and codec.is_dispatched(rec.sys_flag):
                found.setdefault(key, []).append(rec)
        rebuilt = 0
        for key, recs in sorted(found.items()):
            rebuilt += self._rebuild_head(store.consume_queue(*key), heads[key], recs, cl_min)
        return rebuilt

    def _rebuild_head(self, cq: ConsumeQueue, first: int, recs: list, cl_min: int) -> int:
        store = self.store
        lo = recs[0].queue_offset
        where = f"consume-queue files of {cq.topic}/{cq.queue_id} before {first * CQ_STORE_UNIT_SIZE:020d}"
        if [r.queue_offset for r in recs] != list(range(lo, first)) or (cl_min == 0 and lo != 0):
            log.error("store %s: %s are missing or empty; the commitlog holds %d of their records but not queue "
                      "offsets %d..%d in order, so they stay missing and `rmq check` reports them", store.path,
                      where, len(recs), 0 if cl_min == 0 else lo, first - 1)
            return 0
        # Units below the first record still in the commitlog, in the same file: RocketMQ's pre-blank units
        # (offset 0, size 2^31-1), which readers skip as expired.
        start = lo - lo % cq.units_per_file
        units = np.zeros(first - start, dtype=UNIT_DTYPE)
        units["size"][:lo - start] = 0x7FFFFFFF
        units["offset"][lo - start:] = [r.offset for r in recs]
        units["size"][lo - start:] = [r.size for r in recs]
        units["tags_code"][lo - start:] = [tags_hash_code(r.tags) for r in recs]
        for file_start in range(start, first, cq.units_per_file):
            path = os.path.join(cq.directory, f"{file_start * CQ_STORE_UNIT_SIZE:020d}")
            if os.path.exists(path):  # emptied: given its full size again before the units go in
                cq.extend_short_file(path, os.path.getsize(path))
        cq.put_units(start, units)
        store.appender.dirty_queues.add(cq)
        log.warning("store %s: %s were missing or empty; rebuilt units %d..%d from the commitlog", store.path,
                    where, lo, first - 1)
        return first - lo

    def _fill_hole(self, cq: ConsumeQueue, lo: int, hi: int, path: str, size: int) -> None:
        store = self.store
        before = cq.units(lo - 1, lo) if lo > cq.first_unit_offset() else None
        start = int(before["offset"][0]) + int(before["size"][0]) if before is not None and len(before) \
            else store.commit_log.min_offset()
        after = cq.units(hi, hi + 1)
        end = int(after["offset"][0]) if len(after) and after["size"][0] > 0 else None
        found: list[WalkedRecord] = []
        for rec in store.commit_log.walk(start, check_crc=False):
            if end is not None and rec.offset >= end or len(found) == hi - lo:
                break
            if rec.topic == cq.topic and rec.queue_id == cq.queue_id and codec.is_dispatched(rec.sys_flag) \
                    and lo <= rec.queue_offset < hi:
                found.append(rec)
        if [r.queue_offset for r in found] != list(range(lo, lo + len(found))) or (end is not None and
                                                                                  len(found) != hi - lo):
            log.error("store %s: %s/%d: consume-queue file %s is %s; the commitlog does not hold its units %d..%d "
                      "(found %d), so it stays as it is and readers report it", store.path, cq.topic, cq.queue_id,
                      path, f"{size} bytes" if size else "missing", lo, hi - 1, len(found))
            return
        log.warning("store %s: %s/%d: consume-queue file %s was %s; rebuilt units %d..%d from the commitlog",
                    store.path, cq.topic, cq.queue_id, path, f"short ({size} bytes)" if size else "missing", lo,
                    lo + len(found) - 1)
        cq.extend_short_file(path, size)
        units = np.zeros(len(found), dtype=UNIT_DTYPE)
        units["offset"] = [r.offset for r in found]
        units["size"] = [r.size for r in found]
        units["tags_code"] = self._tags_codes(found)
        cq.put_units(lo, units)
        store.appender.dirty_queues.add(cq)

    def _tags_codes(self, recs: Sequence[WalkedRecord]) -> np.ndarray:
        """The units' tagsCodes of records of one queue, as dispatch writes them: the tag hash, or for a delayed
        message (SCHEDULE_TOPIC_XXXX) the time it is due."""
        store = self.store
        if recs and recs[0].topic == SCHEDULE_TOPIC:
            return deliver_times([r.queue_id for r in recs], [r.store_timestamp for r in recs], store._delays_ms)
        return np.array([tags_hash_code(r.tags) for r in recs], dtype=np.int64)

    def _dispatched_tail(self) -> tuple[int, Optional[str]]:
        """The dispatched end (dispatched_end), and what is wrong with the record each queue's last unit
        points at, if any record there does not validate (None when all do)."""
        store = self.store
        end, damaged = store.commit_log.min_offset(), None
        for cq, offset, size in self._last_units():
            end = max(end, offset + size)
            if damaged is not None or offset < store.commit_log.min_offset():  # below it: expired
                continue
            try:
                found = store.commit_log.read_message(offset, size, decompress=False)
            except CorruptRecordError as e:
                damaged = f"the last message of {cq.topic}/{cq.queue_id} does not validate ({e})"
                continue
            if found is None:
                damaged = (f"the last message of {cq.topic}/{cq.queue_id} lies in a commitlog file that is "
                           f"missing ({store.commit_log.path_of(offset)})")
        return end, damaged

    def _safe_recovery_start(self) -> int:
        """RocketMQ's abnormal recovery: from the newest commitlog file whose first record is older than the
        checkpoint (or the first file)."""
        store = self.store
        files = store.commit_log.files.files
        stamp = store.checkpoint.min_timestamp()
        for f in reversed(files):
            try:
                rec = next(store.commit_log.walk(f.file_from_offset))
            except StopIteration:
                continue
            if rec.store_timestamp <= stamp:
                return f.file_from_offset
        return files[0].file_from_offset if files else 0

    def catch_up(self, full_check: bool = False, start: Optional[int] = None) -> int:
        """Bring this process's idea of the log end up to date (under the write lock) when another writer may
        have been here: walk from `start` (the committed end, else our own end or the dispatched end), dispatch
        complete records that lack consume-queue units, and cut a torn tail. After a crash
        (`full_check`) also drop consume-queue units that point past the valid end, and clear unit bytes past
        each queue's end that a dead writer left (they would turn visible with the next run of that queue).
        Returns the log end, where the next append goes."""
        store = self.store
        if start is None:
            committed = store.lock_file.committed_end()
            if committed is None or committed < store.commit_log.min_offset():
                start = store.appender.write_pos if store.appender.write_pos is not None else self.dispatched_end()
            else:
                start = committed
        store.appender.queue_ends.clear()
        check_crc = store.config.checkCRCOnRecover or full_check
        records = list(store.commit_log.walk(start, check_crc=check_crc))
        end = store.commit_log.walk_end
        cut = incomplete_atomic_start(records)
        if cut is not None:
            log.warning("store %s: cutting an atomic batch whose end was never written, from offset %d",
                        store.path, cut)
            records = [r for r in records if r.offset < cut]
            end = cut
        pending, stop = self._plan_redispatch(records)
        if stop is not None:
            end = stop
        cutting = store.commit_log.has_bytes_from(end, whole_file=full_check)
        committed = store.lock_file.committed_end()
        if cutting or full_check or (committed is not None and end < committed):
            self._check_cut(end, [r for r in records if r.offset < end], start, cut_atomic=cut)
        if cutting:
            log.warning("store %s: cutting a torn or invalid commitlog tail at offset %d", store.path, end)
            store.commit_log.truncate(end)
            full_check = True
        if full_check:
            for topic, queue_ids in store.consume_queue_ids().items():
                for qid in queue_ids:
                    self._truncate_dirty_units(store.consume_queue(topic, qid), end)
        for (topic, qid), recs in pending.items():
            self._dispatch_run(topic, qid, recs)
        if store.lock_file.fd is not None and (records or full_check or store.lock_file.committed_end() != end):
            store.appender.publish(end)
        store.appender.write_pos = end
        return end

    def _check_cut(self, end: int, kept, start: int, cut_atomic: Optional[int]) -> None:
        """Refuse (StoreRecoveryError) a recovery that would end the log at `end` while dropping messages that
        may have been acknowledged: consume-queue units past `end` whose records still validate (damage in
        the middle, not a torn tail), records past `end` that the checkpoint says were flushed (their store
        time is not after the last kept record's, but older than the checkpoint's), or an unfinished atomic
        batch that starts before the committed end. recover_truncate=True lets the cut go ahead."""
        store = self.store
        dropped, intact = self._units_from(end)
        committed = store.lock_file.committed_end()
        flushed = store.checkpoint.read_flushed_offset()
        stamp = store.checkpoint.physic_msg_timestamp
        if flushed is not None:
            flushed_lost = end < flushed
        else:  # a checkpoint without our flushed offset (a broker's): judge by store times
            last_ts = kept[-1].store_timestamp if kept else self._last_timestamp_before(start)
            losing = bool(dropped) or store.commit_log.has_bytes_from(end, whole_file=True) or (
                committed is not None and end < committed)
            flushed_lost = losing and last_ts is not None and last_ts < stamp
        early_atomic = cut_atomic is not None and committed is not None and cut_atomic < committed
        if not (intact or flushed_lost or early_atomic):
            return
        where = f"offset {end} ({store.commit_log.path_of(end)})"
        if intact:
            why = (f"the commitlog is damaged at {where}, but {intact} message(s) after it still validate: this "
                   f"is damage in the middle of the log, not a torn tail")
        elif flushed_lost:
            why = (f"the commitlog ends at {where}, but the checkpoint says it had been flushed to "
                   f"{'offset %d' % flushed if flushed is not None else 'messages stored at %d' % stamp}: "
                   f"flushed data is missing or damaged")
        else:
            why = (f"an atomic batch without its last record starts at offset {cut_atomic}, before the committed "
                   f"end {committed}")
        if self.truncate:
            log.warning("store %s: %s; cutting there as asked (recover_truncate), dropping %d message(s)",
                        store.path, why, dropped)
            if flushed is not None and flushed > end:
                store.checkpoint.flushed_offset = end
                store.checkpoint.flush()
            return
        raise StoreRecoveryError(
            f"store {store.path}: refusing to open: {why}. Recovery would cut the log there and drop {dropped} "
            f"message(s) the consume queues point at. Run `rmq check` to see the damage; to cut anyway, open "
            f"with MessageStore(..., recover_truncate=True) or run `rmq recover --truncate`.",
            store.path, end, dropped)

    def _units_from(self, end: int) -> tuple[int, int]:
        """(units of all queues pointing at or past commitlog offset `end`, how many of their records still
        validate)."""
        store = self.store
        dropped = intact = 0
        for topic, queue_ids in store.consume_queue_ids().items():
            for qid in queue_ids:
                cq = store.consume_queue(topic, qid)
                lo, mx = cq.first_unit_offset(), cq.max_offset()
                if mx <= lo:
                    continue
                units = cq.units(lo, mx)
                past = units[units["offset"].astype(np.int64) + units["size"] > end]
                dropped += len(past)
                for offset, size in zip(past["offset"].tolist(), past["size"].tolist()):
                    if offset >= end:
                        try:
                            intact += store.commit_log.read_message(offset, size, decompress=False) is not None
                        except CorruptRecordError:
                            pass
        return dropped, intact

    def _last_timestamp_before(self, offset: int) -> Optional[int]:
        """The store time of the newest record ending at or before `offset` that a queue's last unit points
        at, None if there is none."""
        store = self.store
        best = None
        for _, o, n in self._last_units():
            if o + n <= offset and (best is None or o > best[0]):
                best = (o, n)
        if best is None:
            return None
        try:
            msg = store.commit_log.read_message(*best, decompress=False)
        except CorruptRecordError:
            return None
        return None if msg is None else msg.store_timestamp

    def _plan_redispatch(self, records) -> tuple[dict, Optional[int]]:
        """Which walked records need consume-queue units. A record whose unit is there already is skipped. A
        record whose queue offset is taken by a unit pointing elsewhere is stale (bytes a cut left behind, not
        an append) and ends the valid log. A record past a hole in its queue is reported and left alone."""
        store = self.store
        pending: dict[tuple[str, int], list] = {}
        expected: dict[tuple[str, int], int] = {}
        deleted = store.deleted_topics()
        for rec in records:
            if not codec.is_dispatched(rec.sys_flag) or rec.offset < deleted.get(rec.topic, -1):
                continue  # a deleted topic's records stay deleted
            key = (rec.topic, rec.queue_id)
            if key not in expected:
                expected[key] = store.consume_queue(*key).max_offset()
            exp = expected[key]
            if rec.queue_offset < exp:
                unit = store.consume_queue(*key).units(rec.queue_offset, rec.queue_offset + 1)
                if len(unit) and int(unit["offset"][0]) == rec.offset and int(unit["size"][0]) == rec.size:
                    continue
                log.warning("store %s: record at %d claims %s/%d@%d, which the consume queue gives another "
                            "record: treating it as the end of the log", store.path, rec.offset, rec.topic,
                            rec.queue_id, rec.queue_offset)
                return pending, rec.offset
            if rec.queue_offset > exp:
                log.warning("store %s: %s/%d has no units between %d and %d; record at %d left undispatched "
                            "(rmq check reports it)", store.path, rec.topic, rec.queue_id, exp, rec.queue_offset,
                            rec.offset)
                continue
            pending.setdefault(key, []).append(rec)
            expected[key] = exp + 1
        return pending, None

    def _dispatch_run(self, topic: str, qid: int, recs) -> None:
        """Write the units of one queue's run of records at once (the first unit's size last)."""
        store = self.store
        cfg = store.topic_config.find(topic)
        if cfg is None or max(cfg.readQueueNums, cfg.writeQueueNums) <= qid:
            if cfg is None:
                store._create_topic_locked(topic, max(store.config.defaultTopicQueueNums, qid + 1))
            elif max(cfg.readQueueNums, cfg.writeQueueNums) <= qid:
                cfg.readQueueNums = cfg.writeQueueNums = qid + 1
                store.topic_config.persist()
        cq = store.consume_queue(topic, qid)
        start = recs[0].queue_offset
        if cq.max_offset() != start:
            log.warning("store %s: %s/%d ends at %d, not %d; not re-dispatching", store.path, topic, qid,
                        cq.max_offset(), start)
            return
        units = np.zeros(len(recs), dtype=UNIT_DTYPE)
        units["offset"] = [r.offset for r in recs]
        units["size"] = [r.size for r in recs]
        units["tags_code"] = self._tags_codes(recs)
        log.info("store %s: re-dispatching %d record(s) into %s/%d from %d", store.path, len(recs), topic, qid,
                 start)
        cq.put_units(start, units)
        store.appender.dirty_queues.add(cq)

    def _truncate_dirty_units(self, cq: ConsumeQueue, end: int) -> None:
        store = self.store
        mx = cq.max_offset()
        lo = cq.first_unit_offset()
        cut = mx
        if mx > lo:
            units = cq.units(lo, mx)
            past = np.flatnonzero(units["offset"].astype(np.int64) + units["size"] > end)
            if len(past):
                cut = lo + int(past[0])
                log.warning("store %s: dropping units of %s/%d from queue offset %d (past the commitlog end)",
                            store.path, cq.topic, cq.queue_id, cut)
        if cut < mx or self._unit_bytes_after(cq, cut):
            cq.truncate_from(cut)

    @staticmethod
    def _unit_bytes_after(cq: ConsumeQueue, queue_offset: int) -> bool:
        f = cq.files.find(queue_offset * CQ_STORE_UNIT_SIZE)
        if f is None:
            return any(x.file_from_offset > queue_offset * CQ_STORE_UNIT_SIZE for x in cq.files.files)
        rel = queue_offset * CQ_STORE_UNIT_SIZE - f.file_from_offset
        if f.any_nonzero(rel):
            return True
        return f is not cq.files.last()

    def dispatched_end(self) -> int:
        """End of the last record any consume queue points at: everything before it was completely written."""
        store = self.store
        return max([store.commit_log.min_offset()] + [o + n for _, o, n in self._last_units()])

    def _last_units(self) -> Iterator[tuple[ConsumeQueue, int, int]]:
        """(queue, commitlog offset, size) of every queue's last unit."""
        store = self.store
        for topic, queue_ids in store.consume_queue_ids().items():
            for qid in queue_ids:
                cq = store.consume_queue(topic, qid)
                mx = cq.max_offset()
                if mx > cq.first_unit_offset():
                    last = cq.units(mx - 1, mx)
                    if len(last) and last["size"][0] > 0:
                        yield cq, int(last["offset"][0]), int(last["size"][0])
