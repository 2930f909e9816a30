package org.nettyrdma.tools.doctor;

import org.nettyrdma.verbs.jni.HostRoot;
import org.nettyrdma.verbs.jni.NativeFacts;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

/**
 * A made-up machine in a directory, as the VM's guest looks: rxe0 (SoftRoCE on rxe-a, 10.77.0.1 and fd77::1, RoCE v2
 * GIDs) and siw0 (soft-iWARP on siw-a, 10.78.0.1, a MAC-based GID), their uverbs nodes, rdma_cm, an unlimited memlock
 * limit and CAP_IPC_LOCK; each fault is a method that changes one thing. The native library's facts follow the files.
 */
final class FakeHost {
    static final String RXE_MAC = "56:a9:92:90:77:87";
    static final String SIW_MAC = "62:49:b3:72:46:b3";
    /** CapEff of root, with CAP_IPC_LOCK (bit 14), and without it. */
    static final String ALL_CAPS = "000001ffffffffff";
    static final String NO_IPC_LOCK = "000001ffffffbfff";

    final Path root;
    private final Map<String, List<String>> addresses = new LinkedHashMap<>();
    private long memlock = Long.MAX_VALUE;

    FakeHost(Path root) {
        this.root = root;
        write("sys/class/infiniband/rxe0/node_type", "1: CA");
        write("sys/class/infiniband/rxe0/node_desc", "rxe0");
        port("rxe0", "4: ACTIVE", "5: LinkUp");
        gid("rxe0", 0, "fe80:0000:0000:0000:54a9:92ff:fe90:7787", "RoCE v2", "rxe-a");
        gid("rxe0", 1, "0000:0000:0000:0000:0000:ffff:0a4d:0001", "RoCE v2", "rxe-a");
        gid("rxe0", 2, "fd77:0000:0000:0000:0000:0000:0000:0001", "RoCE v2", "rxe-a");
        write("sys/class/infiniband/rxe0/ports/1/gids/3", "0000:0000:0000:0000:0000:0000:0000:0000");
        write("sys/class/infiniband/siw0/node_type", "4: RNIC");
        write("sys/class/infiniband/siw0/node_desc", "Software iWARP stack");
        port("siw0", "4: ACTIVE", "5: LinkUp");
        write("sys/class/infiniband/siw0/ports/1/gids/0", "6249:b372:46b3:0000:0000:0000:0000:0000");
        write("sys/class/infiniband/siw0/ports/1/gid_attrs/types/0", "IB/RoCE v1");
        write("sys/class/infiniband_verbs/uverbs0/ibdev", "rxe0");
        write("sys/class/infiniband_verbs/uverbs1/ibdev", "siw0");
        write("sys/module/siw/refcnt", "1");
        write("sys/class/net/rxe-a/address", RXE_MAC);
        write("sys/class/net/siw-a/address", SIW_MAC);
        write("sys/class/net/eth0/address", "02:00:00:00:00:01");
        write("dev/infiniband/rdma_cm", "");
        write("dev/infiniband/uverbs0", "");
        write("dev/infiniband/uverbs1", "");
        capabilities(ALL_CAPS);
        memlock(Long.MAX_VALUE);
        addresses.put("rxe-a", List.of("10.77.0.1", "fd77::1"));
        addresses.put("siw-a", List.of("10.78.0.1", "fd78::1"));
        addresses.put("eth0", List.of("192.0.2.10"));
    }

    FakeHost memlock(long bytes) {
        memlock = bytes;
        String v = bytes == Long.MAX_VALUE ? "unlimited" : Long.toString(bytes);
        write("proc/self/limits", String.format("Limit                     Soft Limit           Hard Limit           "
                + "Units     %nMax open files            65536                65536                files     %n"
                + "Max locked memory         %-20s %-20s bytes     %n", v, v));
        return this;
    }

    FakeHost capabilities(String capEff) {
        write("proc/self/status", "Name:\tjava\nCapInh:\t0000000000000000\nCapPrm:\t" + capEff + "\nCapEff:\t" + capEff
                + "\nCapBnd:\t" + capEff + "\n");
        return this;
    }

    FakeHost linkDown(String device, String netdev) {
        write("sys/class/infiniband/" + device + "/ports/1/state", "1: DOWN");
        write("sys/class/infiniband/" + device + "/ports/1/phys_state", "3: Disabled");
        return this;
    }

    FakeHost removeDevices() {
        delete("sys/class/infiniband");
        Path dir = root.resolve("sys/class/infiniband");
        try {
            Files.createDirectories(dir);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        delete("sys/class/infiniband_verbs");
        return this;
    }

    FakeHost hideDevInfiniband() {
        delete("dev/infiniband");
        return this;
    }

    FakeHost removeNode(String node) {
        delete("dev/infiniband/" + node);
        return this;
    }

    HostRoot hostRoot() {
        return HostRoot.at(root);
    }

    Netdevs netdevs() {
        return Netdevs.of(addresses);
    }

    /** The native library loaded; it sees the devices that sysfs lists and the memlock limit of the files. */
    NativeFacts lib() {
        long count;
        try (Stream<Path> s = Files.list(root.resolve("sys/class/infiniband"))) {
            count = s.count();
        } catch (IOException e) {
            count = 0;
        }
        int devices = (int) count;
        long limit = memlock;
        return new NativeFacts() {
            @Override
            public Throwable loadFailure() {
                return null;
            }

            @Override
            public int deviceCount() {
                return devices;
            }

            @Override
            public long memlockLimit() {
                return limit == Long.MAX_VALUE ? -1 : limit;
            }
        };
    }

    private void port(String device, String state, String physState) {
        String p = "sys/class/infiniband/" + device + "/ports/1/";
        write(p + "state", state);
        write(p + "phys_state", physState);
        write(p + "link_layer", "Ethernet");
    }

    private void gid(String device, int index, String gid, String type, String ndev) {
        String p = "sys/class/infiniband/" + device + "/ports/1/";
        write(p + "gids/" + index, gid);
        write(p + "gid_attrs/types/" + index, type);
        write(p + "gid_attrs/ndevs/" + index, ndev);
    }

    void write(String path, String content) {
        Path file = root.resolve(path);
        try {
            Files.createDirectories(file.getParent());
            Files.writeString(file, content + (content.isEmpty() || content.endsWith("\n") ? "" : "\n"),
                    StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private void delete(String path) {
        Path dir = root.resolve(path);
        if (!Files.exists(dir)) {
            return;
        }
        try (Stream<Path> s = Files.walk(dir)) {
            for (Path p : s.sorted(Comparator.reverseOrder()).toList()) {
                Files.delete(p);
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
