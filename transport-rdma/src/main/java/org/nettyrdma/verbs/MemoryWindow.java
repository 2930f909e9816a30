package org.nettyrdma.verbs;

/**
 * A type-2 memory window ({@code ibv_mw}, {@code IBV_MW_TYPE_2}): a remote key for a range of a memory region, valid
 * on one queue pair only, for as long as its owner wants.
 *
 * <p>Life cycle: allocated free ({@link ProtectionDomain#allocMemoryWindow()}); bound by a {@link WrOpcode#BIND_MW}
 * work request posted on the QP that alone may then use it ({@link WorkRequestList#bindWindow}), which gives it a new
 * rkey; invalidated (free again) by a {@link WrOpcode#LOCAL_INV} on that QP or by the peer's
 * {@link WrOpcode#SEND_WITH_INV}, after which its rkey is refused; bound again with yet another rkey. A window must be
 * free when it is bound, and must be invalidated once only (rxe's kernel driver dereferences a null QP when it
 * invalidates a free window). While bound it keeps its memory region registered: deregistering that region fails
 * with EINVAL; and it holds its QP: deallocate or invalidate it before the QP is destroyed (rxe0 took ~50 s to destroy
 * a QP a window still held). rxe does not confine the window to its range: the whole region is reachable through it
 * (docs/verbs-spi.md); bind a window on rxe only over a region all of which its peer may see.
 */
public interface MemoryWindow extends AutoCloseable {

    ProtectionDomain pd();

    /**
     * The window's rkey: that of the last bind posted on it (its work request may not have executed yet), or the one it
     * was allocated with. Only the key's low 8 bits change from bind to bind.
     */
    int rkey();

    /** {@code ibv_inc_rkey(rkey())}: the rkey to give the next bind, which differs from every earlier one in the last 256. */
    default int nextRkey() {
        return (rkey() & ~0xff) | ((rkey() + 1) & 0xff);
    }

    /** {@code ibv_dealloc_mw}; idempotent. A bound window is invalidated by it. */
    @Override
    void close() throws VerbsException;
}
