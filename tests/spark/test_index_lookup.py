"""Batch reads answered from the store's index: option key (what array_contains(keys, k) keeps), option uniqKey,
and a pushed msg_id = / IN; the same rows as the scan (useIndex=false, or Spark's own filter)."""
from __future__ import annotations

import re

import pyspark.sql.functions as F
import pytest

from rmq_spark.batch_reader import RmqBatchReader
from rmq_spark.errors import RmqOptionError
from rmq_spark.options import parse_options
from store import MessageStore, StoreConfig

PUSHDOWN = "spark.sql.python.filterPushdown.enabled"


@pytest.fixture(scope="module")
def keyed(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("keyed") / "s")
    with MessageStore(path, StoreConfig(maxHashSlotNum=500, maxIndexNum=2000)) as s:
        s.create_topic("T", 4)
        s.create_topic("Other", 2)
        for b in range(4):  # 1,200 messages, 2,400 index entries: two files
            s.put_batch("T", [b"m%d" % (b * 300 + i) for i in range(300)],
                        keys=[[f"k{(b * 300 + i) % 97}", f"b{b}"] for i in range(300)])
        s.put_batch("Other", [b"o"] * 10, keys=["k7"] * 10)
        found = s.query_message("T", "k5", 100)
    return path, found


def _rows(df):
    return sorted((r.queue_id, r.queue_offset, bytes(r.body), tuple(r["keys"])) for r in df.collect())


def test_key_and_uniq_key_reads_come_from_the_index_with_the_scans_rows(spark, keyed):
    path, k5 = keyed

    def read(**opts):
        r = spark.read.format("rmq").option("path", path).option("topic", "T")
        for k, v in opts.items():
            r = r.option(k, v)
        return r.load()

    by_index = _rows(read(key="k7"))
    assert len(by_index) == len([i for i in range(1200) if i % 97 == 7])
    assert by_index == _rows(read(key="k7", useIndex="false")) == _rows(read().where(F.array_contains("keys", "k7")))
    uniq = k5[3].properties["UNIQ_KEY"]
    assert [bytes(r.body) for r in read(uniqKey=uniq).collect()] == [k5[3].body]

    def planned(**opts):  # the driver's plan: runs of queue offsets the index found
        runs, looked_up = RmqBatchReader(parse_options({"path": path, "topic": "T", **opts}), None)._plan()
        assert looked_up
        return sum(e - s for _, _, s, e in runs), len(runs)

    assert planned(key="k7")[0] == len(by_index)
    assert planned(key="b2") == (300, 4)  # a batch's 300 messages: one run per queue
    assert planned(key="k7", uniqKey=uniq) == planned(key="nope") == (0, 0)
    with pytest.raises(RmqOptionError, match="key"):
        parse_options({"path": path, "topic": "T", "key": "a b"})


def test_a_pushed_msg_id_reads_the_one_record_it_names(spark, keyed):
    path, k5 = keyed
    spark.conf.set(PUSHDOWN, "true")
    try:
        df = spark.read.format("rmq").option("path", path).option("topic", "T").load()
        ids = [m.msg_id for m in k5[:2]]
        pushed = df.where(F.col("msg_id").isin(ids))
        got = pushed.collect()
        assert sorted(bytes(r.body) for r in got) == sorted(m.body for m in k5[:2])
        executed = pushed._jdf.queryExecution().executedPlan().toString()  # the scan took the filter whole
        assert not re.search(r"\bFilter\b", executed), f"msg_id IN was not pushed into the scan:\n{executed}"
        scanned = spark.read.format("rmq").option("path", path).option("topic", "T").option("useIndex", "false") \
            .load().where(F.col("msg_id") == ids[0]).collect()
        assert [bytes(r.body) for r in scanned] == [k5[0].body]
        assert df.where(F.col("msg_id") == "00" * 16).count() == 0
    finally:
        spark.conf.unset(PUSHDOWN)
