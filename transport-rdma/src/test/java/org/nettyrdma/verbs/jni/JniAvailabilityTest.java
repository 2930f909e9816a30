package org.nettyrdma.verbs.jni;

import org.junit.jupiter.api.Test;
import org.nettyrdma.verbs.Errno;
import org.nettyrdma.verbs.jni.JniAvailability.Probe;
import org.nettyrdma.verbs.jni.JniAvailability.Reason;
import org.nettyrdma.verbs.jni.JniAvailability.Verdict;

import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

/** Each unavailability cause, from made-up facts; and the verdict on this machine. */
class JniAvailabilityTest {
    private static final long MIB = 1L << 20;
    private static final List<String> NODES = List.of("rdma_cm", "uverbs0");

    /** A machine where everything works: one device, accessible, unlimited memlock. */
    private static Probe good() {
        return new Probe(null, 1, true, true, NODES, null, 1, Long.MAX_VALUE, false, false, 64 * MIB);
    }

    private static Verdict classify(Probe p) {
        return JniAvailability.classify(p);
    }

    private static void assertVerdict(Reason reason, Probe p, String... phrases) {
        Verdict v = classify(p);
        assertNotNull(v, "a verdict for " + p);
        assertEquals(reason, v.reason(), v.message());
        for (String phrase : phrases) {
            assertTrue(v.message().contains(phrase), "'" + phrase + "' in: " + v.message());
        }
    }

    @Test
    void everythingInPlaceIsAvailable() {
        assertNull(classify(good()));
    }

    @Test
    void libraryNotLoadableSaysWhy() {
        UnsatisfiedLinkError e = new UnsatisfiedLinkError("could not load a native library: netty_rdma_x86_64");
        e.addSuppressed(new UnsatisfiedLinkError("libibverbs.so.1: cannot open shared object file"));
        Probe p = new Probe(e, -1, false, false, List.of(), null, 0, Long.MAX_VALUE, false, false, 64 * MIB);
        assertVerdict(Reason.LIBRARY_NOT_LOADABLE, p, "could not be loaded", "libibverbs.so.1: cannot open");
        assertInstanceOf(UnsatisfiedLinkError.class, classify(p).toThrowable());
        assertTrue(classify(p).toThrowable().getCause() == e);
    }

    @Test
    void libraryOfAnotherLayoutSaysWhichField() {
        JniLayout.Mismatch e = new JniLayout.Mismatch("the native library netty_rdma_x86_64 does not match these "
                + "classes (a library of another build?): the descriptor layouts differ: "
                + "WorkRequestList.OFFSET_RKEY: 32 in Java, 36 in C");
        Probe p = new Probe(e, 1, true, true, NODES, null, 1, Long.MAX_VALUE, false, false, 64 * MIB);
        assertVerdict(Reason.LIBRARY_MISMATCH, p, "does not match these classes",
                "WorkRequestList.OFFSET_RKEY: 32 in Java, 36 in C", "the same jar");
        assertInstanceOf(UnsatisfiedLinkError.class, classify(p).toThrowable());
        assertTrue(classify(p).toThrowable().getCause() == e);
    }

    @Test
    void noSysfsIsKernelWithoutRdma() {
        Probe p = new Probe(null, -1, false, false, List.of(), null, 0, Long.MAX_VALUE, false, false, 64 * MIB);
        assertVerdict(Reason.KERNEL_WITHOUT_RDMA, p, "kernel without RDMA support", "ENOSYS");
    }

    @Test
    void enosysFromTheDeviceListIsKernelWithoutRdma() {
        Probe p = new Probe(null, 1, true, true, NODES, null, -Errno.ENOSYS, Long.MAX_VALUE, false, false, 64 * MIB);
        assertVerdict(Reason.KERNEL_WITHOUT_RDMA, p, "kernel without RDMA support");
    }

    @Test
    void emptySysfsIsNoDevice() {
        Probe p = new Probe(null, 0, true, false, List.of(), null, 0, Long.MAX_VALUE, false, false, 64 * MIB);
        assertVerdict(Reason.NO_DEVICE, p, "no RDMA device", "rdma link add");
    }

    @Test
    void emptyDeviceListIsNoDevice() {
        Probe p = new Probe(null, 2, true, true, NODES, null, 0, Long.MAX_VALUE, false, false, 64 * MIB);
        assertVerdict(Reason.NO_DEVICE, p, "no RDMA device", "ibverbs-providers");
    }

    @Test
    void devicesWithoutUverbs() {
        Probe p = new Probe(null, 1, false, false, List.of(), null, 0, Long.MAX_VALUE, false, false, 64 * MIB);
        assertVerdict(Reason.NO_UVERBS, p, "ib_uverbs");
    }

    @Test
    void missingDevInfinibandPointsToTheDevicePlugin() {
        Probe p = new Probe(null, 1, true, false, List.of(), null, 0, Long.MAX_VALUE, false, false, 64 * MIB);
        assertVerdict(Reason.DEV_INFINIBAND_MISSING, p, "/dev/infiniband is missing", "rdma/hca",
                "rdma/rdma_shared_device_a");
    }

    @Test
    void missingRdmaCmNode() {
        Probe p = new Probe(null, 1, true, true, List.of("uverbs0"), null, 1, Long.MAX_VALUE, false, false, 64 * MIB);
        assertVerdict(Reason.DEV_INFINIBAND_MISSING, p, "/dev/infiniband/rdma_cm is missing", "rdma_ucm");
    }

    @Test
    void missingUverbsNode() {
        Probe p = new Probe(null, 1, true, true, List.of("rdma_cm"), null, 1, Long.MAX_VALUE, false, false, 64 * MIB);
        assertVerdict(Reason.DEV_INFINIBAND_MISSING, p, "no uverbs device");
    }

    @Test
    void inaccessibleNode() {
        Probe p = new Probe(null, 1, true, true, NODES, "uverbs0", 0, Long.MAX_VALUE, false, false, 64 * MIB);
        assertVerdict(Reason.DEV_INFINIBAND_INACCESSIBLE, p, "/dev/infiniband/uverbs0 is not accessible", "rdma/hca");
    }

    @Test
    void deviceListFailure() {
        Probe p = new Probe(null, 1, true, true, NODES, null, -Errno.EACCES, Long.MAX_VALUE, false, false, 64 * MIB);
        assertVerdict(Reason.DEVICE_LIST_FAILED, p, "EACCES");
    }

    @Test
    void lowMemlockSaysHowToRaiseIt() {
        Probe p = new Probe(null, 1, true, true, NODES, null, 1, 8 * MIB, false, false, 64 * MIB);
        assertVerdict(Reason.MEMLOCK_TOO_LOW, p, "memlock limit too low", "8388608", "ulimit -l unlimited",
                "IPC_LOCK");
    }

    @Test
    void capIpcLockLiftsTheMemlockLimit() {
        assertNull(classify(new Probe(null, 1, true, true, NODES, null, 1, 8 * MIB, true, false, 64 * MIB)));
    }

    @Test
    void siwEnforcesMemlockEvenWithCapIpcLock() {
        Probe p = new Probe(null, 1, true, true, NODES, null, 1, 8 * MIB, true, true, 64 * MIB);
        assertVerdict(Reason.MEMLOCK_TOO_LOW, p, "siw");
    }

    @Test
    void enoughMemlock() {
        assertNull(classify(new Probe(null, 1, true, true, NODES, null, 1, 64 * MIB, false, true, 64 * MIB)));
    }

    /** This machine (the build host) has libibverbs but no kernel RDMA. */
    @Test
    void unavailableHereBecauseTheKernelHasNoRdma() {
        assumeFalse(Files.exists(Paths.get("/sys/class/infiniband")), "this machine's kernel has RDMA");
        assertFalse(JniProvider.isAvailable());
        Throwable cause = JniProvider.unavailabilityCause();
        assertNotNull(cause);
        if (Native.loadFailure() == null) {
            assertTrue(cause.getMessage().startsWith("kernel without RDMA support"), cause.getMessage());
            assertEquals(Reason.KERNEL_WITHOUT_RDMA, JniAvailability.check().reason());
        } else {
            // built without gcc or the rdma-core headers: the library is not in the jar, and the cause says so
            assertEquals(Reason.LIBRARY_NOT_LOADABLE, JniAvailability.check().reason(), cause.getMessage());
        }
    }
}
