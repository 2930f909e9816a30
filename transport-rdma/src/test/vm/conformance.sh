#!/usr/bin/env bash
# The verbs conformance suite and the JNI provider's device checks on real kernel RDMA: rxe0 (SoftRoCE) and siw0
# (soft-iWARP) in the qemu guest of vm/run, run by org.nettyrdma.verbs.jni.VmConformanceMain (no Maven in the guest).
#
# usage (on the host, after mvn -pl transport-rdma -am verify or test-compile):
#   transport-rdma/src/test/vm/conformance.sh [--only=method,...] [rxe] [siw]     (default: both devices)
#   transport-rdma/src/test/vm/conformance.sh --prepare     only write the test classpath, for a guest run
# On the host it writes the classpath and boots the VM with itself; in a guest (NETTY_RDMA_VM=1, e.g. one step of a
# longer vm/run command) it runs the tests directly. JAVA_HOME picks the JDK (the guest sees the host's).
# Exit code: VmConformanceMain's (0 all passed, 1 failures, 2 unusable), or vm/run's (124 timeout, 125 no VM).
set -euo pipefail
module=$(cd "$(dirname "$0")/../../.." && pwd)
root=$(cd "$module/.." && pwd)
self=$module/src/test/vm/conformance.sh
cpfile=$module/target/vm-test-classpath.txt

if [ -z "${NETTY_RDMA_VM:-}" ]; then
  # host: check the build, save the test classpath (from Maven, once), boot the VM with this script
  [ -f "$module/target/test-classes/org/nettyrdma/verbs/jni/VmConformanceMain.class" ] ||
    { echo "conformance.sh: build first: mvn -pl transport-rdma -am test-compile" >&2; exit 2; }
  ls "$module"/target/classes/META-INF/native/libnetty_rdma_*.so > /dev/null 2>&1 ||
    { echo "conformance.sh: no native library in target/classes" \
        "(apt-get install gcc libibverbs-dev librdmacm-dev, then rebuild)" >&2; exit 2; }
  if [ ! -s "$cpfile" ] || [ "$module/pom.xml" -nt "$cpfile" ]; then
    (cd "$root" && mvn -B -q -o -pl transport-rdma dependency:build-classpath -Dmdep.includeScope=test \
      -Dmdep.outputFile="$cpfile") || { echo "conformance.sh: mvn dependency:build-classpath failed" >&2; exit 2; }
  fi
  [ "${1:-}" = --prepare ] && exit 0
  exec "$root/vm/run" -- "$self" "$@"
fi
[ -s "$cpfile" ] || { echo "conformance.sh: no $cpfile: run conformance.sh --prepare on the host first" >&2; exit 2; }

# guest: root, RXE_IP and SIW_IP set by vm/run
ulimit -l unlimited
only=() devices=()
for arg in "$@"; do
  case $arg in
    --only=*) only=("$arg") ;;
    rxe) devices+=("rxe0=$RXE_IP") ;;
    siw) devices+=("siw0=$SIW_IP") ;;
    *) echo "conformance.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done
((${#devices[@]})) || devices=("rxe0=$RXE_IP" "siw0=$SIW_IP")
# logging jars of netty-testsuite are left out: the runner prints its own lines
deps=$(tr ':' '\n' < "$cpfile" | grep -Ev '/(logback-[a-z]+|slf4j-api)-[^/]*\.jar$' | paste -sd: -)
java=${JAVA_HOME:+$JAVA_HOME/bin/}java
echo "conformance.sh: $("$java" -version 2>&1 | head -1), devices ${devices[*]}"
exec "$java" -Xcheck:jni -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
  -cp "$module/target/classes:$module/target/test-classes:$deps" \
  org.nettyrdma.verbs.jni.VmConformanceMain "${only[@]}" "${devices[@]}"
