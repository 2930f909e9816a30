#!/usr/bin/env bash
# gRPC over RDMA on real kernel RDMA: the grpc module's tests (org.nettyrdma.grpc.Grpc*Test: unary, the three streaming
# kinds, 8 MiB messages, 64 calls at once, deadlines, cancellation, server shutdown with open streams, 50 channel
# re-creations) with the native (JNI) provider, on rxe0 (SoftRoCE) and then siw0 (soft-iWARP) in the qemu guest of
# vm/run, the Echo server in a JVM of its own (EchoServerProcess) and the client in the runner's. Run by the transport's
# lean JUnit runner, org.nettyrdma.verbs.jni.VmTestLauncher (no Maven in the guest).
#
# usage (on the host):
#   grpc/src/test/vm/grpc.sh [--only=Class[#method],...] [--scale=S] [rxe] [siw]   (default: both devices)
#   grpc/src/test/vm/grpc.sh --prepare     only build and write the test class path, for a guest run
#     --scale=S   message counts of the streaming tests times S, 0 < S <= 1 (default 0.05, or $GRPC_SCALE)
# On the host it compiles the module and what it depends on (mvn -pl grpc -am test-compile) and writes the test class
# path, with the transport's classes from its target/ directory; copies the module's classes aside and boots the VM
# with itself. Prints a line per test, then "N passed, N failed, N skipped" per device and for all.
# Exit code: 0 if nothing failed, 1 failures (or nothing passed), 2 unusable; vm/run's 124 (timeout) or 125 (no VM).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../../../../transport-rdma/src/test/vm/common.sh"
# common.sh's snapshot and guest set-up, for this module: its classes and its test class path
transport=$module
module=$(cd "$here/../../.." && pwd)
cpfile=$module/target/vm-test-classpath.txt
self=$module/src/test/vm/grpc.sh

if [ -z "${NETTY_RDMA_VM:-}" ]; then
  # host: build, and write the class path in the same Maven run, so that the reactor's modules are on it as their
  # target/ directories (not as jars of an earlier install)
  (cd "$root" && mvn -B -q -pl grpc -am test-compile dependency:build-classpath -Dmdep.includeScope=test \
    -Dmdep.outputFile="$cpfile") || { echo "$vm_script: the build or mvn dependency:build-classpath failed" >&2; exit 2; }
  ls "$transport"/target/classes/META-INF/native/libnetty_rdma_*.so > /dev/null 2>&1 ||
    { echo "$vm_script: no native library in transport-rdma/target/classes" \
        "(apt-get install gcc libibverbs-dev librdmacm-dev, then rebuild)" >&2; exit 2; }
  [ "${1:-}" = --prepare ] && exit 0
  vm_snapshot_classes
  rc=0
  "$root/vm/run" -- "$self" "$@" || rc=$?
  exit "$rc"
fi

# guest: root, RXE_IP and SIW_IP set by vm/run
vm_guest_setup
ulimit -l unlimited
only=() devices=() scale=${GRPC_SCALE:-0.05}
for arg in "$@"; do
  case $arg in
    --only=*) only=("$arg") ;;
    --scale=*) scale=${arg#--scale=} ;;
    rxe) devices+=("rxe0=$RXE_IP") ;;
    siw) devices+=("siw0=$SIW_IP") ;;
    *) echo "grpc.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done
((${#devices[@]})) || devices=("rxe0=$RXE_IP" "siw0=$SIW_IP")

echo "grpc.sh: $("$vm_java" -version 2>&1 | head -1), devices ${devices[*]}, scale $scale"
exec "$vm_java" -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
  -Dio.netty.leakDetection.level=paranoid \
  -Dio.netty.customResourceLeakDetector=org.nettyrdma.testing.FailingLeakDetector \
  -Dorg.nettyrdma.test.provider=native -Dorg.nettyrdma.test.scale="$scale" \
  -cp "$vm_classpath" org.nettyrdma.verbs.jni.VmTestLauncher \
  --package=org.nettyrdma.grpc --classes='Grpc.*Test' --address-property=org.nettyrdma.test.address \
  --title='gRPC tests (Grpc*Test) on the native provider, the server in a JVM of its own' "${only[@]}" "${devices[@]}"
