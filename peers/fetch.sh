#!/bin/sh
# Fetch the stock Apache RocketMQ jars the tests run as peers (name server, broker, Java client, admin tools, ACL)
# with Maven into .peers/rocketmq-<version>/lib, one folder per version listed in peers/versions.
# Idempotent: a version whose lib/.complete names the same artifacts is left alone (no Maven run).
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEST=${RMQ_PEERS_DIR:-$ROOT/.peers}
. "$ROOT/peers/maven_fetch.sh"

for version in $(grep -v '^#' "$ROOT/peers/versions"); do
    case $version in
        # 5.x publishes no rocketmq-acl: its ACL (2.0) is rocketmq-auth.
        4.*) artifacts="rocketmq-namesrv rocketmq-broker rocketmq-client rocketmq-tools rocketmq-acl" ;;
        *) artifacts="rocketmq-namesrv rocketmq-broker rocketmq-client rocketmq-tools rocketmq-auth" ;;
    esac
    gavs=""
    for a in $artifacts; do
        gavs="$gavs org.apache.rocketmq:$a:$version"
    done
    # shellcheck disable=SC2086  # one argument per artifact
    maven_fetch peers "$DEST/rocketmq-$version" $gavs
done
