"""One Spark partition = one range reader of the log (rmq_log.RangeReader: a queue's offset range, or the runs an
index found), and the function executors run to read it; and how a plan's ranges are cut into more partitions."""
from __future__ import annotations

import math
from typing import Any, Iterator, Optional

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from rmq_log.reads import RangeReader


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


def read_partition(p: InputPartition) -> Iterator[pa.RecordBatch]:
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


