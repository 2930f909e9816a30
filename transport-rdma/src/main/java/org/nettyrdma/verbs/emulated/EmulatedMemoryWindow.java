package org.nettyrdma.verbs.emulated;

import org.nettyrdma.verbs.MemoryWindow;
import org.nettyrdma.verbs.ProtectionDomain;

/**
 * A type-2 memory window, as rxe keeps one: free until a BIND_MW executes on a QP of its protection domain, then
 * valid on that QP only, for a range of one region (which it keeps registered), until a LOCAL_INV or the peer's
 * SEND_WITH_INV frees it again. Its state is guarded by the fabric's window table (binding and invalidating run on
 * the link of the QP that does it; lookups read volatile fields).
 */
final class EmulatedMemoryWindow implements MemoryWindow {
    private final EmulatedProtectionDomain pd;
    /** The rkey a posted bind gave it (what {@link #rkey()} reports). */
    private volatile int postedRkey;
    /** The rkey the device knows: changed when a bind executes. */
    volatile int rkey;
    volatile boolean valid;
    volatile EmulatedQueuePair qp;
    volatile EmulatedMemoryRegion mr;
    volatile long address;
    volatile long length;
    volatile int access;
    private boolean closed;

    EmulatedMemoryWindow(EmulatedProtectionDomain pd, int rkey) {
        this.pd = pd;
        this.rkey = rkey;
        this.postedRkey = rkey;
    }

    @Override
    public ProtectionDomain pd() {
        return pd;
    }

    EmulatedProtectionDomain emulatedPd() {
        return pd;
    }

    @Override
    public int rkey() {
        return postedRkey;
    }

    void posted(int newRkey) {
        postedRkey = newRkey;
    }

    /** Binds (the caller checked everything): valid on {@code qp} for the range, under {@code newRkey}. */
    synchronized void bind(EmulatedQueuePair qp, EmulatedMemoryRegion mr, long address, long length, int access,
                           int newRkey) {
        this.rkey = (rkey & ~0xff) | (newRkey & 0xff);
        this.mr = mr;
        this.address = address;
        this.length = length;
        this.access = access;
        this.qp = qp;
        mr.windowBound();
        valid = true;
    }

    /** Frees a valid window: its rkey is refused from now on. */
    synchronized void invalidate() {
        if (!valid) {
            return;
        }
        valid = false;
        qp = null;
        EmulatedMemoryRegion m = mr;
        mr = null;
        if (m != null) {
            m.windowUnbound();
        }
    }

    /** The region behind {@code [addr, addr + len)} if this window admits {@code access} there through {@code on}. */
    EmulatedMemoryRegion admit(EmulatedQueuePair on, long addr, long len, int access) {
        EmulatedMemoryRegion m = mr;
        long offset = addr - address;
        return valid && m != null && qp == on && on.pd() == pd && (this.access & access) == access && offset >= 0
                && len >= 0 && offset <= length - len ? m : null;
    }

    @Override
    public void close() {
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
        }
        invalidate();
        pd.emulatedDevice().fabric().removeWindow(this);
        pd.emulatedDevice().releaseMw();
        pd.release();
    }

    @Override
    public String toString() {
        return "mw rkey 0x" + Integer.toHexString(rkey) + (valid ? " bound" : " free") + (closed ? " (closed)" : "");
    }
}
