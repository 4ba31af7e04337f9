#!/bin/sh
# Fetch what benchmarks/kafka_bench.py runs, with Maven, into the ignored .peers/kafka/ folder (as peers/fetch.sh
# does for stock RocketMQ): the Apache Kafka broker (KRaft) in broker-<version>/lib and Spark's Kafka source with
# its runtime dependencies (Spark itself comes from pyspark) in spark-sql-kafka-<version>/lib.
# Benchmark only: nothing here enters the package. Idempotent (a lib/.complete naming the same artifacts is kept).
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DEST=${RMQ_KAFKA_DIR:-$ROOT/.peers/kafka}
. "$ROOT/peers/maven_fetch.sh"
# spark-sql-kafka-0-10_2.13 4.3.0 (pyspark's version) is not served here; 4.2.0 is the newest that resolves.
KAFKA_VERSION=${KAFKA_VERSION:-4.1.1}
SPARK_KAFKA_VERSION=${SPARK_KAFKA_VERSION:-4.2.0}

# The broker's jars name no SLF4J binding (Kafka's distribution adds log4j2's): without one it logs nothing.
maven_fetch kafka_bench "$DEST/broker-$KAFKA_VERSION" "org.apache.kafka:kafka_2.13:$KAFKA_VERSION" \
    org.apache.logging.log4j:log4j-slf4j-impl:2.24.3
maven_fetch kafka_bench "$DEST/spark-sql-kafka-$SPARK_KAFKA_VERSION" \
    "org.apache.spark:spark-sql-kafka-0-10_2.13:$SPARK_KAFKA_VERSION"
