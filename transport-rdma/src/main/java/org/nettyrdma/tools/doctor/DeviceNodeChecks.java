package org.nettyrdma.tools.doctor;

import org.nettyrdma.verbs.jni.NativeDiagnosis;

import java.util.ArrayList;
import java.util.List;

/**
 * The device nodes of /dev/infiniband, as the JNI provider's probe found them: rdma_cm (RDMA CM), the uverbs node of
 * each device the application may use, and whether this process may open them.
 */
final class DeviceNodeChecks {
    private static final String POD_FIX = "in a pod: request the device plugin's resource (rdma/rdma_shared_device_a: "
            + "1, rdma/hca: 1 or the SR-IOV resource), which mounts /dev/infiniband/rdma_cm and the device's uverbs "
            + "node; on a host: modprobe ib_uverbs rdma_ucm";

    private DeviceNodeChecks() {
    }

    static List<Finding> check(Facts f) {
        NativeDiagnosis v = f.verdict();
        List<Finding> findings = new ArrayList<>();
        if (!v.devInfiniband()) {
            findings.add(Finding.problem("device nodes", "/dev/infiniband is missing", POD_FIX));
            return findings;
        }
        if (!v.devNodes().contains("rdma_cm")) {
            findings.add(Finding.problem("device nodes", "/dev/infiniband/rdma_cm is missing (RDMA CM)", POD_FIX));
        }
        List<String> missing = new ArrayList<>();
        for (Device d : f.devicesInUse()) {
            if (d.uverbsNode() != null && !v.devNodes().contains(d.uverbsNode())) {
                missing.add(d.uverbsNode() + " (" + d.name() + ")");
            }
        }
        if (v.devNodes().stream().noneMatch(n -> n.startsWith("uverbs"))) {
            findings.add(Finding.problem("device nodes", "/dev/infiniband has no uverbs node", POD_FIX));
        } else if (!missing.isEmpty()) {
            boolean none = missing.size() == f.devicesInUse().size();
            String what = "/dev/infiniband lacks " + String.join(", ", missing);
            String fix = "the pod's device plugin resource gives it other devices than these; request the one of the "
                    + "interface the application uses, or use an address of a device whose node is there";
            findings.add(none && f.address() != null ? Finding.problem("device nodes", what, fix)
                    : Finding.warning("device nodes", what, fix));
        }
        if (v.inaccessibleNode() != null) {
            findings.add(Finding.problem("device nodes", "/dev/infiniband/" + v.inaccessibleNode() + " is not readable "
                    + "and writable by this process", "give the user access (udev rule, or the owning group: "
                    + "Kubernetes securityContext.supplementalGroups); in a pod, let the device plugin mount the node "
                    + "rather than a hostPath volume"));
        }
        if (findings.isEmpty()) {
            findings.add(Finding.ok("device nodes", "/dev/infiniband: " + String.join(", ", v.devNodes())
                    + ", readable and writable"));
        }
        return findings;
    }
}
