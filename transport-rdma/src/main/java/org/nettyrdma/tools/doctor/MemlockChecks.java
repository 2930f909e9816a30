package org.nettyrdma.tools.doctor;

import org.nettyrdma.verbs.jni.ProcSelf;

import java.util.ArrayList;
import java.util.List;

/**
 * The memlock limit (/proc/self/limits) against the registered memory the configuration needs, and CAP_IPC_LOCK,
 * which lifts the limit for memory registration except on soft-iWARP (siw enforces it even for root).
 */
final class MemlockChecks {
    static final String FIX = "raise the memlock limit to unlimited: ulimit -l unlimited before the JVM starts (it "
            + "raises the soft limit up to the hard one; the examples image's entrypoint does), LimitMEMLOCK=infinity "
            + "for the container runtime's systemd unit (containerd, CRI-O) where the hard limit is lower, docker run "
            + "--ulimit memlock=-1:-1; and grant CAP_IPC_LOCK (securityContext.capabilities.add: [\"IPC_LOCK\"])";

    private MemlockChecks() {
    }

    static List<Finding> check(Facts f) {
        List<Finding> findings = new ArrayList<>();
        boolean siw = f.devicesInUse().stream().anyMatch(Device::isSoftIwarp);
        findings.add(capability(f, siw));
        ProcSelf.Limit limit = f.memlock();
        if (limit == null) {
            findings.add(Finding.warning("memlock", "/proc/self/limits cannot be read: the memlock limit is unknown",
                    FIX));
            return findings;
        }
        String have = "memlock limit " + Bytes.format(limit.soft()) + " (hard " + Bytes.format(limit.hard()) + ")";
        if (limit.soft() == ProcSelf.UNLIMITED) {
            findings.add(Finding.ok("memlock", have));
            return findings;
        }
        long floor = f.verdict().minMemlockBytes();
        if ("MEMLOCK_TOO_LOW".equals(f.verdict().reason())) {
            // the transport's own rule (siw loaded, or no CAP_IPC_LOCK): it refuses the native provider
            findings.add(Finding.problem("memlock", have + " is below the transport's minimum of "
                    + Bytes.format(floor) + (f.capIpcLock() ? " and the soft-iWARP driver is loaded (it enforces the "
                    + "limit even with CAP_IPC_LOCK)" : " and the process has no CAP_IPC_LOCK")
                    + ": the native provider is unavailable", FIX));
            return findings;
        }
        MemlockNeed need = f.need();
        long needed = need == null ? floor : Math.max(floor, need.totalBytes());
        String needText = need == null ? "the transport's minimum " + Bytes.format(floor) + " (the estimate failed: "
                + f.needError() + ")" : "about " + Bytes.format(needed) + " that " + need.connections()
                + " connections on " + need.eventLoops() + " event loops register (" + describe(need) + ")";
        if (limit.soft() >= needed) {
            findings.add(Finding.ok("memlock", have + " covers " + needText));
        } else if (f.capIpcLock() && !siw) {
            findings.add(Finding.ok("memlock", have + " is below " + needText + ", but CAP_IPC_LOCK lifts it"));
        } else {
            String why = f.capIpcLock() ? " (CAP_IPC_LOCK does not lift it for soft-iWARP)" : " and the process has no "
                    + "CAP_IPC_LOCK";
            findings.add(Finding.problem("memlock", have + " is below " + needText + why + ": memory registration "
                    + "fails with ENOMEM or EPERM once it is reached", FIX));
        }
        return findings;
    }

    private static Finding capability(Facts f, boolean siw) {
        if (f.capIpcLock()) {
            return Finding.ok("capability", "CAP_IPC_LOCK" + (siw ? " (soft-iWARP enforces the memlock limit even "
                    + "so)" : ""));
        }
        if (f.memlock() != null && f.memlock().soft() == ProcSelf.UNLIMITED) {
            return Finding.ok("capability", "no CAP_IPC_LOCK; not needed while the memlock limit is unlimited");
        }
        return Finding.warning("capability", "no CAP_IPC_LOCK: the memlock limit bounds registered memory",
                "grant it: securityContext.capabilities.add: [\"IPC_LOCK\"] (docker run --cap-add IPC_LOCK)");
    }

    static String describe(MemlockNeed n) {
        return n.connections() + " x " + Bytes.format(n.perConnectionBytes()) + " receive buffers, "
                + Bytes.format(n.stagingBytes()) + " of send staging for the SENDs in flight, "
                + Bytes.format(n.lentBytes()) + " of received buffers the pipelines may hold, "
                + Bytes.format(n.poolRoundingBytes()) + " of partly used pool regions";
    }
}
