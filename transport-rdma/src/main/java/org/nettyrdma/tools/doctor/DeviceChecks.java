package org.nettyrdma.tools.doctor;

import java.util.ArrayList;
import java.util.List;
import java.util.stream.Collectors;

/** The devices, their ports' state, their RoCE GIDs, and whether the application's address is on one of them. */
final class DeviceChecks {
    private DeviceChecks() {
    }

    static List<Finding> check(Facts f) {
        List<Finding> findings = new ArrayList<>();
        if (f.devices().isEmpty()) {
            findings.add(Finding.problem("devices", "no RDMA device: /sys/class/infiniband is empty or missing (a "
                    + "kernel without RDMA, no RDMA driver loaded, or a network namespace without the device)", "on "
                    + "the node: load the NIC's RDMA "
                    + "driver (mlx5_ib, irdma, bnxt_re, ...) and ib_uverbs, rdma_ucm, or add a software device (rdma "
                    + "link add rxe0 type rxe netdev <interface>); in a pod: request the device plugin's resource "
                    + "(rdma/rdma_shared_device_a: 1, or the SR-IOV resource) and run in the network namespace that "
                    + "has the RDMA interface"));
            return findings;
        }
        findings.add(Finding.ok("devices", f.devices().size() + " RDMA device(s): " + f.devices().stream()
                .map(d -> d.name() + " (" + d.transport() + ")").collect(Collectors.joining(", "))));
        Device target = f.address() == null ? null : f.deviceFor(f.address());
        boolean anyActive = f.devices().stream().anyMatch(Device::hasActivePort);
        for (Device d : f.devices()) {
            for (Port p : d.ports()) {
                if (!p.isActive()) {
                    boolean fatal = d == target || !anyActive;
                    String what = d.name() + " port " + p.number() + " is " + p.state() + " (" + p.physState()
                            + (p.netdev() != null ? ", netdev " + p.netdev() : "") + ")";
                    String fix = "INIT".equals(p.state()) && "InfiniBand".equals(p.linkLayer())
                            ? "the port waits for a subnet manager: start opensm on the fabric, or check the switch's"
                            : "bring the link up: ip link set " + (p.netdev() != null ? p.netdev() : "<netdev>")
                                    + " up; check the cable, the switch port and the NIC's firmware (ethtool "
                                    + (p.netdev() != null ? p.netdev() : "<netdev>") + ")";
                    findings.add(fatal ? Finding.problem("ports", what, fix)
                            : Finding.warning("ports", what + "; not the device the application uses", fix));
                }
            }
            if ("RoCE".equals(d.transport())) {
                findings.add(roce(d));
            }
        }
        if (findings.stream().noneMatch(x -> x.check().equals("ports"))) {
            findings.add(Finding.ok("ports", "every port ACTIVE"));
        }
        if (f.address() != null) {
            findings.add(address(f, target));
        }
        return findings;
    }

    private static Finding roce(Device d) {
        List<String> v2 = new ArrayList<>();
        for (Port p : d.ports()) {
            for (Gid g : p.gids()) {
                if (g.isRoceV2() && g.ip() != null) {
                    v2.add(g.ip());
                }
            }
        }
        if (v2.isEmpty()) {
            return Finding.warning("roce", d.name() + " has no RoCE v2 GID with an IP address: RDMA CM finds a RoCE "
                    + "device by the IP of its netdev", "give the netdev of " + d.name() + " an IP address (the pod's "
                    + "secondary network, or the host interface); RoCE v2 (UDP/IP, routable) is the default of "
                    + "rdma_cm, v1 only reaches the same L2 segment");
        }
        return Finding.ok("roce", d.name() + " RoCE v2 GIDs for " + String.join(", ", v2));
    }

    private static Finding address(Facts f, Device target) {
        String ip = Addresses.normalize(f.address());
        if (target != null) {
            return Finding.ok("address", ip + " is on " + target.name());
        }
        String netdev = f.netdevs().netdevOf(ip);
        String where = netdev == null ? "no interface of this host has " + ip : ip + " is on " + netdev
                + ", which no RDMA device uses";
        List<String> usable = new ArrayList<>();
        for (Device d : f.devices()) {
            for (Port p : d.ports()) {
                List<String> ips = p.gids().stream().filter(g -> g.ip() != null).map(Gid::ip)
                        .collect(Collectors.toCollection(ArrayList::new));
                if (ips.isEmpty() && p.netdev() != null) {
                    ips.addAll(f.netdevs().addresses(p.netdev()));
                }
                if (!ips.isEmpty()) {
                    usable.add(d.name() + ": " + String.join(", ", ips));
                }
            }
        }
        return Finding.problem("address", where + ": RDMA CM cannot bind or connect through it (the transport fails "
                + "with 'No such device' or an address error)", usable.isEmpty()
                ? "give an RDMA device's netdev an IP address, and bind and connect to that address"
                : "bind and connect to an address of an RDMA device: " + String.join("; ", usable));
    }
}
