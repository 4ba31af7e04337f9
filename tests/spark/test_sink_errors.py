"""Bad input to the rmq sink: schema and option errors when the query starts, bad rows fail the batch with
the row's position and reason, and nothing of a failed batch becomes visible."""
import os

import pyspark.sql.functions as F
import pytest
from pyspark.sql.types import MapType, StringType, StructField, StructType
from sink_testkit import markers, stored

from rmq_log.place import default_stream_sink_id
from rmq_spark.options import RmqOptionError
from rmq_spark.sink.sink_options import parse_sink_options


def _write(df, dst, **options):
    w = df.write.format("rmq").mode("append")
    for k, v in options.items():
        w = w.option(k, v)
    w.save(dst)


@pytest.mark.parametrize("select, message", [
    (["body", "id"], "column 'id' is not accepted by the rmq sink. Accepted columns and types: body: binary or "
                     "string"),
    (["id as body"], "column 'body' has type bigint; the rmq sink takes body: binary or string"),
    (["cast(id as string) as topic"], "the DataFrame has no `body` (or `value`) column"),
    (["body", "body as value"], "has both `body` and its alias `value`"),
    (["body", "array(1) as keys"], "column 'keys' has type array<int>; the rmq sink takes keys: string "
                                   "(space-separated) or array<string>"),
])
def test_schema_errors_at_start_name_the_column_and_list_what_is_accepted(spark, tmp_path, select, message):
    df = spark.range(3).withColumn("body", F.col("id").cast("string")).selectExpr(*select)
    with pytest.raises(Exception) as err:
        _write(df, str(tmp_path / "dst"), topic="T")
    assert message in str(err.value)
    assert not (tmp_path / "dst").exists()  # failed before anything was touched


def test_option_errors(spark, tmp_path):
    df = spark.range(3).select(F.col("id").cast("string").alias("body"))
    with pytest.raises(Exception, match="option 'topik': unknown option .*did you mean 'topic'"):
        _write(df, str(tmp_path / "d"), topik="T")
    with pytest.raises(Exception, match="option 'topic': no topic"):
        _write(df, str(tmp_path / "d"))
    with pytest.raises(Exception, match="option 'mode': the rmq sink appends only"):
        df.write.format("rmq").mode("overwrite").option("topic", "T").save(str(tmp_path / "d"))
    with pytest.raises(Exception, match="option 'batchId': give sinkId and batchId together"):
        _write(df, str(tmp_path / "d"), topic="T", sinkId="s")
    with pytest.raises(Exception, match="option 'topic': "):
        _write(df, str(tmp_path / "d"), topic="bad topic!")


def test_stream_needs_append_mode(spark, tmp_path):
    src = spark.readStream.format("rate").option("rowsPerSecond", 1).load()
    agg = src.groupBy((F.col("value") % 2).alias("k")).count().select(F.col("k").cast("string").alias("body"))
    with pytest.raises(Exception) as err:
        q = (agg.writeStream.format("rmq").outputMode("complete").option("topic", "T")
             .option("checkpointLocation", str(tmp_path / "cp")).start(str(tmp_path / "dst")))
        q.awaitTermination(30)
        q.stop()
    assert "append output mode only" in str(err.value)


def test_sink_id_defaults(tmp_path):
    cp = tmp_path / "cp"
    cp.mkdir()
    (cp / "metadata").write_text('{"id":"0b8a352a-428f-444f-855e-7d0dd8ab49eb"}\n')
    assert default_stream_sink_id(str(cp)) == "query-0b8a352a-428f-444f-855e-7d0dd8ab49eb"
    assert default_stream_sink_id("file:" + str(cp)) == "query-0b8a352a-428f-444f-855e-7d0dd8ab49eb"
    assert default_stream_sink_id(str(tmp_path / "none")).startswith("checkpoint-")
    with pytest.raises(RmqOptionError, match="option 'sinkId': required for a stream"):
        parse_sink_options({"path": str(tmp_path / "s"), "topic": "T"}, stream=True)
    assert parse_sink_options({"path": str(tmp_path / "s"), "topic": "T", "sinkid": "mine"}, stream=True).sink_id \
        == "mine"


def test_one_parser_reads_the_options_of_a_directory_or_a_cluster_and_one_log_writes(tmp_path):
    from rmq_log.cluster_log import ClusterLog
    from rmq_log.store_log import StoreLog
    from rmq_spark.backend import sink_log

    local = parse_sink_options({"path": str(tmp_path / "s"), "topic": "T"}, stream=False)
    assert (local.namesrv_addr, local.fresh, local.batch_id) == (None, True, 0)
    assert local.sink_id.startswith("write-") and isinstance(sink_log(local), StoreLog)
    again = parse_sink_options({"path": str(tmp_path / "s"), "sinkid": "s", "batchid": "7"}, stream=False)
    assert (again.fresh, again.sink_id, again.batch_id) == (False, "s", 7)
    wire = parse_sink_options({"NAMESRVADDR": "127.0.0.1:9876", "topic": "T", "deliveryguarantee": "at-least-once",
                               "brokertimeoutms": "5"}, stream=True)
    assert (wire.path, wire.namesrv, wire.exactly_once, wire.broker_timeout_ms) == ("", "127.0.0.1:9876", False, 5)
    assert wire.producer_group.startswith("rmq-sink-") and isinstance(sink_log(wire), ClusterLog)
    with pytest.raises(RmqOptionError, match="option 'producergroup': unknown option for writing format"):
        parse_sink_options({"path": str(tmp_path / "s"), "producergroup": "g"}, stream=False)
    with pytest.raises(RmqOptionError, match="option 'storeConfig': not with namesrvAddr"):
        parse_sink_options({"namesrvaddr": "127.0.0.1:9876", "storeconfig": "x"}, stream=False)


def test_what_a_log_refuses_is_the_error_of_the_option_to_change(tmp_path):
    """The log's refusals name its WriteOptions field or carry the broker's error; the writer names the option."""
    import pyarrow as pa

    from rmq_client import MQClientError
    from rmq_log.writes import LogWrites, WriteRefused
    from rmq_spark.sink.writer import RmqStreamWriter, open_writes

    wire = parse_sink_options({"namesrvaddr": "127.0.0.1:9876", "topic": "T",
                               "deliveryguarantee": "at_least_once"}, stream=True)
    with pytest.raises(RmqOptionError, match="option 'namesrvAddr': the born_timestamp column is not sent"):
        open_writes(wire, {"body": 0, "born_timestamp": 1})

    class Refusing(LogWrites):
        def stage(self, rows, batch_id, partition, attempt):
            list(rows)
            raise WriteRefused(MQClientError(16, "Check signature failed for accessKey=k", "127.0.0.1:10911",
                                             "send"), "sending 1 rows to T/broker-a/0")

        def commit(self, receipts, batch_id):
            pass

        def abort(self, receipts, batch_id):
            pass

    writer = RmqStreamWriter(wire, {"body": 0}, Refusing(wire))
    with pytest.raises(RmqOptionError, match="option 'secretKey': sending 1 rows to T/broker-a/0: the broker at "
                                             "127.0.0.1:10911 refused it"):
        writer.write(iter([pa.record_batch([pa.array([b"x"])], names=["body"])]))


@pytest.mark.parametrize("rows, message", [
    ([("T", "ok", None), ("T", "ok", None), ("bad topic!", "x", None)], "row 2: topic"),
    ([("T", "ok", None), ("T", "ok", {"p": "a\x01b"})], "row 1: property value 'a\\x01b' contains a reserved"),
    ([("T", "ok", None), ("T", "x" * 2000, None)], "row 1: body is 2000 bytes, more than maxMessageSize (1024)"),
])
def test_a_bad_row_fails_the_batch_with_its_position_and_nothing_is_visible(spark, tmp_path, rows, message):
    conf = tmp_path / "store.conf"
    conf.write_text("maxMessageSize=1024\n")
    dst = str(tmp_path / "dst")
    schema = StructType([StructField("topic", StringType()), StructField("body", StringType()),
                         StructField("properties", MapType(StringType(), StringType()))])
    good = [("T", f"good-{i}", None) for i in range(5)]
    # one partition, so the bad row's position is known; the good rows before it must not become visible
    df = spark.createDataFrame(good + rows, schema).coalesce(1)
    with pytest.raises(Exception) as err:
        _write(df, dst, storeConfig=str(conf))
    text = str(err.value)
    row = int(message.split(":")[0].split()[1]) + len(good)
    assert f"row {row}:" + message.split(":", 1)[1] in text, text
    assert stored(dst, "T").num_rows == 0 and markers(dst) == []


def test_a_topic_with_a_trailing_newline_is_refused(spark, tmp_path):
    df = spark.range(3).select(F.col("id").cast("string").alias("body"))
    with pytest.raises(Exception, match="option 'topic'.*characters outside"):
        _write(df, str(tmp_path / "d"), topic="tn\n")
    with pytest.raises(Exception, match="characters outside"):
        _write(df.withColumn("topic", F.lit("tn\n")), str(tmp_path / "d"))
    assert not (tmp_path / "d" / "consumequeue").exists() or not os.listdir(tmp_path / "d" / "consumequeue")


def test_a_queue_id_outside_the_topic_fails_in_the_task_with_its_row(spark, tmp_path):
    from store import MessageStore
    dst = tmp_path / "d"
    with MessageStore(dst) as s:
        s.create_topic("T", 2)
    df = spark.range(10).select(F.col("id").cast("string").alias("body"),
                                F.when(F.col("id") == 7, 5).otherwise(F.col("id") % 2).cast("int").alias("queue_id"))
    with pytest.raises(Exception) as err:
        _write(df.coalesce(1), str(dst), topic="T")
    assert "row 7: queue_id 5 is outside topic 'T''s write queues 0..1" in str(err.value)
    assert stored(dst, "T").num_rows == 0
    # nothing of the failed job is left behind in the sink's directory
    leftovers = [os.path.join(d, f) for d, _, fs in os.walk(dst / "sink") for f in fs] if (dst / "sink").exists() \
        else []
    assert leftovers == []


def test_a_batch_write_removes_the_staging_of_writes_abandoned_by_dead_jobs(spark, tmp_path):
    import time
    dst = tmp_path / "d"
    old, live = dst / "sink" / "write-dead" / "staging" / "0", dst / "sink" / "write-live" / "staging" / "0"
    for d in (old, live):
        d.mkdir(parents=True)
        (d / "0-1-abc.arrow").write_bytes(b"x")
    long_ago = time.time() - 2 * 24 * 3600
    for p in [old / "0-1-abc.arrow", old, old.parent, old.parent.parent]:
        os.utime(p, (long_ago, long_ago))
    _write(spark.range(3).select(F.col("id").cast("string").alias("body")), str(dst), topic="T")
    assert not (dst / "sink" / "write-dead").exists()
    assert (live / "0-1-abc.arrow").exists()  # another job's, still being written
    assert stored(dst, "T").num_rows == 3
