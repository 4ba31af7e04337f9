#!/bin/sh
# Fetch what benchmarks/kafka_bench.py runs, with Maven, into the ignored .peers/kafka/ folder (as peers/fetch.sh
# does for stock RocketMQ): the Apache Kafka broker (KRaft) in broker-<version>/lib and Spark's Kafka source with
# its runtime dependencies (Spark itself comes from pyspark) in spark-sql-kafka-<version>/lib.
# Benchmark only: nothing here enters the package. Idempotent (a lib/.complete naming the same artifacts is kept).
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DEST=${RMQ_KAFKA_DIR:-$ROOT/.peers/kafka}
MVN=${MVN:-mvn}
PLUGIN=org.apache.maven.plugins:maven-dependency-plugin:3.6.1
# spark-sql-kafka-0-10_2.13 4.3.0 (pyspark's version) is not served here; 4.2.0 is the newest that resolves.
KAFKA_VERSION=${KAFKA_VERSION:-4.1.1}
SPARK_KAFKA_VERSION=${SPARK_KAFKA_VERSION:-4.2.0}

fetch() {  # fetch <folder> <groupId:artifactId:version>...
    name=$1
    home=$DEST/$name
    shift
    marker="$*"
    if [ -f "$home/lib/.complete" ] && [ "$(cat "$home/lib/.complete")" = "$marker" ]; then
        return
    fi
    echo "kafka_bench: fetching $marker with Maven into $home/lib" >&2
    rm -rf "$home/lib" "$home/lib.partial"
    mkdir -p "$home"
    deps=""
    for gav in "$@"; do
        g=${gav%%:*}; rest=${gav#*:}; a=${rest%%:*}; v=${rest#*:}
        deps="$deps<dependency><groupId>$g</groupId><artifactId>$a</artifactId><version>$v</version></dependency>"
    done
    cat > "$home/pom.xml" <<POM
<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>rmq-spark.bench</groupId><artifactId>$name</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>$deps</dependencies>
</project>
POM
    "$MVN" -q -B -Dstyle.color=never -f "$home/pom.xml" "$PLUGIN:copy-dependencies" -DincludeScope=runtime \
        -DoutputDirectory="$home/lib.partial"
    mv "$home/lib.partial" "$home/lib"
    echo "$marker" > "$home/lib/.complete"
    echo "kafka_bench: $marker: $(ls "$home/lib" | wc -l) jars, $(du -sh "$home/lib" | cut -f1)" >&2
}

# The broker's jars name no SLF4J binding (Kafka's distribution adds log4j2's): without one it logs nothing.
fetch "broker-$KAFKA_VERSION" "org.apache.kafka:kafka_2.13:$KAFKA_VERSION" \
    org.apache.logging.log4j:log4j-slf4j-impl:2.24.3
fetch "spark-sql-kafka-$SPARK_KAFKA_VERSION" "org.apache.spark:spark-sql-kafka-0-10_2.13:$SPARK_KAFKA_VERSION"
