"""One Spark partition = one range reader of the log (rmq_log.RangeReader: a queue's offset range, or several read
in turn: the runs an index found, a small microbatch's ranges), and the function executors run to read it; and how
a plan's ranges are cut into more partitions, or small ones packed into fewer."""
from __future__ import annotations

import math
from typing import Any, Iterator, Optional

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from rmq_log.reads import RangeReader, RangeRuns

from .worker_gc import freeze_imported_objects


class LogPartition(InputPartition):
    """A range reader as Spark's partition; it answers for its reader's fields (topic, start, end, ...)."""

    def __init__(self, reader: RangeReader):
        super().__init__(reader.key())
        self.reader = reader

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name == "reader":  # unpickling looks names up before `reader` is set
            raise AttributeError(name)
        return getattr(self.reader, name)

    def __repr__(self) -> str:
        return repr(self.reader)


def pack_small_ranges(parts: list[LogPartition], min_offsets: int) -> list[LogPartition]:
    """The partitions of a microbatch with its ranges of fewer than min_offsets offsets packed into RangeRuns of
    at least min_offsets offsets in all (near-equal shares), so a small microbatch is one wave of a few tasks:
    each task costs Spark a round trip to a Python worker that is far longer than reading a few thousand offsets.
    Ranges keep the plan's order (a queue's pieces stay in offset order); larger ranges stay partitions of their
    own. Each packed range is read as its own partition would be (its metrics line, its data-loss check)."""
    small = [p for p in parts if p.offsets < min_offsets]
    total = sum(p.offsets for p in small)
    groups = max(1, total // max(1, min_offsets))
    if len(small) < 2 or groups >= len(small):
        return parts
    packed: list[list[LogPartition]] = [[]]
    done = 0
    for p in small:
        if packed[-1] and len(packed) < groups and done >= total * len(packed) / groups:
            packed.append([])
        packed[-1].append(p)
        done += p.offsets
    return [p for p in parts if p.offsets >= min_offsets] + \
        [LogPartition(RangeRuns([p.reader for p in g])) if len(g) > 1 else g[0] for g in packed]


def read_partition(p: InputPartition) -> Iterator[pa.RecordBatch]:
    freeze_imported_objects()
    if not isinstance(p, LogPartition):
        return iter(())  # a plan with no ranges: Spark still runs one partition of its own, which holds nothing
    return p.reader.read()


def split_ranges(ranges: list, min_partitions: Optional[int]) -> list:
    """Kafka's minPartitions: cut the largest ranges into pieces (each still in queue order) until there are
    at least min_partitions."""
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    total = sum(e - s for _, _, s, e in ranges)
    out = []
    for topic, qid, s, e in ranges:
        pieces = max(1, min(e - s, math.ceil((e - s) * min_partitions / total)))
        step, extra = divmod(e - s, pieces)
        pos = s
        for i in range(pieces):
            n = step + (1 if i < extra else 0)
            out.append((topic, qid, pos, pos + n))
            pos += n
    return out


