"""Retention: RocketMQ's CleanCommitLogService and CleanConsumeQueueService.

Commitlog files whose last write (mtime) is older than fileReservedTime hours are deleted oldest first, stopping
at the first one still young, never the last file (the one being written). Then, per queue, consume-queue files
whose every unit points below the commitlog's new minimum offset go too (never a queue's last file). A reader
that asks below the new minimum gets OFFSET_TOO_SMALL with next_begin_offset at the new minimum.

Run by hand (`MessageStore.clean_expired()`, `rmq clean`) expired files go at once, like RocketMQ's manual
delete. Run periodically (`periodic=True`, as RocketMQ's 10 s timer does) the time rule applies only in a
`deleteWhen` hour ("04", or "04;05;...") unless the disk is fuller than diskMaxUsedSpaceRatio percent; above
diskSpaceCleanForciblyRatio (85 %) the oldest files go even if not expired, at most deleteFileBatchMax (10) a
run, as in RocketMQ.
"""
from __future__ import annotations

import logging
import shutil
import time
from dataclasses import dataclass, field
from typing import Optional

log = logging.getLogger(__name__)

DISK_SPACE_CLEAN_FORCIBLY_RATIO = 85  # RocketMQ's diskSpaceCleanForciblyRatio default, percent
DELETE_FILE_BATCH_MAX = 10            # RocketMQ's deleteFileBatchMax


@dataclass
class CleanSummary:
    commit_log_files_deleted: list = field(default_factory=list)  # file names
    consume_queue_files_deleted: int = 0
    index_files_deleted: int = 0
    commit_log_min_offset: int = 0
    min_offsets: dict = field(default_factory=dict)  # {topic: {queue_id: min offset}}
    reason: str = ""  # why files were (or were not) deleted

    def to_dict(self) -> dict:
        return {
            "commit_log_files_deleted": list(self.commit_log_files_deleted),
            "consume_queue_files_deleted": self.consume_queue_files_deleted,
            "index_files_deleted": self.index_files_deleted,
            "commit_log_min_offset": self.commit_log_min_offset,
            "min_offsets": {t: {str(q): o for q, o in qs.items()} for t, qs in self.min_offsets.items()},
            "reason": self.reason,
        }


def disk_used_percent(path: str) -> float:
    usage = shutil.disk_usage(path)
    return 100.0 * (usage.total - usage.free) / usage.total if usage.total else 0.0


def delete_when_hours(text: str) -> set:
    """deleteWhen: hours of day separated by ';' ("04", "04;16")."""
    hours = set()
    for part in str(text).split(";"):
        part = part.strip()
        if not part:
            continue
        if not part.isdigit() or not 0 <= int(part) <= 23:
            raise ValueError(f"deleteWhen must be hours 00..23 separated by ';', got {text!r}")
        hours.add(int(part))
    return hours


def clean_expired(store, now: Optional[float] = None, periodic: bool = False,
                  disk_used_ratio: Optional[float] = None) -> CleanSummary:
    from .errors import ReadOnlyStoreError
    if store.read_only:
        raise ReadOnlyStoreError(f"store {store.path} is open read-only; retention deletes files")
    cfg = store.config
    if cfg.fileReservedTime < 0:
        raise ValueError(f"fileReservedTime must be >= 0 hours, got {cfg.fileReservedTime}")
    now = time.time() if now is None else float(now)
    reserved_s = cfg.fileReservedTime * 3600.0
    summary = CleanSummary()
    with store.write_lock():
        used = disk_used_percent(store.commit_log.directory) if disk_used_ratio is None else float(disk_used_ratio)
        space_full = used > cfg.diskMaxUsedSpaceRatio
        forcibly = used > DISK_SPACE_CLEAN_FORCIBLY_RATIO
        if not periodic:
            summary.reason, batch_max = "manual", None
        else:
            time_up = time.localtime(now).tm_hour in delete_when_hours(cfg.deleteWhen)
            if not (time_up or space_full):
                summary.reason = "not a deleteWhen hour and the disk is not full"
                _clean_queues(store, summary, delete=False)
                return summary
            summary.reason = ("disk full (%.1f%% > %d%%)" % (used, cfg.diskMaxUsedSpaceRatio)) if space_full \
                else f"deleteWhen hour {cfg.deleteWhen}"
            batch_max = DELETE_FILE_BATCH_MAX
        files = store.commit_log.files
        files.refresh()
        for f in list(files.files[:-1]):  # never the file being written
            if batch_max is not None and len(summary.commit_log_files_deleted) >= batch_max:
                break
            try:
                expired = now >= f.last_modified() + reserved_s
            except FileNotFoundError:
                continue  # another process deleted it
            if not (expired or (periodic and forcibly)):
                break
            log.info("retention: deleting commitlog file %s (%s)", f.path, "expired" if expired else "disk full")
            summary.commit_log_files_deleted.append(f.file_name)
            files.delete_file(f)
        _clean_queues(store, summary, delete=True)
        summary.index_files_deleted = store.index.delete_expired(store.commit_log.min_offset())
    return summary


def _clean_queues(store, summary: CleanSummary, delete: bool) -> None:
    """Each queue's expired files deleted (delete=True) and its min offset, in one pass that reads at most a unit
    or two of a queue whose files do not expire (ConsumeQueue.clean_expired). A queue's first unit is taken
    from memory when no other writer published a committed end since the last pass: only a writer's cut of a
    torn tail rewrites units, and a cut is published."""
    cl_min = store.commit_log.min_offset()
    summary.commit_log_min_offset = cl_min
    lock_file = store.lock_file
    mark = None if lock_file.committed_end() is None else (lock_file.generation, lock_file.publishes)
    last = store._retention_mark
    trust = mark is not None and last is not None and mark[0] - last[0] == mark[1] - last[1]
    for topic, queue_ids in store.consume_queue_ids().items():
        mins = summary.min_offsets[topic] = {}
        for qid in queue_ids:
            deleted, mins[qid] = store.consume_queue(topic, qid).clean_expired(cl_min, delete, trust)
            summary.consume_queue_files_deleted += deleted
    store._retention_mark = mark
