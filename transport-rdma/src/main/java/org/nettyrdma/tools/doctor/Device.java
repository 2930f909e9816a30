package org.nettyrdma.tools.doctor;

import java.util.List;

/**
 * One RDMA device of /sys/class/infiniband: its name, transport ("InfiniBand", "RoCE", "iWARP"), node description,
 * its user-space verbs node in /dev/infiniband (null if ib_uverbs has none for it) and its ports.
 */
record Device(String name, String transport, String description, String uverbsNode, List<Port> ports) {

    boolean isSoftIwarp() {
        return "Software iWARP stack".equals(description);
    }

    boolean hasActivePort() {
        return ports.stream().anyMatch(Port::isActive);
    }
}
