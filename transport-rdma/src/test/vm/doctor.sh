#!/usr/bin/env bash
# The doctor (org.nettyrdma.tools.doctor.Doctor) on a real kernel, in the qemu guest of vm/run: with everything in place
# it must find rxe0 and siw0, their ports, GIDs and netdevs, and report no problem; then with one fault at a time, as
# operators meet them in pods, it must exit 1 and name the problem: a memlock limit too low, CAP_IPC_LOCK dropped (with
# a limit that only the capability lifted), /dev/infiniband hidden, a link down, an IP address that no RDMA device
# has, and the devices removed. Each case is a fresh JVM with no flags but C1 only.
#
# usage (on the host, after mvn -pl transport-rdma -am test-compile): transport-rdma/src/test/vm/doctor.sh
# JAVA_HOME picks the JDK (the guest sees the host's). Prints each case and the doctor's findings; exit code 0 when
# every case ends as it should, 1 otherwise, or vm/run's (124 timeout, 125 no VM).
set -euo pipefail
. "$(dirname "$0")/common.sh"
self=$module/src/test/vm/doctor.sh

if [ -z "${NETTY_RDMA_VM:-}" ]; then
  vm_prepare_host org/nettyrdma/tools/doctor/DoctorTest
  vm_snapshot_classes
  exec "$root/vm/run" --timeout "${DOCTOR_VM_TIMEOUT:-600}" -- "$self" "$@"
fi

# guest: root, with rxe0 and siw0 set up by vm/run
vm_guest_setup
ulimit -l unlimited
passed=0 failed=0
out=$(mktemp)

# check NAME RC PHRASES COMMAND...: runs the command (which ends in the doctor), expects exit code RC and every phrase
# of PHRASES (separated by '|') in its output
check() {
  local name=$1 want=$2 phrases=$3 rc=0 missing=""
  shift 3
  local start=$SECONDS
  "$@" > "$out" 2>&1 || rc=$?
  IFS='|' read -ra list <<< "$phrases"
  for p in "${list[@]}"; do
    grep -qF -- "$p" "$out" || missing+=" '$p'"
  done
  if [ "$rc" = "$want" ] && [ -z "$missing" ]; then
    echo "PASS $name (exit $rc, $((SECONDS - start)) s):"
    if [ -n "${show_all:-}" ]; then
      sed 's/^/    /' "$out"
    else
      # the problems and warnings with their fixes
      awk '/^  (PROBLEM|WARNING) / { shown = 1; print "    " $0; next }
           shown && /^ +fix: / { print "    " $0; next }
           { shown = 0 }' "$out"
    fi
    passed=$((passed + 1))
  else
    echo "FAIL $name: expected exit $want, got $rc; missing:${missing:- nothing}; the doctor printed:"
    cat "$out"
    failed=$((failed + 1))
  fi
}
doctor=("$vm_java" -XX:TieredStopAtLevel=1 -cp "$vm_classpath" org.nettyrdma.tools.Main doctor)

healthy="rxe0  RoCE|gid 1  0000:0000:0000:0000:0000:ffff:0a4d:0001  RoCE v2  $RXE_IP|netdev $RXE_NETDEV"
healthy+="|siw0  iWARP, Software iWARP stack|netdev $SIW_NETDEV $SIW_IP|OK      address: $RXE_IP is on rxe0"
healthy+="|OK: nothing to fix"
show_all=1 check "everything in place" 0 "$healthy" "${doctor[@]}" --quick --address "$RXE_IP"
memlock="PROBLEM memlock: memlock limit 64 KiB (hard 64 KiB) is below the transport's minimum"
check "memlock limit of 64 KiB" 1 "$memlock|ulimit -l unlimited|MEMLOCK_TOO_LOW" \
  bash -c 'ulimit -l 64 && exec "$@"' - "${doctor[@]}" --quick --address "$RXE_IP"
# 128 MiB: above the transport's minimum, below what 200 connections register; CAP_IPC_LOCK lifts it on rxe
check "128 MiB limit, 200 connections, CAP_IPC_LOCK" 0 "but CAP_IPC_LOCK lifts it" \
  bash -c 'ulimit -l 131072 && exec "$@"' - "${doctor[@]}" --connections 200 --address "$RXE_IP"
check "the same with CAP_IPC_LOCK dropped" 1 \
  "WARNING capability: no CAP_IPC_LOCK|PROBLEM memlock: memlock limit 128 MiB|200 connections|no CAP_IPC_LOCK" \
  bash -c 'ulimit -l 131072 && exec setpriv --inh-caps=-ipc_lock --bounding-set=-ipc_lock "$@"' - "${doctor[@]}" \
  --connections 200 --address "$RXE_IP"
# a new mount namespace with a /dev of the basic nodes only, as in a pod without the device plugin's devices
check "no /dev/infiniband" 1 "PROBLEM device nodes: /dev/infiniband is missing|DEV_INFINIBAND_MISSING" \
  unshare -m bash -c 'mount -t tmpfs none /dev && mknod -m 666 /dev/null c 1 3 && mknod -m 666 /dev/zero c 1 5 &&
  mknod -m 666 /dev/random c 1 8 && mknod -m 666 /dev/urandom c 1 9 && exec "$@"' - "${doctor[@]}" --quick
ip link set "$RXE_NETDEV" down
check "link of rxe0 down" 1 \
  "PROBLEM ports: rxe0 port 1 is DOWN (Disabled, netdev $RXE_NETDEV)|ip link set $RXE_NETDEV up" \
  "${doctor[@]}" --quick --address "$RXE_IP"
ip link set "$RXE_NETDEV" up
# as JSON, which must parse (the exit code is the doctor's)
json="\"ok\": false|\"check\": \"address\"|127.0.0.1 is on lo, which no RDMA device uses|rxe0: $RXE_IP"
json+="|\"roceVersion\": \"v2\"|\"netdev\": \"$SIW_NETDEV\""
check "an IP with no RDMA device, JSON" 1 "$json" \
  bash -c '"$@" > /tmp/doctor.json; rc=$?; cat /tmp/doctor.json
  python3 -m json.tool /tmp/doctor.json > /dev/null || exit 3
  exit $rc' - "${doctor[@]}" --json --quick --address 127.0.0.1
rdma link delete rxe0 && rdma link delete siw0
check "devices removed" 1 "PROBLEM devices: no RDMA device|NO_DEVICE" "${doctor[@]}" --quick

echo "doctor.sh: $passed passed, $failed failed"
exit $((failed > 0))
