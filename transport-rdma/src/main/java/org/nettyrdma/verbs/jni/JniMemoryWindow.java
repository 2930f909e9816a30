package org.nettyrdma.verbs.jni;

import org.nettyrdma.verbs.MemoryWindow;
import org.nettyrdma.verbs.ProtectionDomain;
import org.nettyrdma.verbs.VerbsException;

/**
 * {@code ibv_mw} of type 2. Its rkey is tracked here: libibverbs does not learn the key a BIND_MW work request gives
 * it, so the provider notes the key of each bind it posts, and writes the window's current key into the
 * {@code ibv_mw} before the next bind (rxe checks it).
 */
final class JniMemoryWindow implements MemoryWindow {
    private final JniProtectionDomain pd;
    private final long handle;
    /** The index part of the rkey ({@code rkey >>> 8}), which no bind changes: the device's name for the window. */
    private final int index;
    private volatile int rkey;
    private boolean closed;

    JniMemoryWindow(JniProtectionDomain pd, long handle) {
        this.pd = pd;
        this.handle = handle;
        this.rkey = Native.mwRkey(handle);
        this.index = rkey >>> 8;
    }

    @Override
    public ProtectionDomain pd() {
        return pd;
    }

    JniProtectionDomain jniPd() {
        return pd;
    }

    long handle() {
        return handle;
    }

    int index() {
        return index;
    }

    @Override
    public int rkey() {
        return rkey;
    }

    /** A bind that gives the window {@code newRkey} was posted. */
    void posted(int newRkey) {
        rkey = newRkey;
    }

    /** Whether the window is open (a bind may name it). */
    synchronized boolean isOpen() {
        return !closed;
    }

    @Override
    public void close() throws VerbsException {
        synchronized (this) {
            if (closed) {
                return;
            }
            pd.jniDevice().removeWindow(this);
            int rc = Native.deallocMw(handle);
            if (rc < 0) {
                pd.jniDevice().addWindow(this);
                throw new VerbsException("ibv_dealloc_mw", -rc);
            }
            closed = true;
        }
        pd.release();
    }

    @Override
    public String toString() {
        return "mw rkey 0x" + Integer.toHexString(rkey) + (closed ? " (closed)" : "");
    }
}
