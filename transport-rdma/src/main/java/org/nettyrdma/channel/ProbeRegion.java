package org.nettyrdma.channel;

import org.nettyrdma.verbs.Access;
import org.nettyrdma.verbs.MemoryRegion;
import org.nettyrdma.verbs.ProtectionDomain;
import org.nettyrdma.verbs.VerbsException;

import java.nio.ByteBuffer;

/**
 * What a keep-alive probe and iWARP's close fence read, one per protection domain for the life of the process (as the
 * domain): {@link #EXPOSED_BYTES} zero bytes every peer may READ (their address and key go out in the handshake under
 * {@link RdmaProtocol#FLAG_PROBE_TARGET}) and, apart from them, the bytes a probe of this side reads into. A probe
 * reads one byte, not zero: soft-iWARP answers a zero-length READ that came while it was sending with its send slot's
 * stale first SGE and drops the connection (docs/protocol.md, the keep-alive). Nothing but zeros is ever exposed:
 * this side never writes the exposed bytes, and what peers' responses land in is a separate region no peer can name.
 */
final class ProbeRegion {
    /** The zero bytes exposed to peers' READs. */
    static final int EXPOSED_BYTES = 8;
    /** What a probe reads: one byte. */
    static final int PROBE_LENGTH = 1;
    private static final int LANDING_BYTES = 8;

    private final MemoryRegion exposed;
    private final MemoryRegion landing;

    ProbeRegion(ProtectionDomain pd) throws VerbsException {
        ByteBuffer memory = ByteBuffer.allocateDirect(EXPOSED_BYTES + LANDING_BYTES);
        exposed = pd.registerMemory(memory.slice(0, EXPOSED_BYTES), Access.REMOTE_READ);
        try {
            landing = pd.registerMemory(memory.slice(EXPOSED_BYTES, LANDING_BYTES), Access.LOCAL_WRITE);
        } catch (VerbsException | RuntimeException e) {
            try {
                exposed.close();
            } catch (VerbsException suppressed) {
                e.addSuppressed(suppressed);
            }
            throw e;
        }
    }

    /** Where peers READ: the address in this side's handshake. */
    long exposedAddress() {
        return exposed.address();
    }

    /** The key peers READ with: the rkey in this side's handshake. */
    int exposedRkey() {
        return exposed.rkey();
    }

    /** Where this side's probes land. */
    long landingAddress() {
        return landing.address();
    }

    int landingLkey() {
        return landing.lkey();
    }
}
