#!/usr/bin/env bash
# The transport's tests (org.nettyrdma.channel.RdmaTransport*Test: echo, byte-exact streams, back-pressure, half-close,
# peer loss, many connections, connection errors) on real kernel RDMA with the native (JNI) provider: rxe0 (SoftRoCE)
# and then siw0 (soft-iWARP) in the qemu guest of vm/run, run by org.nettyrdma.verbs.jni.VmTestLauncher (no Maven in
# the guest). The tests read the provider, the device's IP and a size scale from system properties (RdmaTestSupport).
#
# usage (on the host, after mvn -pl transport-rdma -am test-compile):
#   transport-rdma/src/test/vm/transport.sh [--only=Class[#method],...] [--scale=S] [rxe] [siw]   (default: both)
#   transport-rdma/src/test/vm/transport.sh --prepare     only write the test classpath, for a guest run
#     --only=RdmaTransportCloseTest,RdmaTransportConnectTest#addressesOfBothEndsMatch   some classes or methods
#     --scale=S   the size of the large tests, 0 < S <= 1 (default 0.0625, or $TRANSPORT_SCALE): 1 GiB and 64 MiB
#                 streams times S, 200 connections times sqrt(S) (Java runs 10-25x slower in the guest)
# On the host it writes the classpath, copies the classes aside (a build running meanwhile cannot change them under the
# tests) and boots the VM with itself; in a guest (NETTY_RDMA_VM=1, e.g. one step of a longer vm/run command) it runs
# the tests directly. JAVA_HOME picks the JDK (the guest sees the host's).
# Netty's leak detector runs at $TRANSPORT_LEAK_LEVEL (default paranoid, as on the host) and a leak fails the class.
# $TRANSPORT_JAVA_OPTS (words) go to the tests' JVM, e.g. TRANSPORT_JAVA_OPTS=-Dorg.nettyrdma.sharedReceiveQueue=true.
# Prints a line per test, then "N passed, N failed, N skipped" per device and for all; after a failure, the guest
# kernel's last RDMA messages (dmesg).
# Exit code: 0 if nothing failed, 1 failures (or nothing passed), 2 unusable; vm/run's 124 (timeout) or 125 (no VM).
set -euo pipefail
. "$(dirname "$0")/common.sh"
self=$module/src/test/vm/transport.sh

if [ -z "${NETTY_RDMA_VM:-}" ]; then
  # host: check the build, save the test classpath (from Maven, once), boot the VM with this script
  vm_prepare_host org/nettyrdma/verbs/jni/VmTestLauncher
  [ "${1:-}" = --prepare ] && exit 0
  vm_snapshot_classes
  rc=0
  "$root/vm/run" -- "$self" "$@" || rc=$?
  exit "$rc"
fi

# guest: root, RXE_IP, SIW_IP, RXE_NETDEV and SIW_NETDEV set by vm/run
vm_guest_setup
ulimit -l unlimited
only=() devices=() scale=${TRANSPORT_SCALE:-0.0625}
for arg in "$@"; do
  case $arg in
    --only=*) only=("$arg") ;;
    --scale=*) scale=${arg#--scale=} ;;
    rxe) devices+=("rxe0=$RXE_IP") ;;
    siw) devices+=("siw0=$SIW_IP") ;;
    *) echo "transport.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done
((${#devices[@]})) || devices=("rxe0=$RXE_IP" "siw0=$SIW_IP")

# For the connect time-out: on each device's subnet, an address that resolves (a permanent neighbour entry) to a MAC
# address nobody has. The veth peer drops what is sent there: the RoCE connection request or the iWARP (TCP) SYN gets
# no answer, ever.
blackholes=()
for dev in "${RXE_NETDEV:-rxe-a}=$RXE_IP" "${SIW_NETDEV:-siw-a}=$SIW_IP"; do
  addr=${dev#*=} && bh=${addr%.*}.254
  ip neigh replace "$bh" lladdr 02:00:00:00:00:fe dev "${dev%%=*}" nud permanent
  blackholes+=("$bh")
done
leak=${TRANSPORT_LEAK_LEVEL:-paranoid}
read -r -a java_opts <<< "${TRANSPORT_JAVA_OPTS:-}"

echo "transport.sh: $("$vm_java" -version 2>&1 | head -1), devices ${devices[*]}, scale $scale, leak detection $leak" \
  "${java_opts[*]:+, JVM options ${java_opts[*]}}"
rc=0
"$vm_java" -Xcheck:jni -XX:+UseSerialGC -XX:TieredStopAtLevel=1 "${java_opts[@]}" \
  -Dio.netty.leakDetection.level="$leak" \
  -Dio.netty.customResourceLeakDetector=org.nettyrdma.testing.FailingLeakDetector \
  -Dorg.nettyrdma.test.provider=native -Dorg.nettyrdma.test.scale="$scale" \
  -Dorg.nettyrdma.test.blackhole="$(IFS=,; echo "${blackholes[*]}")" \
  -cp "$vm_classpath" org.nettyrdma.verbs.jni.VmTestLauncher \
  --package=org.nettyrdma.channel --classes='RdmaTransport.*Test' --address-property=org.nettyrdma.test.address \
  --title='transport tests (RdmaTransport*Test) on the native provider' "${only[@]}" "${devices[@]}" || rc=$?
if ((rc == 1)); then
  # what the software devices logged (soft-iWARP names the TERMINATE it got: layer, type, code), for a failure that
  # the test's own message cannot explain; the hostile-peer tests cause some of these on purpose
  echo "transport.sh: a test failed; the guest kernel's last RDMA messages:"
  dmesg -T | grep -E 'siw|rxe|rdma' | tail -30 | sed 's/^/  kernel: /'
fi
exit "$rc"
