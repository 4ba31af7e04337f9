"""StoreCheck: verify every commitlog record and every consume-queue unit of a store, without changing it.

Two passes. The commitlog walk finds each file's records by their TOTALSIZE, one at a time (record boundaries are
sequential, so there is no vector form), then verifies them as arrays: MAGICCODE, the field lengths against
TOTALSIZE, PHYSICALOFFSET and BODYCRC (one zlib call per body), keeping a few fields of each record for the
second pass. The consume-queue pass then checks every queue's units against those
arrays with numpy, a mapped file at a time: each unit must point at the start of a valid record of its own
topic and queue with QUEUEOFFSET equal to the unit's index, the same size, and tagsCode equal to Java's
String.hashCode of the record's TAGS; units are dense (no written unit after an empty one) and in commitlog
order; every dispatched record is referenced by the unit at its QUEUEOFFSET.

The store is opened read-only and a running producer is tolerated: each queue's end is taken before the walk
(units are written after their records, so everything below it points at records the walk will see), and a
suspected hole is re-read once before it is reported, since a run of units becomes visible with its first
unit's size written last.
"""
from __future__ import annotations

import os
import struct
import time
import zlib
from array import array
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rmq_common import message_codec as codec
from rmq_common.properties_column import gather_spans, map_lookup, parse_properties

from .consume_queue import CQ_STORE_UNIT_SIZE, UNIT_DTYPE
from .message_store import MessageStore
from .tag_hash import tags_hash_code
from .topic_config import discover_consume_queues

ERROR = "error"
WARNING = "warning"

# RocketMQ's ConsumeQueue.fillPreBlank: units before a queue's first real unit (offset 0, size MAX_INT, tag 0).
_PRE_BLANK_SIZE = 0x7FFFFFFF
# The delay-message topic stores the delivery time in tagsCode, not a tag hash.
_SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
# Records whose tagsCode is not checked (see _SCHEDULE_TOPIC).
_NO_TAG_CHECK = np.iinfo(np.int64).min

_SIZE_MAGIC = struct.Struct(">iI")  # TOTALSIZE, MAGICCODE
_FIXED_HEAD = np.dtype([("total", ">i4"), ("magic", ">u4"), ("crc", ">i4"), ("queue_id", ">i4"), ("flag", ">i4"),
                        ("queue_offset", ">i8"), ("physical", ">i8"), ("sys_flag", ">i4")])
_MIN_RECORD = codec.record_length(0, 0, 0)

_LISTED_PER_KIND = 5  # per queue and kind of problem; the rest are counted in one more line

_VALID = 1       # record passed every check
_DISPATCHED = 2  # transaction type none or commit: it must have a consume-queue unit


@dataclass
class Problem:
    severity: str        # "error" or "warning"
    file: str            # absolute path of the commitlog or consume-queue file
    position: int        # byte position within that file
    message: str
    store_path: str = ""

    @property
    def relative_file(self) -> str:
        if self.store_path and self.file.startswith(self.store_path + os.sep):
            return self.file[len(self.store_path) + 1:]
        return self.file

    def __str__(self) -> str:
        return f"{self.severity.upper()} {self.relative_file} at byte {self.position}: {self.message}"

    def to_dict(self) -> dict:
        return {"severity": self.severity, "file": self.file, "position": self.position, "message": self.message}


@dataclass
class CheckReport:
    path: str
    commit_log_files: int = 0
    commit_log_bytes: int = 0   # bytes covered by valid records (end-of-file blanks not counted)
    records: int = 0            # records walked, valid or not
    consume_queues: int = 0
    units: int = 0              # consume-queue units checked
    expired_units: int = 0      # units pointing below the commitlog's first file (removed by retention)
    skipped_units: int = 0      # units written after the check started (not checked)
    problems: list = field(default_factory=list)
    omitted_problems: int = 0   # problems past max_problems, counted but not listed
    elapsed_s: float = 0.0

    @property
    def errors(self) -> list:
        return [p for p in self.problems if p.severity == ERROR]

    @property
    def warnings(self) -> list:
        return [p for p in self.problems if p.severity == WARNING]

    @property
    def ok(self) -> bool:
        return not self.errors and not self.omitted_problems

    def summary(self) -> str:
        verdict = "OK" if self.ok else "FAILED"
        n_err = len(self.errors) + self.omitted_problems
        text = (f"check {verdict}: {_n(self.records, 'record')} in {_n(self.commit_log_files, 'commitlog file')}, "
                f"{_n(self.units, 'unit')} in {_n(self.consume_queues, 'consume queue')}; "
                f"{_n(n_err, 'error')}, {_n(len(self.warnings), 'warning')}")
        if self.expired_units:
            text += (f". {_n(self.expired_units, 'unit')} point below the commitlog's first file, at messages "
                     "retention removed: expected (a consume-queue file goes only once all its units are below "
                     "it); readers start after them")
        return text

    def to_dict(self) -> dict:
        return {
            "path": self.path, "ok": self.ok, "commit_log_files": self.commit_log_files,
            "commit_log_bytes": self.commit_log_bytes, "records": self.records,
            "consume_queues": self.consume_queues, "units": self.units, "expired_units": self.expired_units,
            "skipped_units": self.skipped_units, "errors": len(self.errors) + self.omitted_problems,
            "warnings": len(self.warnings), "problems": [p.to_dict() for p in self.problems],
            "omitted_problems": self.omitted_problems, "elapsed_s": round(self.elapsed_s, 3),
        }


def _n(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "s")


class _Progress:
    """A tqdm bar on stderr when asked for, else nothing."""

    def __init__(self, enabled: bool, total: int, desc: str, unit: str, scale: bool):
        self.bar = None
        if enabled and total > 0:
            from tqdm import tqdm
            self.bar = tqdm(total=total, desc=desc, unit=unit, unit_scale=scale, leave=False, dynamic_ncols=True)

    def update(self, n: int) -> None:
        if self.bar is not None and n:
            self.bar.update(n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class _Records:
    """What the consume-queue pass needs of each walked record, as arrays in commitlog order."""

    FIELDS = ("offset", "size", "queue_id", "queue_offset", "tags_code", "topic", "status")
    DTYPES = (np.int64, np.int64, np.int64, np.int64, np.int64, np.int32, np.int8)

    def __init__(self):
        self.chunks: list[tuple] = []
        self.topics: list[str] = []
        self._topic_index: dict[bytes, int] = {}
        # the columns, set by freeze() from the chunks
        self.offset = self.size = self.queue_id = self.queue_offset = self.tags_code = np.zeros(0, np.int64)
        self.topic = np.zeros(0, np.int32)
        self.status = np.zeros(0, np.int8)

    def topic_index(self, raw: bytes) -> int:
        i = self._topic_index.get(raw)
        if i is None:
            i = len(self.topics)
            self._topic_index[raw] = i
            self.topics.append(raw.decode("utf-8"))
        return i

    def add(self, *columns) -> None:
        self.chunks.append(columns)

    def freeze(self) -> None:
        for j, (name, dtype) in enumerate(zip(self.FIELDS, self.DTYPES)):
            parts = [c[j] for c in self.chunks]
            setattr(self, name, np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype))
        self.chunks = []


class StoreCheck:
    def __init__(self, store: MessageStore, progress: bool, max_problems: int):
        self.store = store
        self.path = store.path
        self.progress = progress
        self.max_problems = max_problems
        self.report = CheckReport(path=store.path)
        self.records = _Records()
        self.unreadable: list[tuple[int, int]] = []  # commitlog spans the walk could not parse
        self._tag_codes: dict = {}
        self.log_end = 0

    def problem(self, severity: str, file: str, position: int, message: str) -> None:
        if len(self.report.problems) >= self.max_problems:
            self.report.omitted_problems += severity == ERROR
            return
        self.report.problems.append(Problem(severity, file, int(position), message, self.path))

    # -- the commitlog --------------------------------------------------------------------------------------

    def run(self) -> CheckReport:
        started = time.monotonic()
        queues = self._queues()
        # Each queue's end before the walk: units below it point at records written before the walk began.
        ends = {q: self.store.consume_queue(*q).max_offset() for q in queues}
        self.walk_commit_log()
        self.check_consume_queues(queues, ends)
        self.report.elapsed_s = time.monotonic() - started
        return self.report

    def _queues(self) -> list[tuple[str, int]]:
        found: set[tuple[str, int]] = set()
        for topic, ids in discover_consume_queues(self.path).items():
            found.update((topic, q) for q in ids)
        return sorted(found)

    def walk_commit_log(self) -> None:
        cl = self.store.commit_log
        cl.files.refresh()
        files = list(cl.files.files)
        self.report.commit_log_files = len(files)
        bar = _Progress(self.progress, sum(os.path.getsize(f.path) for f in files), "commitlog", "B", True)
        try:
            for i, f in enumerate(files):
                size = os.path.getsize(f.path)
                if size != cl.file_size:
                    self.problem(ERROR, f.path, 0, f"file is {size} bytes; the store's commitlog files are "
                                                   f"{cl.file_size} (mappedFileSizeCommitLog)")
                if i and f.file_from_offset != files[i - 1].file_from_offset + cl.file_size:
                    prev = files[i - 1]
                    self.problem(ERROR, f.path, 0, f"commitlog files are missing between offsets "
                                                   f"{prev.file_from_offset + cl.file_size} and {f.file_from_offset}")
                if size == 0:
                    continue
                self._walk_file(f, i == len(files) - 1, bar)
        finally:
            bar.close()
        self.records.freeze()
        self.report.records = len(self.records.offset)

    def _walk_file(self, f, is_last: bool, bar: _Progress) -> None:
        """Find the records of one file by their TOTALSIZE (sequential by nature), then verify them as arrays."""
        view = f.view()
        n = len(view)
        written = f.data_end()  # past it a hole: never mapped in (on a full tmpfs that would be SIGBUS)
        base = f.file_from_offset
        starts = array("q")
        append = starts.append
        unpack = _SIZE_MAGIC.unpack_from
        v1, v2, blank, min_record = codec.MAGIC_V1, codec.MAGIC_V2, codec.BLANK_MAGIC, _MIN_RECORD
        pos = 0
        reported = 0
        count = 0
        while pos + 8 <= n:  # fewer than 8 bytes left: a reader moves on to the next file
            if pos >= written:
                if not is_last:
                    self._bad(f, pos, "records stop without an end-of-file record, yet later commitlog files exist")
                break  # the unwritten tail: the end of the log
            total, magic = unpack(view, pos)
            if magic == v1 or magic == v2:
                if total < min_record or pos + total > n:
                    reason = f"TOTALSIZE {total} is impossible here ({n - pos} bytes left in the file)"
                    if is_last and 0 < total and (pos + total >= n or not f.any_nonzero(pos + total)):
                        self._bad(f, pos, f"torn record at the end of the log: {reason}; a writable open cuts it",
                                  WARNING)
                    else:
                        self._bad(f, pos, f"{reason}; the rest of this file cannot be walked")
                    self.unreadable.append((base + pos, base + n))
                    break
                append(pos)
                pos += total
                count += 1
                if count & 0xFFFF == 0:
                    bar.update(pos - reported)
                    reported = pos
                continue
            if magic == blank:
                if total != n - pos:
                    self._bad(f, pos, f"end-of-file record says {total} bytes remain, the file has {n - pos}")
                break
            if total == 0 and magic == 0 and not f.any_nonzero(pos):
                if not is_last:
                    self._bad(f, pos, "records stop without an end-of-file record, yet later commitlog files exist")
                break  # the zero tail: the end of the log
            self.unreadable.append((base + pos, base + n))
            self._bad(f, pos, f"bad MAGICCODE 0x{magic:08x}; the rest of this file cannot be walked")
            break
        if count:
            self.log_end = base + pos
        self._verify_records(f, view, np.frombuffer(starts, dtype=np.int64) if count else np.zeros(0, np.int64))
        bar.update(n - reported)

    def _bad(self, f, position: int, reason: str, severity: str = ERROR) -> None:
        self.problem(severity, f.path, position, f"{reason} (commitlog offset {f.file_from_offset + position})")

    def _verify_records(self, f, view, rel: np.ndarray) -> None:
        """Check the records at file positions `rel` (their MAGICCODE and TOTALSIZE are plausible)."""
        if not len(rel):
            return
        base = f.file_from_offset
        buf = np.frombuffer(view, dtype=np.uint8)
        last = len(buf) - 1

        def get(at: np.ndarray, width: int, dtype: str) -> np.ndarray:
            idx = np.minimum(at[:, None] + np.arange(width, dtype=np.int64), last)
            return buf[idx].view(dtype).ravel().astype(np.int64)

        # The fixed head (TOTALSIZE .. SYSFLAG) of every record in one gather.
        head_bytes = buf[np.minimum(rel[:, None] + np.arange(_FIXED_HEAD.itemsize, dtype=np.int64), last)]
        head: np.ndarray = head_bytes.view(_FIXED_HEAD).ravel()
        total = head["total"].astype(np.int64)
        end = rel + total
        magic = head["magic"].astype(np.int64)
        body_crc = head["crc"].astype(np.int64)
        queue_id = head["queue_id"].astype(np.int64)
        queue_offset = head["queue_offset"].astype(np.int64)
        physical = head["physical"].astype(np.int64)
        sys_flag = head["sys_flag"].astype(np.int64)
        host_len = lambda bit: np.where(sys_flag & bit, 20, 8)  # noqa: E731
        body_len_at = rel + codec.POS_BORNHOST + host_len(codec.BORNHOST_V6_FLAG) + 8 \
            + host_len(codec.STOREHOSTADDRESS_V6_FLAG) + 4 + 8
        body_len = get(body_len_at, 4, ">i4")
        body_at = body_len_at + 4
        body_end = body_at + body_len
        v2 = magic == codec.MAGIC_V2
        topic_len = np.where(v2, get(body_end, 2, ">i2"), get(body_end, 1, ">u1"))
        topic_at = body_end + np.where(v2, 2, 1)
        props_len_at = topic_at + topic_len
        props_len = get(props_len_at, 2, ">i2")
        props_at = props_len_at + 2
        sound = (body_len >= 0) & (body_end <= end) & (topic_len > 0) & (props_len >= 0) & (props_at + props_len
                                                                                              == end)
        for i in np.flatnonzero(~sound).tolist():
            self._bad(f, int(rel[i]), f"field lengths do not add up to TOTALSIZE {int(total[i])} "
                                      f"(BODY {int(body_len[i])}, TOPIC {int(topic_len[i])}, "
                                      f"PROPERTIES {int(props_len[i])} bytes)")
        valid = sound.copy()
        moved = np.flatnonzero(sound & (physical != base + rel))
        for i in moved.tolist():
            self._bad(f, int(rel[i]), f"PHYSICALOFFSET is {int(physical[i])}, not the record's own position")
        valid[moved] = False
        ok = np.flatnonzero(sound)
        # BODYCRC: zlib has no batched form, so one C call per body.
        mv = memoryview(view)
        crc32 = zlib.crc32
        computed = np.fromiter((crc32(mv[a:b]) for a, b in zip(body_at[ok].tolist(), body_end[ok].tolist())),
                               dtype=np.int64, count=len(ok)) & 0x7FFFFFFF
        wrong = ok[computed != body_crc[ok]]
        for i, c in zip(wrong.tolist(), (computed[computed != body_crc[ok]]).tolist()):
            self._bad(f, int(rel[i]), f"body CRC mismatch: BODYCRC {int(body_crc[i])}, computed {c}")
        valid[wrong] = False
        # a body its SYSFLAG says is compressed must decompress: every read of its queue fails at it otherwise
        compressed = ok[(sys_flag[ok] & codec.COMPRESSED_FLAG) != 0]
        for i in compressed[np.isin(compressed, wrong, invert=True)].tolist():
            why = codec.body_decompress_error(mv[int(body_at[i]):int(body_end[i])], int(sys_flag[i]))
            if why is not None:
                self._bad(f, int(rel[i]), f"the body does not decompress as SYSFLAG {int(sys_flag[i])} says: {why}")
        # TOPIC and PROPERTIES text, gathered as Arrow arrays.
        topic_idx = np.full(len(rel), -1, dtype=np.int64)
        tags_code = np.zeros(len(rel), dtype=np.int64)
        if len(ok):
            data = pa.py_buffer(buf)
            topics = pc.dictionary_encode(gather_spans(data, topic_at[ok], topic_at[ok] + topic_len[ok]))
            mapping = []
            for raw in topics.dictionary.to_pylist():
                try:
                    mapping.append(self.records.topic_index(raw))
                except UnicodeDecodeError:
                    mapping.append(-1)
            topic_idx[ok] = np.array(mapping, dtype=np.int64)[topics.indices.to_numpy(zero_copy_only=False)]
            props = gather_spans(data, props_at[ok], props_at[ok] + props_len[ok])
            text_ok = self._utf8(props)
            not_text = ok[~text_ok | (topic_idx[ok] < 0)]
            for i in not_text.tolist():
                self._bad(f, int(rel[i]), "TOPIC or PROPERTIES is not UTF-8")
            valid[not_text] = False
            tags = map_lookup(parse_properties(props.filter(pa.array(text_ok)).cast(pa.string())), codec.PROPERTY_TAGS)
            codes = np.zeros(len(ok), dtype=np.int64)
            codes[text_ok] = self._tags_codes(tags)
            tags_code[ok] = codes
        schedule = self.records._topic_index.get(_SCHEDULE_TOPIC.encode())
        if schedule is not None:
            tags_code[topic_idx == schedule] = _NO_TAG_CHECK
        tx = sys_flag & codec.TRANSACTION_TYPE_MASK
        dispatched = (tx == codec.TRANSACTION_NOT_TYPE) | (tx == codec.TRANSACTION_COMMIT_TYPE)
        status = np.where(valid, _VALID, 0) | np.where(dispatched, _DISPATCHED, 0)
        self.report.commit_log_bytes += int(total[valid].sum())
        self.records.add(base + rel, total, queue_id, queue_offset, tags_code, topic_idx, status)

    def _utf8(self, texts: pa.Array) -> np.ndarray:
        """Which binary values are valid UTF-8 (a cast checks them all at once; per value only on failure)."""
        try:
            texts.cast(pa.string())
            return np.ones(len(texts), dtype=bool)
        except pa.ArrowInvalid:
            out = np.ones(len(texts), dtype=bool)
            for i, raw in enumerate(texts.to_pylist()):
                try:
                    raw.decode("utf-8")
                except UnicodeDecodeError:
                    out[i] = False
            return out

    def _tags_codes(self, tags: pa.Array) -> np.ndarray:
        """String.hashCode of each TAGS value (0 when absent), computed once per distinct value."""
        enc = pc.dictionary_encode(tags)
        codes = np.array([self._tag_codes.get(t) if t in self._tag_codes else self._tag_codes.setdefault(
            t, tags_hash_code(t)) for t in enc.dictionary.to_pylist()] + [0], dtype=np.int64)
        return codes[enc.indices.fill_null(len(enc.dictionary)).to_numpy(zero_copy_only=False)]

    # -- the consume queues ---------------------------------------------------------------------------------

    def check_consume_queues(self, queues, ends) -> None:
        rec = self.records
        self.report.consume_queues = len(queues)
        # Dispatched records sorted by (topic, queue id, queue offset), for the record -> unit direction.
        order = np.lexsort((rec.queue_offset, rec.queue_id, rec.topic))
        # (a record that failed validation is reported as such, not as one missing from its queue)
        order = order[(rec.status[order] & (_DISPATCHED | _VALID)) == (_DISPATCHED | _VALID)]
        keys = _queue_key(rec.topic[order], rec.queue_id[order])
        topic_ids = {t: i for i, t in enumerate(rec.topics)}
        self._cl_min = self.store.commit_log.min_offset()
        total_units = sum(max(0, ends[q] - self.store.consume_queue(*q).first_unit_offset()) for q in queues)
        bar = _Progress(self.progress, total_units, "consume queues", "unit", True)
        try:
            for topic, qid in queues:
                t = topic_ids.get(topic, -1)
                a, b = np.searchsorted(keys, [_queue_key(t, qid), _queue_key(t, qid) + 1]) if t >= 0 else (0, 0)
                members = order[a:b]
                mark = len(self.report.problems), self.report.omitted_problems, self.report.units, \
                    self.report.expired_units, self.report.skipped_units
                if self._check_queue(topic, qid, ends[(topic, qid)], members, bar):
                    # Maybe a producer's run of units was half visible: read the queue once more.
                    time.sleep(0.1)
                    del self.report.problems[mark[0]:]
                    (self.report.omitted_problems, self.report.units, self.report.expired_units,
                     self.report.skipped_units) = mark[1:]
                    self._check_queue(topic, qid, ends[(topic, qid)], members, _Progress(False, 0, "", "", False))
        finally:
            bar.close()
        # Dispatched records of queues that have no consume-queue directory at all.
        have = {int(_queue_key(topic_ids[t], q)) for t, q in queues if t in topic_ids}
        uniq, first, counts = np.unique(keys, return_index=True, return_counts=True)
        deleted = self.store.deleted_topics()
        for key, i, count in zip(uniq.tolist(), first.tolist(), counts.tolist()):
            if key not in have:
                r = int(order[i])
                topic, qid = rec.topics[int(rec.topic[r])], int(rec.queue_id[r])
                if int(rec.offset[r]) < deleted.get(topic, -1):
                    continue  # a deleted topic's records, left for retention
                self._undispatched(topic, qid, r, count, ends.get((topic, qid), 0))

    def _undispatched(self, topic: str, qid: int, first_record: int, count: int, queue_end: int) -> None:
        rec = self.records
        off = int(rec.offset[first_record])
        path = self.store.commit_log.path_of(off)
        self.problem(WARNING, path, off - self.store.commit_log.file_start(off),
                     f"{count} record{'s' if count != 1 else ''} of {topic}/{qid} from queue offset "
                     f"{int(rec.queue_offset[first_record])} {'are' if count != 1 else 'is'} not in the consume "
                     f"queue, which ends at {queue_end} (appended during the check, or not yet dispatched after a "
                     f"crash: the next writable open dispatches them)")

    def _check_queue(self, topic: str, qid: int, end: int, members: np.ndarray, bar: _Progress) -> bool:
        """Check one queue's units below `end` and the records that claim the queue; True if a hole was seen."""
        rec = self.records
        cq = self.store.consume_queue(topic, qid)
        cq.refresh()
        files = list(cq.files.files)
        unit_file_size = cq.file_size
        t_idx = rec.topics.index(topic) if topic in rec.topics else -1
        check_tags = topic != _SCHEDULE_TOPIC
        member_qoff = rec.queue_offset[members]
        last_offset = -1
        seen_real = False
        hole = False
        tail = cq.units(end, end + 1)
        end_still_empty = len(tail) == 1 and int(tail["size"][0]) == 0
        shown: dict = {}  # problem kind -> [count, file, first unit]: a few are listed, the rest summarised

        def unit_problems(kind: str, f, q0: int, at: np.ndarray, describe) -> None:
            """Errors for the units at file-relative indexes `at`; describe(j) says what is wrong with the j-th."""
            entry = shown.setdefault(kind, [0, f, int(at[0])])
            for j in range(min(len(at), max(0, _LISTED_PER_KIND - entry[0]))):
                k = int(at[j])
                self.problem(ERROR, f.path, k * CQ_STORE_UNIT_SIZE,
                             f"{topic}/{qid} unit at queue offset {q0 + k}: {describe(j)}")
            entry[0] += len(at)

        for i, f in enumerate(files):
            units = self._unit_file(topic, qid, f, files[i - 1] if i else None, unit_file_size)
            if units is None:
                continue
            q0 = f.file_from_offset // CQ_STORE_UNIT_SIZE
            sizes = units["size"].astype(np.int64)
            written = sizes != 0
            # The units this check covers: below the queue's end taken before the walk. Past it, units are
            # being appended by a producer, unless the unit at the end is still empty (then they are a hole).
            limit = max(0, min(len(units), end - q0))
            beyond = written[limit:]
            if end_still_empty and beyond.any():
                k = limit + int(np.flatnonzero(beyond)[0])
                past_end = q0 + limit + np.flatnonzero(beyond)
                if np.isin(past_end, member_qoff[np.searchsorted(member_qoff, end):]).all():
                    # A dispatch cut short (a full disk, a crash) writes a run's first size last: its other
                    # units are there, over records not dispatched yet, which the next writable open writes again.
                    self.problem(WARNING, f.path, k * CQ_STORE_UNIT_SIZE,
                                 f"{topic}/{qid} units past the queue's end at {end} are written ({len(past_end)} in "
                                 f"this file, from queue offset {q0 + k}): a dispatch cut short, of records the "
                                 f"next writable open dispatches again")
                else:
                    hole = True
                    self.problem(ERROR, f.path, k * CQ_STORE_UNIT_SIZE,
                                 f"{topic}/{qid} unit at queue offset {q0 + k} is written after the empty unit at "
                                 f"queue offset {end} (a hole; {len(past_end)} such units in this file)")
            else:
                self.report.skipped_units += int(np.count_nonzero(beyond))
            if limit == 0:
                continue
            bar.update(limit)
            bad_unit = ~written[:limit]
            if bad_unit.any():
                hole = True
                empty = np.flatnonzero(bad_unit)
                self.problem(ERROR, f.path, int(empty[0]) * CQ_STORE_UNIT_SIZE,
                             f"{topic}/{qid} unit at queue offset {q0 + int(empty[0])} is empty but later units are "
                             f"written (a hole; empty units in this file: {len(empty)})")
            u = units[:limit]
            offs = u["offset"].astype(np.int64)
            sizes = sizes[:limit]
            codes = u["tags_code"].astype(np.int64)
            pre_blank = (offs == 0) & (sizes == _PRE_BLANK_SIZE) & (codes == 0)
            real = np.flatnonzero(~pre_blank & ~bad_unit)
            if pre_blank.any():
                late = np.flatnonzero(pre_blank) if seen_real else \
                    np.flatnonzero(pre_blank[real[0]:]) + real[0] if len(real) else np.zeros(0, np.int64)
                if len(late):
                    unit_problems("pre-blank", f, q0, late,
                                  lambda j: "a pre-blank unit (offset 0, size 2^31-1) after real units")
            if not len(real):
                continue
            seen_real = True
            self.report.units += len(real)
            r_offs, r_sizes, r_codes = offs[real], sizes[real], codes[real]
            # Units are in commitlog order.
            prev = np.concatenate(([last_offset], r_offs[:-1]))
            back = np.flatnonzero(r_offs <= prev)
            if len(back):
                bad_unit[real[back]] = True
                unit_problems("order", f, q0, real[back],
                              lambda j: f"commitlog offset {int(r_offs[back[j]])} is not after the previous "
                                        f"unit's {int(prev[back[j]])}")
            last_offset = int(r_offs[-1])
            expired = r_offs < self._cl_min
            self.report.expired_units += int(np.count_nonzero(expired))
            live = np.flatnonzero(~expired)
            self._units_against_records(qid, f, q0, real, live, r_offs, r_sizes, r_codes, t_idx, check_tags,
                                        bad_unit, unit_problems)
            # Records -> units: a record claiming a queue offset here must be the one that unit points at.
            a, b = np.searchsorted(member_qoff, [q0, q0 + limit])
            if b > a:
                claim = members[a:b]
                k = (rec.queue_offset[claim] - q0).astype(np.int64)
                pointed = offs[k]
                wrong = np.flatnonzero((pointed != rec.offset[claim]) & ~bad_unit[k])
                if len(wrong):
                    unit_problems("unreferenced record", f, q0, k[wrong],
                                  lambda j: f"the record at commitlog offset {int(rec.offset[claim[wrong[j]]])} "
                                            f"claims this queue offset, but the unit points at "
                                            f"{int(pointed[wrong[j]])}")
        for kind, (count, f, k) in shown.items():
            if count > _LISTED_PER_KIND:
                self.problem(ERROR, f.path, k * CQ_STORE_UNIT_SIZE,
                             f"{topic}/{qid}: {count - _LISTED_PER_KIND} more units with this problem: {kind}")
        self._claims_outside(topic, qid, members, member_qoff, end, files)
        return hole

    def _unit_file(self, topic: str, qid: int, f, previous, unit_file_size: int) -> Optional[np.ndarray]:
        """The units of one consume-queue file (its unwritten hole as zeros, never read: see _walk_file), after
        the checks of its size, its name and the file before it; None when it holds no unit to check."""
        size = os.path.getsize(f.path)
        if size != unit_file_size or size % CQ_STORE_UNIT_SIZE:
            self.problem(ERROR, f.path, 0, f"file is {size} bytes; the store's consume-queue files are "
                                           f"{unit_file_size} (mappedFileSizeConsumeQueue)")
        if f.file_from_offset % CQ_STORE_UNIT_SIZE:
            self.problem(ERROR, f.path, 0, "file name is not a multiple of the 20-byte unit")
            return None
        if previous is not None and f.file_from_offset != previous.file_from_offset + unit_file_size:
            self.problem(ERROR, f.path, 0, f"consume-queue files of {topic}/{qid} are missing before this one")
        if size < CQ_STORE_UNIT_SIZE:
            return None
        units = np.zeros(size // CQ_STORE_UNIT_SIZE, dtype=UNIT_DTYPE)
        written = min(size, f.data_end()) // CQ_STORE_UNIT_SIZE
        units[:written] = np.frombuffer(f.view(), dtype=UNIT_DTYPE, count=written)
        return units

    def _units_against_records(self, qid: int, f, q0: int, real: np.ndarray, live: np.ndarray, r_offs: np.ndarray,
                               r_sizes: np.ndarray, r_codes: np.ndarray, t_idx: int, check_tags: bool,
                               bad_unit: np.ndarray, unit_problems) -> None:
        """Units -> records: each live unit must point at the start of a walked record of its topic and queue,
        with its QUEUEOFFSET, size and tag hash, and not a transaction half that is never dispatched."""
        rec = self.records
        idx = np.searchsorted(rec.offset, r_offs[live])
        found = idx < len(rec.offset)
        found[found] = rec.offset[idx[found]] == r_offs[live][found]
        missing = live[~found]
        if len(missing):
            bad_unit[real[missing]] = True
            unit_problems("unknown record", f, q0, real[missing],
                          lambda j: self._describe_missing(int(r_offs[missing[j]])))
        hit = live[found]          # indexes into real
        r = idx[found]             # their records
        at = real[hit]             # file-relative unit indexes
        h_offs = r_offs[hit]
        checks = [
            ("size", rec.size[r] != r_sizes[hit],
             lambda m: lambda j: f"size {int(r_sizes[hit][m[j]])} but the record's TOTALSIZE is "
                                 f"{int(rec.size[r[m[j]]])}"),
            ("topic", rec.topic[r] != t_idx,
             lambda m: lambda j: f"points at a record of topic {self._topic_name(int(rec.topic[r[m[j]]]))!r}"),
            ("queue id", rec.queue_id[r] != qid,
             lambda m: lambda j: f"points at a record with QUEUEID {int(rec.queue_id[r[m[j]]])}"),
            ("queue offset", rec.queue_offset[r] != q0 + at,
             lambda m: lambda j: f"points at a record with QUEUEOFFSET {int(rec.queue_offset[r[m[j]]])}"),
            ("transaction", (rec.status[r] & _DISPATCHED) == 0,
             lambda m: lambda j: "points at a prepared or rolled-back transaction record, which is never "
                                 "dispatched"),
        ]
        if check_tags:
            checks.append(
                ("tagsCode", (rec.tags_code[r] != r_codes[hit]) & (rec.tags_code[r] != _NO_TAG_CHECK),
                 lambda m: lambda j: f"tagsCode {int(r_codes[hit][m[j]])} but the hashCode of the record's "
                                     f"TAGS is {int(rec.tags_code[r[m[j]]])}"))
        for kind, mask, describe in checks:
            if mask.any():
                m = np.flatnonzero(mask)
                bad_unit[at[m]] = True
                text = describe(m)
                unit_problems(kind, f, q0, at[m],
                              lambda j, text=text, m=m: f"{text(j)} (commitlog offset {int(h_offs[m[j]])})")

    def _claims_outside(self, topic: str, qid: int, members: np.ndarray, member_qoff: np.ndarray, end: int,
                        files: list) -> None:
        """Records claiming queue offsets at or past the queue's end, or below its first file (deleted)."""
        rec = self.records
        past = int(np.searchsorted(member_qoff, end))
        if past < len(members):
            self._undispatched(topic, qid, int(members[past]), len(members) - past, end)
        first_unit = files[0].file_from_offset // CQ_STORE_UNIT_SIZE if files else 0
        below = int(np.searchsorted(member_qoff, first_unit))
        if below:
            # Retention deletes a consume-queue file only once its every unit points below the commitlog's first
            # file, so records still walked here had their file deleted or emptied: readers skip them.
            off = int(rec.offset[members[0]])
            self.problem(ERROR, self.store.commit_log.path_of(off), off - self.store.commit_log.file_start(off),
                         f"{below} records of {topic}/{qid} below queue offset {first_unit} (queue offsets "
                         f"{int(member_qoff[0])}..{int(member_qoff[below - 1])}) are in the commitlog but in no "
                         f"consume-queue file: the queue's files before {files[0].file_name if files else 'its first'}"
                         f" are missing or empty, and readers skip these messages (`rmq recover` rebuilds them)")

    def _topic_name(self, idx: int) -> str:
        return self.records.topics[idx] if 0 <= idx < len(self.records.topics) else "?"

    def _describe_missing(self, offset: int) -> str:
        for start, stop in self.unreadable:
            if start <= offset < stop:
                return (f"points at commitlog offset {offset}, in the part of "
                        f"{os.path.basename(self.store.commit_log.path_of(start))} the walk could not read")
        cl = self.store.commit_log
        files = cl.files.files
        files_end = files[-1].file_from_offset + cl.file_size if files else 0
        if offset >= files_end:
            return (f"points at commitlog offset {offset}, in commitlog file {cl.file_start(offset):020d}, which is "
                    f"missing (the log's files end at offset {files_end}, its records at {self.log_end})")
        if offset >= self.log_end:
            return f"points at commitlog offset {offset}, past the end of the log ({self.log_end})"
        return f"points at commitlog offset {offset}, which is not the start of a record"


def _queue_key(topic_index, queue_id):
    """(topic index, signed queue id) as one int64 that sorts like the pair."""
    return (np.asarray(topic_index, dtype=np.int64) << 32) + (np.asarray(queue_id, dtype=np.int64) + (1 << 31))


def check_store(path, config=None, *, progress: bool = False, max_problems: int = 1000) -> CheckReport:
    """Verify a store read-only: every commitlog record and every consume-queue unit. See CheckReport.ok."""
    if not os.path.isdir(os.path.join(os.fspath(path), "commitlog")):
        raise FileNotFoundError(f"{os.fspath(path)} is not a store directory (it has no commitlog/)")
    topic_problems: list = []
    with MessageStore(path, config, read_only=True, topic_config_problems=topic_problems) as store:
        check = StoreCheck(store, progress, max_problems)
        report = check.run()
        # an unreadable topics.json is a finding; the check went on with the topics of consumequeue/
        for text in topic_problems:
            check.problem(ERROR, store.topic_config.path, 0, text)
        return report
