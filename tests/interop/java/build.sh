#!/bin/sh
# Builds the java-dcp-client interop consumer into
# tests/interop/java/target/mockdcp-interop-java.jar.
# Uses the default ~/.m2 repository so CI can cache it; does nothing when the
# jar is newer than pom.xml, build.sh and everything under src/ (FORCE=1 rebuilds).
set -eu
cd "$(dirname "$0")"
JAR=target/mockdcp-interop-java.jar

if [ "${FORCE:-0}" != 1 ] && [ -f "$JAR" ] && \
   [ -z "$(find pom.xml build.sh src -newer "$JAR" -print | head -n 1)" ]; then
    echo "build.sh: $JAR is up to date"
    exit 0
fi

command -v mvn >/dev/null 2>&1 || { echo "build.sh: mvn not found in PATH" >&2; exit 1; }
command -v java >/dev/null 2>&1 || { echo "build.sh: java not found in PATH" >&2; exit 1; }
mkdir -p target
# Output is kept in target/build.log and shown only on failure (Maven 3.8 -q
# still prints ANSI resets).
if ! mvn -q -B -Dstyle.color=never package -DskipTests >target/build.log 2>&1; then
    cat target/build.log >&2
    echo "build.sh: mvn package failed" >&2
    exit 1
fi
[ -f "$JAR" ] || { echo "build.sh: $JAR was not produced" >&2; exit 1; }
echo "build.sh: built $(pwd)/$JAR"
