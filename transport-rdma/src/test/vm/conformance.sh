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
. "$(dirname "$0")/common.sh"
self=$module/src/test/vm/conformance.sh

if [ -z "${NETTY_RDMA_VM:-}" ]; then
  # host: check the build, save the test classpath (from Maven, once), boot the VM with this script
  vm_prepare_host org/nettyrdma/verbs/jni/VmConformanceMain
  [ "${1:-}" = --prepare ] && exit 0
  exec "$root/vm/run" -- "$self" "$@"
fi

# guest: root, RXE_IP and SIW_IP set by vm/run
vm_guest_setup
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
echo "conformance.sh: $("$vm_java" -version 2>&1 | head -1), devices ${devices[*]}"
exec "$vm_java" -Xcheck:jni -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -cp "$vm_classpath" \
  org.nettyrdma.verbs.jni.VmConformanceMain "${only[@]}" "${devices[@]}"
