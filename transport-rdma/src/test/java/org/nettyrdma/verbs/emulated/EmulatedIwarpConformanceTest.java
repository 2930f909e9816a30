package org.nettyrdma.verbs.emulated;

import org.nettyrdma.verbs.DeviceAttributes.Transport;
import org.nettyrdma.verbs.VerbsConformanceSuite;
import org.nettyrdma.verbs.VerbsProvider;

import java.net.InetAddress;

/** The verbs conformance suite on an emulated iWARP device (no immediate data). */
class EmulatedIwarpConformanceTest extends VerbsConformanceSuite {

    @Override
    protected VerbsProvider newProvider() {
        return ConformanceFabrics.provider(Transport.IWARP);
    }

    @Override
    protected InetAddress deviceAddress() {
        return ConformanceFabrics.ADDRESS;
    }
}
