package org.nettyrdma.verbs.jni;

import java.nio.file.Path;
import java.nio.file.Paths;

/**
 * Where the kernel's RDMA files are: sysfs ({@code /sys/class/infiniband}, {@code /sys/class/infiniband_verbs},
 * {@code /sys/module/siw}, {@code /sys/class/net}), the device nodes ({@code /dev/infiniband}) and this process's
 * {@code /proc/self/status} and {@code /proc/self/limits}, under a root directory: {@code /} on a machine, a directory
 * of made-up files in tests.
 */
public final class HostRoot {
    private static final HostRoot SYSTEM = new HostRoot(Paths.get("/"));

    private final Path root;

    private HostRoot(Path root) {
        this.root = root;
    }

    /** This machine's files. */
    public static HostRoot system() {
        return SYSTEM;
    }

    /** The files under {@code root} instead of {@code /}. */
    public static HostRoot at(Path root) {
        return new HostRoot(root);
    }

    public Path sysInfiniband() {
        return root.resolve("sys/class/infiniband");
    }

    public Path sysInfinibandVerbs() {
        return root.resolve("sys/class/infiniband_verbs");
    }

    public Path sysSiwModule() {
        return root.resolve("sys/module/siw");
    }

    public Path sysNet() {
        return root.resolve("sys/class/net");
    }

    public Path devInfiniband() {
        return root.resolve("dev/infiniband");
    }

    public Path procSelfStatus() {
        return root.resolve("proc/self/status");
    }

    public Path procSelfLimits() {
        return root.resolve("proc/self/limits");
    }

    @Override
    public String toString() {
        return root.toString();
    }
}
