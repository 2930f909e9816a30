package org.nettyrdma.verbs.emulated;

import org.nettyrdma.verbs.Access;
import org.nettyrdma.verbs.Errno;
import org.nettyrdma.verbs.VerbsException;
import org.nettyrdma.verbs.MemoryRegion;
import org.nettyrdma.verbs.ProtectionDomain;

import java.nio.ByteBuffer;

/** A region with a virtual I/O address: SGEs name {@code address() + offset}, the key finds the region. */
final class EmulatedMemoryRegion implements MemoryRegion {
    private final EmulatedProtectionDomain pd;
    private final ByteBuffer buffer;
    private final long address;
    private final long length;
    private final int access;
    private final int key;
    private boolean closed;
    /** Memory windows bound to this region: while there are any, it cannot be deregistered (as on rxe). */
    private int windows;

    EmulatedMemoryRegion(EmulatedProtectionDomain pd, ByteBuffer buffer, long address, long length, int access,
                         int key) {
        this.pd = pd;
        this.buffer = buffer.duplicate().clear();
        this.address = address;
        this.length = length;
        this.access = access;
        this.key = key;
    }

    @Override
    public ProtectionDomain pd() {
        return pd;
    }

    EmulatedProtectionDomain emulatedPd() {
        return pd;
    }

    @Override
    public long address() {
        return address;
    }

    @Override
    public long length() {
        return length;
    }

    @Override
    public int lkey() {
        return key;
    }

    @Override
    public int rkey() {
        return (access & (Access.REMOTE_READ | Access.REMOTE_WRITE)) != 0 ? key : 0;
    }

    @Override
    public int access() {
        return access;
    }

    @Override
    public ByteBuffer buffer() {
        return buffer.duplicate();
    }

    /** The registered memory itself; absolute accesses only. */
    ByteBuffer memory() {
        return buffer;
    }

    /** The buffer index of {@code [addr, addr + len)}, or -1 if it isn't inside the region. */
    int offsetOf(long addr, long len) {
        long offset = addr - address;
        return offset >= 0 && len >= 0 && offset <= length - len ? (int) offset : -1;
    }

    synchronized void windowBound() {
        windows++;
    }

    synchronized void windowUnbound() {
        windows--;
    }

    @Override
    public void close() throws VerbsException {
        synchronized (this) {
            if (closed) {
                return;
            }
            if (windows > 0) {
                throw new VerbsException("ibv_dereg_mr", Errno.EINVAL, windows + " memory windows bound to it");
            }
            closed = true;
        }
        pd.emulatedDevice().fabric().deregister(this);
        pd.emulatedDevice().releaseMr();
        pd.release();
    }
}
