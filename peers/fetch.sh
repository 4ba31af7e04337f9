#!/bin/sh
# Fetch the stock Apache RocketMQ jars the tests run as peers (name server, broker, Java client, admin tools, ACL)
# with Maven into .peers/rocketmq-<version>/lib, one folder per version listed in peers/versions.
# Idempotent: a version whose lib/.complete names the same artifacts is left alone (no Maven run).
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEST=${RMQ_PEERS_DIR:-$ROOT/.peers}
MVN=${MVN:-mvn}
# The plugin's version must be named: the bare `dependency:...` prefix does not resolve on these machines.
PLUGIN=org.apache.maven.plugins:maven-dependency-plugin:3.6.1

for version in $(grep -v '^#' "$ROOT/peers/versions"); do
    case $version in
        # 5.x publishes no rocketmq-acl: its ACL (2.0) is rocketmq-auth.
        4.*) artifacts="rocketmq-namesrv rocketmq-broker rocketmq-client rocketmq-tools rocketmq-acl" ;;
        *) artifacts="rocketmq-namesrv rocketmq-broker rocketmq-client rocketmq-tools rocketmq-auth" ;;
    esac
    home=$DEST/rocketmq-$version
    marker="$version: $artifacts"
    if [ -f "$home/lib/.complete" ] && [ "$(cat "$home/lib/.complete")" = "$marker" ]; then
        continue
    fi
    echo "peers: fetching Apache RocketMQ $version ($artifacts) with Maven into $home/lib" >&2
    rm -rf "$home/lib" "$home/lib.partial"
    mkdir -p "$home"
    deps=""
    for a in $artifacts; do
        deps="$deps<dependency><groupId>org.apache.rocketmq</groupId><artifactId>$a</artifactId><version>$version</version></dependency>"
    done
    cat > "$home/pom.xml" <<POM
<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>rmq-spark.peers</groupId><artifactId>rocketmq-$version</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>$deps</dependencies>
</project>
POM
    "$MVN" -q -B -Dstyle.color=never -f "$home/pom.xml" "$PLUGIN:copy-dependencies" -DincludeScope=runtime \
        -DoutputDirectory="$home/lib.partial"
    mv "$home/lib.partial" "$home/lib"
    echo "$marker" > "$home/lib/.complete"
    echo "peers: Apache RocketMQ $version: $(ls "$home/lib" | wc -l) jars, $(du -sh "$home/lib" | cut -f1)" >&2
done
