package org.nettyrdma.tools.doctor;

import java.util.List;

/**
 * One port of an RDMA device, from sysfs: its state ("ACTIVE", "DOWN", ...), physical state ("LinkUp", "Disabled",
 * ...), link layer ("Ethernet", "InfiniBand"), the netdev it runs on (null where sysfs does not tell) and its GIDs.
 */
record Port(int number, String state, String physState, String linkLayer, String netdev, List<Gid> gids) {

    boolean isActive() {
        return "ACTIVE".equals(state);
    }
}
