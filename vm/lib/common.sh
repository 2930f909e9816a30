# Shared by vm/setup, vm/run and vm/perftest (sourced, not run).

# Where the kernel, siw.ko and the initramfs are kept between runs (outside the checkout, so a fresh clone
# on the same machine reuses them). Override with NETTY_RDMA_VM_CACHE.
if [ -z "${NETTY_RDMA_VM_CACHE:-}" ]; then
  if [ "$(id -u)" = 0 ]; then NETTY_RDMA_VM_CACHE=/var/cache/netty-rdma-vm
  else NETTY_RDMA_VM_CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/netty-rdma-vm; fi
fi
VM_CACHE=$NETTY_RDMA_VM_CACHE

# Addresses given to the RDMA devices in the guest (each on its own veth pair).
VM_RXE_IP=10.77.0.1
VM_SIW_IP=10.78.0.1
VM_RXE_IP6=fd77::1
VM_SIW_IP6=fd78::1

# A pair of guests (vm/pair): host NODE (1, 2) has rxe0 on eth0 at 10.77.0.NODE and fd77::NODE, siw0 on eth1 at
# 10.78.0.NODE and fd78::NODE; the NICs' MAC addresses say which link they are on: 52:54:00:77:0LINK:0NODE.
vm_pair_mac() { printf '52:54:00:77:%02x:%02x' "$2" "$1"; } # NODE LINK

vm_log() { echo "${0##*/}: $*" >&2; }
vm_die() { echo "${0##*/}: ERROR: $*" >&2; exit "${VM_DIE_CODE:-1}"; }
