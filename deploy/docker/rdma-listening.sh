#!/bin/sh
# rdma-listening.sh PORT: exit code 0 when an RDMA CM id of this container listens on PORT (rdma resource show cm_id,
# iproute2, lists those of the processes the caller can see). The readiness and liveness probe of the servers: an RDMA
# listen is not a TCP socket, so a tcpSocket probe cannot see it.
set -eu
port=${1:?usage: rdma-listening.sh PORT}
rdma resource show cm_id | grep -Eq "state LISTEN .*src-addr [^ ]*:$port( |\$)"
