package org.nettyrdma.verbs.jni;

import java.util.List;

/**
 * The facts the JNI provider's availability rests on and its verdict, as {@link JniProvider#unavailabilityCause()}
 * reaches it (the same probe and the same rules), for tools that show them: the doctor. {@link #of(HostRoot,
 * NativeFacts)} reads them from any root, so that the tools can be tested with made-up files.
 */
public final class NativeDiagnosis {
    private final JniAvailability.Probe probe;
    private final JniAvailability.Verdict verdict;

    private NativeDiagnosis(JniAvailability.Probe probe) {
        this.probe = probe;
        this.verdict = JniAvailability.classify(probe);
    }

    /** This machine and process. */
    public static NativeDiagnosis ofSystem() {
        return of(HostRoot.system(), NativeFacts.system());
    }

    public static NativeDiagnosis of(HostRoot root, NativeFacts lib) {
        return new NativeDiagnosis(JniAvailability.probe(root, lib));
    }

    /** Whether the JNI provider would work. */
    public boolean available() {
        return verdict == null;
    }

    /** The cause's kind (e.g. {@code MEMLOCK_TOO_LOW}, {@code DEV_INFINIBAND_MISSING}), or null when available. */
    public String reason() {
        return verdict == null ? null : verdict.reason().name();
    }

    /** What is wrong and what to do, as {@link JniProvider#unavailabilityCause()} says it; null when available. */
    public String message() {
        return verdict == null ? null : verdict.message();
    }

    /** Why the native library did not load, or null. */
    public String libraryFailure() {
        return probe.libraryFailure() == null ? null : String.valueOf(probe.libraryFailure().getMessage());
    }

    /** Whether the kernel's userspace verbs (ib_uverbs) are there. */
    public boolean uverbs() {
        return probe.uverbs();
    }

    /** Whether /dev/infiniband exists. */
    public boolean devInfiniband() {
        return probe.devInfiniband();
    }

    /** The files in /dev/infiniband. */
    public List<String> devNodes() {
        return probe.devNodes();
    }

    /** The first of rdma_cm and uverbs* this process may not read and write, or null. */
    public String inaccessibleNode() {
        return probe.inaccessible();
    }

    /** rdma-core's device count (0 when not asked: the kernel side was not ready), or -errno. */
    public int deviceCount() {
        return probe.deviceCount();
    }

    /** The soft memlock limit the library reported ({@link Long#MAX_VALUE}: unlimited, or the library did not load). */
    public long memlockBytes() {
        return probe.memlockBytes();
    }

    /** Whether the process has CAP_IPC_LOCK. */
    public boolean capIpcLock() {
        return probe.capIpcLock();
    }

    /** Whether the soft-iWARP driver is loaded (it enforces the memlock limit even with CAP_IPC_LOCK). */
    public boolean siwLoaded() {
        return probe.siw();
    }

    /** The least memlock limit the provider accepts ({@code org.nettyrdma.jni.minMemlockBytes}). */
    public long minMemlockBytes() {
        return probe.minMemlockBytes();
    }
}
