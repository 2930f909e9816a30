package org.nettyrdma.verbs.jni;

import org.nettyrdma.verbs.VerbsConformanceSuite;
import org.nettyrdma.verbs.VerbsProvider;

import java.net.InetAddress;
import java.net.UnknownHostException;

/**
 * The verbs conformance suite on the JNI provider, on the device that owns the IP in the system property
 * {@value #ADDRESS_PROPERTY}. It needs kernel RDMA, so Surefire does not run it (the name does not end in Test):
 * {@link VmConformanceMain} runs it in the VM, on rxe0 and on siw0.
 */
public class JniVerbsConformance extends VerbsConformanceSuite {
    public static final String ADDRESS_PROPERTY = "org.nettyrdma.test.deviceAddress";

    @Override
    protected VerbsProvider newProvider() {
        JniProvider.ensureAvailability();
        return JniProvider.create();
    }

    @Override
    protected InetAddress deviceAddress() {
        String ip = System.getProperty(ADDRESS_PROPERTY);
        if (ip == null) {
            throw new IllegalStateException("set -D" + ADDRESS_PROPERTY + " to the IP of the RDMA device under test");
        }
        try {
            return InetAddress.getByName(ip);
        } catch (UnknownHostException e) {
            throw new IllegalArgumentException(ADDRESS_PROPERTY + "=" + ip, e);
        }
    }
}
