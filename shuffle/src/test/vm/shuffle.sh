#!/usr/bin/env bash
# Spark's shuffle protocol (spark-network-shuffle 4.0.1, unmodified) over the native (JNI) RDMA provider: the shuffle
# module's RDMA tests (ShuffleFetchTest, ShuffleServiceLossTest, ExpandingFileRegionTest, SaslEncryptedStreamTest; not
# the host-only ShuffleFetchOverTcpTest and ShuffleWriterTest) on rxe0 (SoftRoCE) and then siw0
# (soft-iWARP) in the qemu guest of vm/run, with the shuffle services in JVMs of their own (ServerProcess), run by
# transport-rdma's VmTestLauncher (no Maven in the guest); then, with --bench, the benchmark (ShuffleBenchmark) on each
# device beside epoll over the same interface.
#
# usage (on the host, after mvn -pl shuffle -am test-compile):
#   shuffle/src/test/vm/shuffle.sh [--only=Class[#method],...] [--scale=S] [--bench] [rxe] [siw]   (default: both)
#   shuffle/src/test/vm/shuffle.sh --prepare     only check the build and write the test class path (vm/two-host)
#     --only=...  default: every RDMA test but TLS and SASL without encryption (ShuffleFetchTest#tlsFetches...,
#                 #saslFetches...: ByteBuf and plain FileRegion paths the other cases take too; in the guest 160 s and
#                 55 s per device, against about 3 minutes for all the rest); --only=all runs those too
#     --scale=S   the generated shuffles' size, 0 < S <= 1 (default 0.05, or $SHUFFLE_SCALE): map outputs and the
#                 largest block times S (Java runs 15-27x slower in the guest)
#     --bench     also run ShuffleBenchmark on each device (a small shuffle: $SHUFFLE_BENCH_ARGS, default
#                 --maps=20 --reduces=20 --max-block=1048576 --runs=3)
# Exit code: 0 if nothing failed, 1 failures, 2 unusable; vm/run's 124 (timeout) or 125 (no VM).
set -euo pipefail
. "$(dirname "$0")/../../../../transport-rdma/src/test/vm/common.sh"
# common.sh names transport-rdma; this runner's module is shuffle
vm_script=shuffle.sh
module=$(cd "$(dirname "$0")/../../.." && pwd)
cpfile=$module/target/vm-test-classpath.txt
transport=$root/transport-rdma
self=$module/src/test/vm/shuffle.sh

if [ -z "${NETTY_RDMA_VM:-}" ]; then
  [ -f "$module/target/test-classes/org/nettyrdma/shuffle/ShuffleFetchTest.class" ] ||
    { echo "$vm_script: build first: mvn -pl shuffle -am test-compile" >&2; exit 2; }
  [ -f "$transport/target/test-classes/org/nettyrdma/verbs/jni/VmTestLauncher.class" ] ||
    { echo "$vm_script: build first: mvn -pl shuffle -am test-compile" >&2; exit 2; }
  ls "$transport"/target/classes/META-INF/native/libnetty_rdma_*.so > /dev/null 2>&1 ||
    { echo "$vm_script: no native library in transport-rdma/target/classes" >&2; exit 2; }
  if [ ! -s "$cpfile" ] || [ "$module/pom.xml" -nt "$cpfile" ]; then
    # in the reactor (-am), as grpc.sh does: the transport resolves to its target/classes, never to a copy a
    # 'mvn install' of one module left in ~/.m2 without its parent pom
    (cd "$root" && mvn -B -q -pl shuffle -am test-compile dependency:build-classpath -Dmdep.includeScope=test \
      -Dmdep.outputFile="$cpfile") || { echo "$vm_script: mvn dependency:build-classpath failed" >&2; exit 2; }
  fi
  [ "${1:-}" = --prepare ] && exit 0
  # the classes of both modules as they are now (a build running meanwhile cannot change them under the tests)
  vm_snapshot_classes
  mkdir -p "$vm_snapshot/transport"
  cp -a "$transport/target/classes" "$transport/target/test-classes" "$vm_snapshot/transport/"
  rc=0
  "$root/vm/run" -- "$self" "$@" || rc=$?
  exit "$rc"
fi

# guest
ulimit -l unlimited
only=() devices=() scale=${SHUFFLE_SCALE:-0.05} bench=0
for arg in "$@"; do
  case $arg in
    --only=*) only=("$arg") ;;
    --scale=*) scale=${arg#--scale=} ;;
    --bench) bench=1 ;;
    rxe) devices+=("rxe0=$RXE_IP") ;;
    siw) devices+=("siw0=$SIW_IP") ;;
    *) echo "$vm_script: unknown argument $arg" >&2; exit 2 ;;
  esac
done
((${#devices[@]})) || devices=("rxe0=$RXE_IP" "siw0=$SIW_IP")
if ((${#only[@]} == 0)); then
  only=("--only=ShuffleFetchTest#sparkDefaultsFetchEveryBlockIntact,ShuffleFetchTest#saslEncryptionFetchesEveryBlockIntact,\
ShuffleFetchTest#aesEncryptionFetchesEveryBlockIntact,ShuffleFetchTest#threeServicesServeEveryBlockIntact,\
ShuffleFetchTest#manyFetchesInFlightEveryBlockIntact,ShuffleServiceLossTest,\
ExpandingFileRegionTest#expandingRegionArrivesWholeOverRdma,SaslEncryptedStreamTest#encryptedMessagesArriveInOrderOverRdma")
elif [ "${only[0]}" = --only=all ]; then
  only=()
fi
[ -s "$cpfile" ] || { echo "$vm_script: no $cpfile" >&2; exit 2; }
snap=${VM_TEST_CLASSES:-}
[ -n "$snap" ] || { echo "$vm_script: VM_TEST_CLASSES is not set (run this script on the host)" >&2; exit 2; }
# the installed netty-rdma jars are left out: the snapshot's classes are the ones under test
deps=$(tr ':' '\n' < "$cpfile" | grep -Ev '/netty-rdma-transport-[^/]*\.jar$' | paste -sd: -)
classpath=$snap/classes:$snap/test-classes:$snap/transport/classes:$snap/transport/test-classes:$deps
java=${JAVA_HOME:+$JAVA_HOME/bin/}java

echo "$vm_script: $("$java" -version 2>&1 | head -1), devices ${devices[*]}, scale $scale"
rc=0
"$java" -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
  -Dio.netty.leakDetection.level=paranoid \
  -Dio.netty.customResourceLeakDetector=org.nettyrdma.testing.FailingLeakDetector \
  -Dorg.nettyrdma.test.provider=native -Dorg.nettyrdma.test.scale="$scale" \
  -cp "$classpath" org.nettyrdma.verbs.jni.VmTestLauncher \
  --package=org.nettyrdma.shuffle --classes='(ShuffleFetch|ShuffleServiceLoss|ExpandingFileRegion|SaslEncryptedStream)Test' \
  --address-property=org.nettyrdma.test.address \
  --title="Spark's shuffle protocol on the native provider" "${only[@]}" "${devices[@]}" || rc=$?

if ((bench)); then
  for dev in "${devices[@]}"; do
    echo "== ShuffleBenchmark on ${dev%%=*} (${dev#*=}), beside epoll over the same interface"
    # shellcheck disable=SC2086
    "$java" -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -cp "$classpath" org.nettyrdma.shuffle.ShuffleBenchmark \
      ${SHUFFLE_BENCH_ARGS:---maps=20 --reduces=20 --max-block=1048576 --runs=3} "${dev#*=}" || rc=1
  done
fi
exit "$rc"
