"""Run by test_wire_sink_faults.py as a Spark driver of its own (so that it can be SIGKILLed): streams topic In of
a store directory into a topic through brokers with the wire sink, availableNow, 500 messages a microbatch."""
from __future__ import annotations

import json
import os
import sys


def main(src: str, namesrv: str, topic: str, checkpoint: str) -> None:
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("rmq-wire-sink-faults")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.extraJavaOptions", os.environ.get("RMQ_TEST_SPARK_JAVA_OPTIONS", ""))  # conftest
             .getOrCreate())
    try:
        q = (spark.readStream.format("rmq").option("path", src).option("topic", "In")
             .option("startingOffsets", "earliest").option("maxMessagesPerTrigger", 500).load()
             .select("body", "tags", "properties")
             .writeStream.format("rmq").option("namesrvAddr", namesrv).option("topic", topic)
             .option("checkpointLocation", checkpoint).option("brokerTimeoutMs", 30000)
             .trigger(availableNow=True).start())
        q.awaitTermination(300)
        print(json.dumps({"batches": q.lastProgress["batchId"] if q.lastProgress else None}), flush=True)
    finally:
        spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:5])
