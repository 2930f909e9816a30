#!/usr/bin/env bash
# Runs org.nettyrdma.shuffle.ShuffleBenchmark (docs/shuffle.md) from the build: the shuffle module's classes, the
# transport's (transport-rdma/target/classes, with its native library) and their dependencies from Maven.
#   mvn -B -q -DskipTests package -pl shuffle -am && shuffle/bench.sh [ShuffleBenchmark's options] [address]
set -euo pipefail
module=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$module/.." && pwd)
cpfile=$module/target/bench-classpath.txt
if [ ! -s "$cpfile" ] || [ "$module/pom.xml" -nt "$cpfile" ]; then
  # in the reactor (-am): the transport resolves to its build here, not to whatever ~/.m2 holds (or lacks)
  (cd "$root" && mvn -B -q -pl shuffle -am test-compile dependency:build-classpath -Dmdep.outputFile="$cpfile")
fi
# the transport as built here, not a jar installed earlier
deps=$(tr ':' '\n' < "$cpfile" | grep -Ev '/netty-rdma-transport-[^/]*\.jar$' | paste -sd: -)
exec "${JAVA_HOME:+$JAVA_HOME/bin/}java" -cp "$module/target/classes:$root/transport-rdma/target/classes:$deps" \
  org.nettyrdma.shuffle.ShuffleBenchmark "$@"
