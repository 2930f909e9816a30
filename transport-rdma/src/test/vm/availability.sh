#!/usr/bin/env bash
# What Rdma.unavailabilityCause() says on a real kernel, in the qemu guest of vm/run: the JNI provider's verdict
# (org.nettyrdma.verbs.jni.NativeLoadCheck, a fresh JVM with no flags each time) with everything in place, and then with
# one thing missing at a time, as users meet it: a memlock limit too low (siw enforces it even for root), no
# /dev/infiniband (a container without the device plugin's devices), a device node it may not open (a container user
# without access), and no RDMA device at all. The host's own case (a kernel without RDMA) is NativeLibraryTest's.
#
# usage (on the host, after mvn -pl transport-rdma -am test-compile): transport-rdma/src/test/vm/availability.sh
# JAVA_HOME picks the JDK (the guest sees the host's). Prints each case and its verdict; exit code 0 when every
# verdict names what it should, 1 otherwise, or vm/run's (124 timeout, 125 no VM).
set -euo pipefail
. "$(dirname "$0")/common.sh"
self=$module/src/test/vm/availability.sh

if [ -z "${NETTY_RDMA_VM:-}" ]; then
  vm_prepare_host org/nettyrdma/verbs/jni/NativeLoadCheck
  exec "$root/vm/run" -- "$self" "$@"
fi

# guest: root, with rxe0 and siw0 set up by vm/run
vm_guest_setup
ulimit -l unlimited
passed=0 failed=0

# check NAME EXPECTED COMMAND...: runs the command (which ends in the JVM), and expects EXPECTED in its "cause:" line
check() {
  local name=$1 expected=$2 out verdict
  shift 2
  out=$("$@" 2>&1) || true
  verdict=$(grep -E '^(available|cause):' <<< "$out" | paste -sd ' ')
  if grep -qF -- "$expected" <<< "$verdict"; then
    echo "PASS $name: $verdict"
    passed=$((passed + 1))
  else
    echo "FAIL $name: expected '$expected'; the check printed:"; echo "$out"
    failed=$((failed + 1))
  fi
}
jvm=("$vm_java" -XX:TieredStopAtLevel=1 -cp "$vm_classpath" org.nettyrdma.verbs.jni.NativeLoadCheck)

check "everything in place" "available: true" "${jvm[@]}"
check "memlock limit of 64 KiB" "memlock limit too low" bash -c 'ulimit -l 64 && exec "$@"' - "${jvm[@]}"
# a new mount namespace with a /dev of the basic nodes only
check "no /dev/infiniband" "/dev/infiniband is missing" unshare -m bash -c 'mount -t tmpfs none /dev &&
  mknod -m 666 /dev/null c 1 3 && mknod -m 666 /dev/zero c 1 5 && mknod -m 666 /dev/random c 1 8 &&
  mknod -m 666 /dev/urandom c 1 9 && exec "$@"' - "${jvm[@]}"
# root may open anything (CAP_DAC_OVERRIDE): the JVM runs without that capability, the node with mode 000
mode=$(stat -c %a /dev/infiniband/uverbs0)
chmod 000 /dev/infiniband/uverbs0
check "a device node it may not open" "/dev/infiniband/uverbs0 is not accessible" \
  setpriv --bounding-set=-dac_override,-dac_read_search "${jvm[@]}"
chmod "$mode" /dev/infiniband/uverbs0
rdma link delete rxe0 && rdma link delete siw0
check "no RDMA device" "no RDMA device" "${jvm[@]}"

echo "availability.sh: $passed passed, $failed failed"
exit $((failed > 0))
