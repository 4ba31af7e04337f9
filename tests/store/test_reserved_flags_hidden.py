"""The store's own SYSFLAG bits (atomic batches, for its recovery) stay in its files: what readers get (the scan
Spark and the wire read, the records a pull sends) carries RocketMQ's flags only."""
from __future__ import annotations

import numpy as np

from rmq_common import message_codec as codec
from store import MessageStore


def test_atomic_batches_reach_readers_with_rocketmq_flags_only(tmp_path):
    with MessageStore(tmp_path) as s:
        s.put_batch("T", [b"a", b"b", b"c"], queue_id=0, atomic=True)
        s.put("T", b"plain", queue_id=0, sys_flag=codec.MULTI_TAGS_FLAG)
        scanned = [f for b in s.scan("T", 0, 0) for f in b.column("sys_flag").to_pylist()]
        assert scanned == [0, 0, 0, codec.MULTI_TAGS_FLAG]
        units = s.consume_queue("T", 0).units(0, 4)
        body = s.commit_log.read_records(units["offset"].astype(np.int64), units["size"].astype(np.int64))
        pulled, pos = [], 0
        while pos < len(body):  # what a pull's response body carries
            m = codec.decode_record(body.tobytes(), pos)
            pulled.append(m.sys_flag)
            pos += m.store_size
        assert pulled == [0, 0, 0, codec.MULTI_TAGS_FLAG]
        # the files keep them: recovery still finds an atomic batch's end
        stored = [m.sys_flag & codec.RESERVED_SYS_FLAGS for m in s.get_message("g", "T", 0, 0).messages]
        assert stored == [codec.ATOMIC_BATCH_FLAG] * 2 + [codec.RESERVED_SYS_FLAGS, 0]
