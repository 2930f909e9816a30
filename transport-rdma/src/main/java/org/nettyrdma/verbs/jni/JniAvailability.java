package org.nettyrdma.verbs.jni;

import io.netty.util.internal.SystemPropertyUtil;
import org.nettyrdma.verbs.Errno;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.List;

/**
 * Whether the JNI provider can work on this machine, and if not, exactly why: what {@link JniProvider#isAvailable()}
 * and {@link JniProvider#unavailabilityCause()} report. {@link #probe()} reads the facts (the library, sysfs,
 * {@code /dev/infiniband}, the device list, the memlock limit); {@link #classify(Probe)} turns them into a verdict, so
 * that each cause can be tested with made-up facts.
 */
final class JniAvailability {
    /** The memlock limit below which registered memory is considered impossible; a system property may change it. */
    static final long DEFAULT_MIN_MEMLOCK_BYTES = 64L << 20;
    static final String MIN_MEMLOCK_PROPERTY = "org.nettyrdma.jni.minMemlockBytes";
    private static final Path SYS_INFINIBAND = Paths.get("/sys/class/infiniband");
    private static final Path SYS_UVERBS = Paths.get("/sys/class/infiniband_verbs");
    private static final Path DEV_INFINIBAND = Paths.get("/dev/infiniband");

    private static final String CONTAINER_HINT = "in a container, the pod must request the RDMA device plugin's "
            + "resource (e.g. rdma/hca: 1 or rdma/rdma_shared_device_a: 1) so that /dev/infiniband is mounted in";
    private static final String MEMLOCK_HINT = "raise it: ulimit -l unlimited (systemd: LimitMEMLOCK=infinity); in a "
            + "container, grant the IPC_LOCK capability and a memlock limit of unlimited (docker run --cap-add "
            + "IPC_LOCK --ulimit memlock=-1:-1; Kubernetes: securityContext.capabilities.add: [\"IPC_LOCK\"] and a "
            + "container runtime whose memlock limit is unlimited)";

    enum Reason {
        LIBRARY_NOT_LOADABLE,
        LIBRARY_MISMATCH,
        KERNEL_WITHOUT_RDMA,
        NO_UVERBS,
        NO_DEVICE,
        DEV_INFINIBAND_MISSING,
        DEV_INFINIBAND_INACCESSIBLE,
        DEVICE_LIST_FAILED,
        MEMLOCK_TOO_LOW
    }

    /**
     * The facts a verdict rests on.
     *
     * @param libraryFailure   why the library did not load, or null
     * @param sysDevices       entries of /sys/class/infiniband, or -1 if it does not exist
     * @param uverbs           whether /sys/class/infiniband_verbs exists (ib_uverbs loaded)
     * @param devInfiniband    whether /dev/infiniband exists
     * @param devNodes         the files in /dev/infiniband
     * @param inaccessible     the first of them this process cannot read and write, or null
     * @param deviceCount      ibv_get_device_list's count, or -errno
     * @param memlockBytes     the soft RLIMIT_MEMLOCK ({@link Long#MAX_VALUE}: unlimited)
     * @param capIpcLock       whether the process has CAP_IPC_LOCK (which lifts the limit, except for siw)
     * @param siw              whether the soft-iWARP driver is loaded (it enforces the limit even with CAP_IPC_LOCK)
     * @param minMemlockBytes  the least limit that counts as enough
     */
    record Probe(Throwable libraryFailure, int sysDevices, boolean uverbs, boolean devInfiniband,
                 List<String> devNodes, String inaccessible, int deviceCount, long memlockBytes, boolean capIpcLock,
                 boolean siw, long minMemlockBytes) {
    }

    /** Why the provider cannot work. */
    record Verdict(Reason reason, String message, Throwable cause) {
        Throwable toThrowable() {
            if (reason == Reason.LIBRARY_NOT_LOADABLE || reason == Reason.LIBRARY_MISMATCH) {
                return new UnsatisfiedLinkError(message).initCause(cause);
            }
            return new UnsupportedOperationException(message, cause);
        }
    }

    private JniAvailability() {
    }

    /** The verdict for this machine, or null if RDMA through the JNI provider should work. */
    static Verdict check() {
        return classify(probe());
    }

    static Verdict classify(Probe p) {
        if (p.libraryFailure() instanceof JniLayout.Mismatch) {
            return new Verdict(Reason.LIBRARY_MISMATCH, p.libraryFailure().getMessage() + " (use the library in "
                    + "the same jar as the classes; a shaded jar must carry its own build's library)",
                    p.libraryFailure());
        }
        if (p.libraryFailure() != null) {
            return new Verdict(Reason.LIBRARY_NOT_LOADABLE, "the native library " + Native.LIBRARY_NAME
                    + " could not be loaded: " + rootMessage(p.libraryFailure()) + " (it is packed in the jar under "
                    + "META-INF/native/ and needs libibverbs.so.1 and librdmacm.so.1: on Debian and Ubuntu apt-get "
                    + "install libibverbs1 librdmacm1 ibverbs-providers)", p.libraryFailure());
        }
        if (p.deviceCount() == -Errno.ENOSYS || (p.sysDevices() < 0 && !p.uverbs())) {
            return new Verdict(Reason.KERNEL_WITHOUT_RDMA, "kernel without RDMA support: " + SYS_INFINIBAND
                    + " does not exist (ENOSYS): the kernel has no RDMA core or no RDMA driver is loaded (load the "
                    + "device's driver, e.g. mlx5_ib, or rdma_rxe / siw for software RDMA, and ib_uverbs and "
                    + "rdma_ucm)", null);
        }
        if (p.sysDevices() == 0) {
            return new Verdict(Reason.NO_DEVICE, "no RDMA device: " + SYS_INFINIBAND + " is empty (load the NIC's "
                    + "RDMA driver, or add a software device: rdma link add rxe0 type rxe netdev <interface>)", null);
        }
        if (!p.uverbs()) {
            return new Verdict(Reason.NO_UVERBS, "the kernel has RDMA devices but no userspace verbs: " + SYS_UVERBS
                    + " does not exist (modprobe ib_uverbs rdma_ucm)", null);
        }
        if (!p.devInfiniband()) {
            return new Verdict(Reason.DEV_INFINIBAND_MISSING, DEV_INFINIBAND + " is missing: " + CONTAINER_HINT
                    + "; on a host, load ib_uverbs and rdma_ucm", null);
        }
        if (!p.devNodes().contains("rdma_cm")) {
            return new Verdict(Reason.DEV_INFINIBAND_MISSING, DEV_INFINIBAND + "/rdma_cm is missing (RDMA CM): "
                    + CONTAINER_HINT + "; on a host, modprobe rdma_ucm", null);
        }
        if (p.devNodes().stream().noneMatch(n -> n.startsWith("uverbs"))) {
            return new Verdict(Reason.DEV_INFINIBAND_MISSING, DEV_INFINIBAND + " has no uverbs device: "
                    + CONTAINER_HINT + "; on a host, modprobe ib_uverbs", null);
        }
        if (p.inaccessible() != null) {
            return new Verdict(Reason.DEV_INFINIBAND_INACCESSIBLE, DEV_INFINIBAND + "/" + p.inaccessible()
                    + " is not accessible (read and write) to this process: give the user access (udev rules or the "
                    + "group that owns it); " + CONTAINER_HINT + " rather than mounting it by hand", null);
        }
        if (p.deviceCount() == 0) {
            return new Verdict(Reason.NO_DEVICE, "no RDMA device: ibv_get_device_list found none although "
                    + SYS_INFINIBAND + " lists " + p.sysDevices() + " (is the device's userspace provider installed? "
                    + "Debian and Ubuntu: apt-get install ibverbs-providers)", null);
        }
        if (p.deviceCount() < 0) {
            return new Verdict(Reason.DEVICE_LIST_FAILED, "ibv_get_device_list failed: "
                    + Errno.describe(p.deviceCount()), null);
        }
        boolean limited = p.memlockBytes() < p.minMemlockBytes();
        if (limited && (!p.capIpcLock() || p.siw())) {
            return new Verdict(Reason.MEMLOCK_TOO_LOW, "memlock limit too low: RLIMIT_MEMLOCK is " + p.memlockBytes()
                    + " bytes, less than the " + p.minMemlockBytes() + " bytes registered memory needs ("
                    + MIN_MEMLOCK_PROPERTY + ")" + (p.capIpcLock() ? ", and soft-iWARP (siw) enforces it even "
                    + "with CAP_IPC_LOCK" : "") + ": " + MEMLOCK_HINT, null);
        }
        return null;
    }

    /** The detail the memlock limit adds to a failed memory registration. */
    static String memlockHint(long length) {
        long limit = Native.memlockLimit();
        return "registering " + length + " bytes; RLIMIT_MEMLOCK is "
                + (limit == Long.MAX_VALUE ? "unlimited" : limit + " bytes") + ": if the memlock limit is the "
                + "cause, " + MEMLOCK_HINT;
    }

    static Probe probe() {
        return probe(HostRoot.system(), NativeFacts.system());
    }

    /** The facts under {@code root}; what only the library can tell from {@code lib}. */
    static Probe probe(HostRoot root, NativeFacts lib) {
        Throwable failure = lib.loadFailure();
        int sysDevices = countEntries(root.sysInfiniband());
        boolean uverbs = Files.isDirectory(root.sysInfinibandVerbs());
        Path dev = root.devInfiniband();
        boolean devDir = Files.isDirectory(dev);
        List<String> nodes = devDir ? entries(dev) : List.of();
        String inaccessible = null;
        for (String n : nodes) {
            Path p = dev.resolve(n);
            if ((n.equals("rdma_cm") || n.startsWith("uverbs")) && !(Files.isReadable(p) && Files.isWritable(p))) {
                inaccessible = n;
                break;
            }
        }
        boolean kernelReady = failure == null && sysDevices > 0 && uverbs && devDir && inaccessible == null;
        int deviceCount = kernelReady ? lib.deviceCount() : 0;
        long memlock = failure == null ? lib.memlockLimit() : Long.MAX_VALUE;
        long minMemlock = SystemPropertyUtil.getLong(MIN_MEMLOCK_PROPERTY, DEFAULT_MIN_MEMLOCK_BYTES);
        return new Probe(failure, sysDevices, uverbs, devDir, nodes, inaccessible, deviceCount,
                memlock < 0 ? Long.MAX_VALUE : memlock, ProcSelf.hasCapIpcLock(root.procSelfStatus()),
                Files.isDirectory(root.sysSiwModule()), minMemlock);
    }

    private static int countEntries(Path dir) {
        return Files.isDirectory(dir) ? entries(dir).size() : -1;
    }

    private static List<String> entries(Path dir) {
        try (DirectoryStream<Path> stream = Files.newDirectoryStream(dir)) {
            List<String> names = new java.util.ArrayList<>();
            for (Path p : stream) {
                names.add(p.getFileName().toString());
            }
            return names;
        } catch (IOException e) {
            return List.of();
        }
    }

    private static String rootMessage(Throwable t) {
        StringBuilder b = new StringBuilder(String.valueOf(t.getMessage()));
        for (Throwable s : t.getSuppressed()) {
            Throwable root = s;
            while (root.getCause() != null) {
                root = root.getCause();
            }
            String m = root.getMessage();
            if (m != null && b.indexOf(m) < 0) {
                b.append("; ").append(m);
            }
        }
        Throwable root = t.getCause();
        while (root != null && root.getCause() != null) {
            root = root.getCause();
        }
        if (root != null && root.getMessage() != null && b.indexOf(root.getMessage()) < 0) {
            b.append("; ").append(root.getMessage());
        }
        return b.toString();
    }
}
