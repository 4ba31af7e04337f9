"""A store directory's partitions as windows of the log across a topic's queues (option logOrder, on by default),
planned and read in-process as Spark's driver and workers do: the same rows as one partition per queue range, each
offset once, lost files reported as a queue's read reports them; and one real Spark stream."""
import json

import pytest
from source_testkit import fill
from store_fill import fill_store

from rmq_log import store_reads
from rmq_log.reads import RangeRuns
from rmq_log.store_reads import StoreRange, StoreWindow
from rmq_spark.schema import SCHEMA
from rmq_spark.source import RmqDataSource
from store import MessageStore, StoreConfig


def plan(path, **options):
    opts = {"path": str(path), "topic": "T", "startingOffsets": "earliest", "commitOffsets": "false",
            "minOffsetsPerPartition": "100", **{k: str(v) for k, v in options.items()}}
    r = RmqDataSource(opts).streamReader(SCHEMA)
    start = r.initialOffset()
    return r, r.partitions(start, r.latestOffset(start, r.getDefaultReadLimit()))


def rows(reader, parts) -> list:
    return sorted((row for p in parts for b in reader.read(p) for row in b.to_pylist()),
                  key=lambda row: (row["queue_id"], row["queue_offset"]))


def test_a_microbatch_reads_windows_of_the_log_with_the_rows_of_one_partition_per_queue(tmp_path):
    path = fill(tmp_path / "s", "T", n=2000, queues=4)
    metrics = tmp_path / "metrics"
    reader, parts = plan(path, metricsPath=metrics)
    assert len(parts) == 4 and all(isinstance(p.reader, StoreWindow) for p in parts)
    pieces = sorted((r.queue_id, r.start, r.end) for p in parts for r in p.reader.ranges)
    for q in range(4):  # each queue's range, cut at the windows' edges, whole
        mine = [(a, b) for q_, a, b in pieces if q_ == q]
        assert mine[0][0] == 0 and mine[-1][1] == 500 and all(x[1] == y[0] for x, y in zip(mine, mine[1:]))
    got = rows(reader, parts)
    per_queue_reader, per_queue = plan(path, logOrder="false")
    assert [type(p.reader) for p in per_queue] == [StoreRange] * 4
    assert got == rows(per_queue_reader, per_queue) and len(got) == 2000
    lines = [json.loads(x) for f in metrics.iterdir() for x in f.read_text().splitlines()]
    assert len(lines) == 4 and sum(m["rows"] for m in lines) == 2000  # a line per window, its queues listed
    assert all(sorted(m["queue_id"]) == [0, 1, 2, 3] and m["commit_log_records_read"] == m["rows"] for m in lines)


def test_ranges_smaller_than_min_offsets_per_partition_are_packed_as_before(tmp_path):
    path = fill(tmp_path / "s", "T", n=400, queues=4)
    reader, parts = plan(path, minOffsetsPerPartition=8192)
    assert len(parts) == 1 and type(parts[0].reader) is RangeRuns  # four ranges of 100: one packed partition
    assert len(rows(reader, parts)) == 400


@pytest.mark.parametrize("fail", [True, False])
def test_a_commitlog_file_missing_inside_a_window_is_data_loss_as_for_a_queue(tmp_path, fail, monkeypatch):
    monkeypatch.setattr(store_reads, "SCAN_BATCH_ROWS", 16)  # many rounds a window: the loss met after some
    with MessageStore(tmp_path / "s", StoreConfig(mappedFileSizeCommitLog=64 * 1024)) as s:
        s.create_topic("T", 4)
        fill_store(s, 2000, body=b"%04d" + b"x" * 200, queue_id=lambda i: i % 4)
        second = s.log_windows("T", [(q, 0, 500) for q in range(4)], 4)[1]
        first_record = min(int(s.consume_queue("T", q).units(a, a + 1)["offset"][0]) for q, a, _ in second)
    gone = f"{(first_record // 65536 + 1) * 65536:020d}"  # the second window's second file
    (tmp_path / "s" / "commitlog" / gone).unlink()
    metrics = tmp_path / "metrics"
    reader, parts = plan(tmp_path / "s", failOnDataLoss=str(fail).lower(), metricsPath=metrics)
    assert all(isinstance(p.reader, StoreWindow) for p in parts)
    if fail:
        with pytest.raises(Exception, match=f"missing file {tmp_path}/s/commitlog/{gone}"):
            rows(reader, parts)
        return
    got = rows(reader, parts)
    per_queue_reader, per_queue = plan(tmp_path / "s", failOnDataLoss="false", logOrder="false")
    want = rows(per_queue_reader, per_queue)
    assert got == want and 0 < len(got) < 2000
    lines = [json.loads(x) for f in metrics.iterdir() for x in f.read_text().splitlines()]
    assert len(lines) == len(parts) and sum(m["rows"] for m in lines) == len(got)  # a line a window, lost file or not


def test_a_spark_stream_reads_each_message_once_through_windows(spark, tmp_path):
    path = fill(tmp_path / "s", "T", n=3000, queues=4)
    out = (spark.readStream.format("rmq").option("topic", "T").option("startingOffsets", "earliest")
           .option("minOffsetsPerPartition", "200").option("maxMessagesPerTrigger", "2000").load(path)
           .writeStream.format("memory").queryName("log_order").trigger(availableNow=True).start())
    try:
        out.awaitTermination(300)
        assert out.exception() is None
        got = spark.sql("SELECT queue_id, queue_offset, body FROM log_order").collect()
    finally:
        out.stop()
    assert sorted((r.queue_id, r.queue_offset) for r in got) == sorted((i % 4, i // 4) for i in range(3000))
    assert all(bytes(r.body) == f"body-T-{r.queue_offset * 4 + r.queue_id}".encode() for r in got)


def test_a_spark_batch_read_with_a_selector_and_pushed_filters_reads_windows(spark, tmp_path):
    path = fill(tmp_path / "s", "T", n=4000, queues=4)  # tags cycle Aa, BB, TagC, None, TagD
    metrics = tmp_path / "metrics"
    df = (spark.read.format("rmq").option("topic", "T").option("tags", "Aa || TagC")
          .option("minOffsetsPerPartition", "100").option("metricsPath", str(metrics)).load(path)
          .where("queue_offset >= 100 AND properties['region'] = 'eu'"))
    got = sorted((r.queue_id, r.queue_offset) for r in df.select("queue_id", "queue_offset").collect())
    want = sorted((i % 4, i // 4) for i in range(4000)
                  if i % 5 in (0, 2) and i // 4 >= 100 and i % 2 == 1)
    assert got == want and got
    lines = [json.loads(x) for f in metrics.iterdir() for x in f.read_text().splitlines()]
    assert len(lines) == 4 and all(sorted(m["queue_id"]) == [0, 1, 2, 3] for m in lines)  # 4 windows
    # the tag codes chose the records read: Aa's, its hash twin BB's, TagC's
    assert sum(m["commit_log_records_read"] for m in lines) == sum(1 for i in range(4000) if i % 5 in (0, 1, 2))
