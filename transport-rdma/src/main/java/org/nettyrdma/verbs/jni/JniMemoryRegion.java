package org.nettyrdma.verbs.jni;

import org.nettyrdma.verbs.Access;
import org.nettyrdma.verbs.MemoryRegion;
import org.nettyrdma.verbs.ProtectionDomain;
import org.nettyrdma.verbs.VerbsException;

import java.nio.ByteBuffer;

/**
 * {@code ibv_mr} over a direct buffer, whose virtual address is what SGEs name. It keeps the buffer reachable while
 * registered, so the memory the device may touch is never freed under it.
 */
final class JniMemoryRegion implements MemoryRegion {
    private final JniProtectionDomain pd;
    private final ByteBuffer buffer;
    private final long handle;
    private final long address;
    private final long length;
    private final int access;
    private final int lkey;
    private final int rkey;
    private boolean closed;

    JniMemoryRegion(JniProtectionDomain pd, ByteBuffer buffer, long handle, long address, long length, int access) {
        this.pd = pd;
        this.buffer = buffer.duplicate().clear();
        this.handle = handle;
        this.address = address;
        this.length = length;
        this.access = access;
        this.lkey = Native.mrLkey(handle);
        // the SPI's rkey is 0 unless the region grants a remote access (devices hand out an rkey regardless)
        this.rkey = (access & (Access.REMOTE_READ | Access.REMOTE_WRITE)) != 0 ? Native.mrRkey(handle) : 0;
    }

    @Override
    public ProtectionDomain pd() {
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
        return lkey;
    }

    @Override
    public int rkey() {
        return rkey;
    }

    @Override
    public int access() {
        return access;
    }

    @Override
    public ByteBuffer buffer() {
        return buffer.duplicate();
    }

    long handle() {
        return handle;
    }

    synchronized boolean isOpen() {
        return !closed;
    }

    boolean contains(long addr, long len) {
        long offset = addr - address;
        return offset >= 0 && len >= 0 && offset <= length - len;
    }

    @Override
    public void close() throws VerbsException {
        synchronized (this) {
            if (closed) {
                return;
            }
            int rc = Native.deregMr(handle);
            if (rc < 0) {
                throw new VerbsException("ibv_dereg_mr", -rc);
            }
            closed = true;
        }
        pd.jniDevice().provider().removeRegion(this);
        pd.release();
    }

    @Override
    public String toString() {
        return "mr " + length + " bytes at 0x" + Long.toHexString(address) + " lkey 0x" + Integer.toHexString(lkey)
                + (closed ? " (closed)" : "");
    }
}
