#!/bin/sh
# rdma-listening.sh PORT: exit code 0 when an RDMA CM id of this network namespace listens on PORT (rdma resource show
# cm_id, iproute2). The readiness and liveness probe of the servers: RDMA listens are not TCP sockets, so a tcpSocket
# probe cannot see them.
set -eu
port=${1:?usage: rdma-listening.sh PORT}
rdma resource show cm_id | grep 'state LISTEN' | grep -q "src-addr [^ ]*:$port "
