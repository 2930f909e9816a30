package org.nettyrdma.verbs.emulated;

import org.nettyrdma.verbs.DeviceAttributes;
import org.nettyrdma.verbs.DeviceAttributes.Transport;
import org.nettyrdma.verbs.VerbsProvider;

import java.net.InetAddress;

/** The fabric the emulated conformance runs use: one device on 127.0.0.1, set up so that every suite test runs. */
final class ConformanceFabrics {
    static final InetAddress ADDRESS = InetAddress.getLoopbackAddress();
    /** Small enough that the suite can allocate a buffer one byte over it. */
    private static final long MAX_MR_SIZE = 16L << 20;
    private static final int CM_RESPONSE_TIMEOUT_MS = 500;

    private ConformanceFabrics() {
    }

    /** A provider over a new, isolated fabric with one device of {@code transport}. */
    static VerbsProvider provider(Transport transport) {
        DeviceAttributes d = EmulatedFabric.defaultAttributes(transport);
        EmulatedFabric fabric = new EmulatedFabric();
        fabric.addDevice("emu0", new DeviceAttributes(transport, d.maxQp(), d.maxQpWr(), d.maxSge(),
                d.maxInlineData(), d.maxCqe(), d.maxMr(), MAX_MR_SIZE, d.maxQpRdAtom(), d.maxMw(),
                d.capabilityFlags(), d.maxSrq(), d.maxSrqWr(), d.maxSrqSge()), ADDRESS);
        fabric.cmResponseTimeoutMillis(CM_RESPONSE_TIMEOUT_MS);
        return new EmulatedProvider(fabric);
    }
}
