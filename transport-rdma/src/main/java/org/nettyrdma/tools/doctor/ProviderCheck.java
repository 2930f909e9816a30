package org.nettyrdma.tools.doctor;

import org.nettyrdma.channel.RdmaIoHandlerConfig;

/** Which verbs provider the configuration ({@code org.nettyrdma.provider}) selects, and what it will do here. */
final class ProviderCheck {
    private ProviderCheck() {
    }

    static Finding check(Facts f) {
        String provider = f.provider();
        boolean available = f.verdict().available();
        if (RdmaIoHandlerConfig.PROVIDER_EMULATED.equals(provider)) {
            return Finding.warning("provider", "emulated (org.nettyrdma.provider=emulated): in-process only, no "
                    + "network; a server and a client in different processes cannot connect",
                    "remove -Dorg.nettyrdma.provider=emulated (native is the default)");
        }
        if (available) {
            return Finding.ok("provider", provider + ": the native provider (rdma-core); the JNI provider's checks "
                    + "pass");
        }
        String cause = f.verdict().message();
        if (RdmaIoHandlerConfig.PROVIDER_AUTO.equals(provider)) {
            return Finding.problem("provider", "auto: falls back to the emulated provider (in-process only, it serves "
                    + "no other process): native RDMA is unavailable (" + f.verdict().reason() + ")", cause);
        }
        return Finding.problem("provider", provider + ": the RDMA event loop group fails to start: "
                + "Rdma.isAvailable() is false (" + f.verdict().reason() + ")", cause);
    }
}
