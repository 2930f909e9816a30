package org.nettyrdma.tools.doctor;

import org.nettyrdma.verbs.jni.HostRoot;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Reads the RDMA devices, their ports and GID tables from sysfs under a {@link HostRoot}: {@code
 * /sys/class/infiniband/<dev>/ports/<n>/{state,phys_state,link_layer,gids/*,gid_attrs/types/*,gid_attrs/ndevs/*}},
 * the uverbs node of each device from {@code /sys/class/infiniband_verbs/uverbs<n>/ibdev}. The netdev of a port is
 * its GIDs' ({@code gid_attrs/ndevs}, RoCE) or, where the kernel names none (iWARP), the netdev whose MAC address
 * ({@code /sys/class/net/<netdev>/address}) the first GID holds.
 */
final class DeviceReader {
    private final HostRoot root;

    DeviceReader(HostRoot root) {
        this.root = root;
    }

    List<Device> devices() {
        Map<String, String> uverbs = uverbsNodes();
        Map<String, String> netdevsByMac = netdevsByMac();
        List<Device> devices = new ArrayList<>();
        for (String name : SysfsFiles.list(root.sysInfiniband())) {
            Path dir = root.sysInfiniband().resolve(name);
            List<Port> ports = new ArrayList<>();
            for (String p : SysfsFiles.list(dir.resolve("ports"))) {
                ports.add(port(dir.resolve("ports").resolve(p), p, netdevsByMac));
            }
            String nodeType = SysfsFiles.read(dir.resolve("node_type"));
            devices.add(new Device(name, transport(nodeType, ports), SysfsFiles.read(dir.resolve("node_desc")),
                    uverbs.get(name), ports));
        }
        return devices;
    }

    private static Port port(Path dir, String number, Map<String, String> netdevsByMac) {
        List<Gid> gids = new ArrayList<>();
        String netdev = null;
        for (String index : SysfsFiles.list(dir.resolve("gids"))) {
            String gid = SysfsFiles.read(dir.resolve("gids").resolve(index));
            if (Gid.isEmpty(gid)) {
                continue;
            }
            String ndev = SysfsFiles.read(dir.resolve("gid_attrs/ndevs").resolve(index));
            gids.add(Gid.of(Integer.parseInt(index), gid, SysfsFiles.read(dir.resolve("gid_attrs/types")
                    .resolve(index)), ndev));
            if (netdev == null) {
                netdev = ndev;
            }
        }
        String linkLayer = SysfsFiles.read(dir.resolve("link_layer"));
        if (netdev == null && !gids.isEmpty() && "Ethernet".equals(linkLayer)) {
            netdev = netdevsByMac.get(macOf(gids.get(0).gid()));
        }
        return new Port(Integer.parseInt(number), afterColon(SysfsFiles.read(dir.resolve("state"))),
                afterColon(SysfsFiles.read(dir.resolve("phys_state"))), linkLayer, netdev, gids);
    }

    /** "4: ACTIVE" → "ACTIVE". */
    private static String afterColon(String value) {
        if (value == null) {
            return null;
        }
        int colon = value.indexOf(':');
        return colon < 0 ? value : value.substring(colon + 1).strip();
    }

    private static String transport(String nodeType, List<Port> ports) {
        if (nodeType != null && nodeType.contains("RNIC")) {
            return "iWARP";
        }
        boolean ethernet = ports.stream().anyMatch(p -> "Ethernet".equals(p.linkLayer()));
        return ethernet ? "RoCE" : "InfiniBand";
    }

    private Map<String, String> uverbsNodes() {
        Map<String, String> nodes = new HashMap<>();
        for (String node : SysfsFiles.list(root.sysInfinibandVerbs())) {
            String ibdev = SysfsFiles.read(root.sysInfinibandVerbs().resolve(node).resolve("ibdev"));
            if (ibdev != null && node.startsWith("uverbs")) {
                nodes.put(ibdev, node);
            }
        }
        return nodes;
    }

    private Map<String, String> netdevsByMac() {
        Map<String, String> netdevs = new HashMap<>();
        for (String netdev : SysfsFiles.list(root.sysNet())) {
            String mac = SysfsFiles.read(root.sysNet().resolve(netdev).resolve("address"));
            if (mac != null) {
                netdevs.putIfAbsent(mac.toLowerCase(Locale.ROOT), netdev);
            }
        }
        return netdevs;
    }

    /** The MAC address in the first 6 bytes of a GID, as sysfs writes one ("62:49:b3:72:46:b3"). */
    private static String macOf(String gid) {
        byte[] raw = Gid.bytes(gid);
        if (raw == null) {
            return null;
        }
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < 6; i++) {
            b.append(i == 0 ? "" : ":").append(String.format("%02x", raw[i] & 0xff));
        }
        return b.toString();
    }
}
