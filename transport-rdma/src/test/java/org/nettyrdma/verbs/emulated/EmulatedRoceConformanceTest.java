package org.nettyrdma.verbs.emulated;

import org.nettyrdma.verbs.DeviceAttributes.Transport;
import org.nettyrdma.verbs.VerbsConformanceSuite;
import org.nettyrdma.verbs.VerbsProvider;

import java.net.InetAddress;

/** The verbs conformance suite on an emulated RoCE device. */
class EmulatedRoceConformanceTest extends VerbsConformanceSuite {

    @Override
    protected VerbsProvider newProvider() {
        return ConformanceFabrics.provider(Transport.ROCE);
    }

    @Override
    protected InetAddress deviceAddress() {
        return ConformanceFabrics.ADDRESS;
    }
}
