#!/bin/sh
# The examples image's entrypoint: entrypoint.sh MAIN_CLASS [ARGS...]
#
# - Raises the soft memlock limit to the hard one (to unlimited when the hard limit is; raising the hard limit itself
#   needs CAP_SYS_RESOURCE). Kubernetes has no field for rlimits: the container starts with the container runtime's.
# - Replaces every argument that is exactly @rdma-ip@ with the IPv4 address of $RDMA_INTERFACE (default: the
#   interface of the pod's default route), the address RDMA CM uses to pick the device.
# - Runs java -cp netty-rdma-examples.jar MAIN_CLASS ARGS, with $JAVA_OPTS.
set -eu
jar=/opt/netty-rdma/netty-rdma-examples.jar

ulimit -l unlimited 2>/dev/null || ulimit -l "$(ulimit -H -l)" 2>/dev/null || true

if [ $# -eq 0 ]; then
  echo "usage: entrypoint.sh MAIN_CLASS [ARGS...]" >&2
  exit 2
fi

rdma_ip() {
  dev=${RDMA_INTERFACE:-$(ip -4 route show default |
    awk '{for (i = 1; i < NF; i++) if ($i == "dev") print $(i + 1)}' | head -n 1)}
  ip -4 -o addr show dev "$dev" scope global | awk '{split($4, a, "/"); print a[1]; exit}'
}

main=$1
shift
for arg in "$@"; do
  shift
  if [ "$arg" = "@rdma-ip@" ]; then
    ip=$(rdma_ip)
    if [ -z "$ip" ]; then
      echo "entrypoint: no IPv4 address on ${RDMA_INTERFACE:-the default route's interface} for @rdma-ip@" >&2
      exit 2
    fi
    arg=$ip
  fi
  set -- "$@" "$arg"
done

# shellcheck disable=SC2086 # JAVA_OPTS holds several options
exec java ${JAVA_OPTS:-} -cp "$jar" "$main" "$@"
