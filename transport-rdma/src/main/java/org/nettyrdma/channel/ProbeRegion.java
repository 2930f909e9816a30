package org.nettyrdma.channel;

import org.nettyrdma.verbs.Access;
import org.nettyrdma.verbs.MemoryRegion;
import org.nettyrdma.verbs.ProtectionDomain;
import org.nettyrdma.verbs.VerbsException;

import java.nio.ByteBuffer;

/**
 * What the keep-alive probes and the close fence of one iWARP connection read and land in: {@link #EXPOSED_BYTES}
 * zero bytes its peer may READ (their address and key go out in the handshake under
 * {@link RdmaProtocol#FLAG_PROBE_TARGET}) and, apart from them, the bytes this side's probes read into. A probe reads
 * one byte, not zero: soft-iWARP answers a zero-length READ that came while it was sending with its send slot's stale
 * first SGE and drops the connection (docs/protocol.md, the keep-alive). Nothing but zeros is exposed: this side never
 * writes them. One per connection, freed with it once its QP is gone: a peer can name both regions (the landing
 * region's key travels in each READ request, and iWARP lets the peer write a READ's sink), and siw lets a peer
 * invalidate any region it names ({@code SEND_WITH_INV}), so a peer reaches only its own connection's.
 */
final class ProbeRegion {
    /** The zero bytes exposed to the peer's READs. */
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
            // iWARP: the sink of a READ takes the response as a tagged write, and hardware checks remote write on it
            landing = pd.registerMemory(memory.slice(EXPOSED_BYTES, LANDING_BYTES),
                    Access.LOCAL_WRITE | Access.REMOTE_WRITE);
        } catch (VerbsException | RuntimeException e) {
            try {
                exposed.close();
            } catch (VerbsException suppressed) {
                e.addSuppressed(suppressed);
            }
            throw e;
        }
    }

    /** Where the peer READs: the address in this side's handshake. */
    long exposedAddress() {
        return exposed.address();
    }

    /** The key the peer READs with: the rkey in this side's handshake. */
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

    /** Deregisters both regions; only once no work request of the connection can name them (its QP is gone). */
    void close() throws VerbsException {
        try {
            exposed.close();
        } finally {
            landing.close();
        }
    }
}
