package org.nettyrdma.channel;

import org.nettyrdma.verbs.Device;
import org.nettyrdma.verbs.ProtectionDomain;
import org.nettyrdma.verbs.VerbsException;
import org.nettyrdma.verbs.VerbsProvider;
import org.nettyrdma.verbs.emulated.EmulatedProvider;

import java.util.IdentityHashMap;
import java.util.Map;

/**
 * What every event loop of one provider shares, for the life of the process: the provider itself and one protection
 * domain per device, so that registered memory serves every connection on that device whatever its event loop.
 */
final class RdmaResources {
    private static RdmaResources nativeResources;
    private static RdmaResources emulatedResources;

    private final VerbsProvider provider;
    private final Map<Device, ProtectionDomain> pds = new IdentityHashMap<>();

    private RdmaResources(VerbsProvider provider) {
        this.provider = provider;
    }

    /** The resources of the provider a config names; the native one only where {@link Rdma#isAvailable()}. */
    static synchronized RdmaResources of(String providerName) {
        boolean useNative = RdmaIoHandlerConfig.PROVIDER_NATIVE.equals(providerName)
                || (RdmaIoHandlerConfig.PROVIDER_AUTO.equals(providerName) && Rdma.isAvailable());
        if (useNative) {
            Rdma.ensureAvailability();
            if (nativeResources == null) {
                nativeResources = new RdmaResources(Rdma.nativeProvider());
            }
            return nativeResources;
        }
        if (emulatedResources == null) {
            emulatedResources = new RdmaResources(EmulatedProvider.create());
        }
        return emulatedResources;
    }

    VerbsProvider provider() {
        return provider;
    }

    synchronized ProtectionDomain pd(Device device) throws VerbsException {
        ProtectionDomain pd = pds.get(device);
        if (pd == null) {
            pd = device.allocPd();
            pds.put(device, pd);
        }
        return pd;
    }
}
