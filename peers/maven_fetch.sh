# Sourced by peers/fetch.sh and benchmarks/kafka/fetch.sh: maven_fetch copies Maven artifacts with their runtime
# dependencies into <dir>/lib. Idempotent: a lib/.complete naming the same artifacts is kept (no Maven run).
MVN=${MVN:-mvn}
# The plugin's version must be named: the bare `dependency:...` prefix does not resolve on these machines.
PLUGIN=org.apache.maven.plugins:maven-dependency-plugin:3.6.1

maven_fetch() {  # maven_fetch <label for messages> <dir> <groupId:artifactId:version>...
    label=$1
    home=$2
    shift 2
    marker="$*"
    if [ -f "$home/lib/.complete" ] && [ "$(cat "$home/lib/.complete")" = "$marker" ]; then
        return
    fi
    echo "$label: fetching $marker with Maven into $home/lib" >&2
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
  <groupId>rmq-spark.fetch</groupId><artifactId>$(basename "$home")</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>$deps</dependencies>
</project>
POM
    "$MVN" -q -B -Dstyle.color=never -f "$home/pom.xml" "$PLUGIN:copy-dependencies" -DincludeScope=runtime \
        -DoutputDirectory="$home/lib.partial"
    mv "$home/lib.partial" "$home/lib"
    echo "$marker" > "$home/lib/.complete"
    echo "$label: $(basename "$home"): $(ls "$home/lib" | wc -l) jars, $(du -sh "$home/lib" | cut -f1)" >&2
}
