package org.nettyrdma.verbs.jni;

import org.nettyrdma.verbs.Access;
import org.nettyrdma.verbs.Device;
import org.nettyrdma.verbs.Errno;
import org.nettyrdma.verbs.MemoryRegion;
import org.nettyrdma.verbs.MemoryWindow;
import org.nettyrdma.verbs.ProtectionDomain;
import org.nettyrdma.verbs.SharedReceiveQueue;
import org.nettyrdma.verbs.VerbsException;

import java.nio.ByteBuffer;

/** {@code ibv_pd}; counts its memory regions and queue pairs so that closing it while they live is EBUSY. */
final class JniProtectionDomain implements ProtectionDomain {

    private final JniDevice device;
    private final long handle;
    private int users;
    private boolean closed;

    JniProtectionDomain(JniDevice device, long handle) {
        this.device = device;
        this.handle = handle;
    }

    @Override
    public Device device() {
        return device;
    }

    JniDevice jniDevice() {
        return device;
    }

    long handle() {
        return handle;
    }

    @Override
    public MemoryRegion registerMemory(ByteBuffer buffer, int access) throws VerbsException {
        Access.checkRegistration(buffer, access);
        if (!buffer.isDirect()) {
            throw new VerbsException("ibv_reg_mr", Errno.EINVAL, "a heap buffer: the JNI provider registers only "
                    + "direct buffers");
        }
        long length = buffer.capacity();
        if (length == 0 || length > device.attributes().maxMrSize()) {
            throw new VerbsException("ibv_reg_mr", Errno.EINVAL,
                    length + " bytes, outside 1.." + device.attributes().maxMrSize() + " (max_mr_size)");
        }
        long address = Native.directBufferAddress(buffer);
        synchronized (this) {
            if (closed) {
                throw new VerbsException("ibv_reg_mr", Errno.EBADF, "protection domain closed");
            }
            long mr = Native.regMr(handle, address, length, access);
            if (mr < 0) {
                int errno = (int) -mr;
                boolean memlock = errno == Errno.ENOMEM || errno == Errno.EPERM || errno == Errno.EAGAIN
                        || errno == Errno.EFAULT;
                throw new VerbsException("ibv_reg_mr", errno, memlock ? JniAvailability.memlockHint(length)
                        : length + " bytes, access " + access);
            }
            users++;
            JniMemoryRegion region = new JniMemoryRegion(this, buffer, mr, address, length, access);
            device.provider().addRegion(region);
            return region;
        }
    }

    @Override
    public MemoryWindow allocMemoryWindow() throws VerbsException {
        if (!device.attributes().supportsMemoryWindows()) {
            throw new VerbsException("ibv_alloc_mw", Errno.EOPNOTSUPP, device.name() + " has no memory windows "
                    + "(max_mw " + device.attributes().maxMw() + ", device_cap_flags 0x"
                    + Long.toHexString(device.attributes().capabilityFlags()) + ")");
        }
        synchronized (this) {
            if (closed) {
                throw new VerbsException("ibv_alloc_mw", Errno.EBADF, "protection domain closed");
            }
            long mw = Native.allocMw(handle);
            if (mw < 0) {
                throw new VerbsException("ibv_alloc_mw", (int) -mw, device.name());
            }
            users++;
            JniMemoryWindow window = new JniMemoryWindow(this, mw);
            device.addWindow(window);
            return window;
        }
    }

    synchronized void use(String verb) throws VerbsException {
        if (closed) {
            throw new VerbsException(verb, Errno.EBADF, "protection domain closed");
        }
        users++;
    }

    synchronized void release() {
        users--;
    }

    @Override
    public SharedReceiveQueue createSharedReceiveQueue(int maxWr, int maxSge) throws VerbsException {
        device.attributes().checkSharedReceiveQueue(device.name(), maxWr, maxSge);
        synchronized (this) {
            if (closed) {
                throw new VerbsException("ibv_create_srq", Errno.EBADF, "protection domain closed");
            }
            long srq = Native.createSrq(handle, maxWr, maxSge);
            if (srq < 0) {
                throw new VerbsException("ibv_create_srq", (int) -srq, "max_wr " + maxWr + ", max_sge " + maxSge
                        + " on " + device.name());
            }
            users++;
            return new JniSharedReceiveQueue(this, srq);
        }
    }

    @Override
    public synchronized void close() throws VerbsException {
        if (closed) {
            return;
        }
        if (users > 0) {
            throw new VerbsException("ibv_dealloc_pd", Errno.EBUSY, users + " memory regions, windows, shared receive queues or queue pairs use it");
        }
        int rc = Native.deallocPd(handle);
        if (rc < 0) {
            throw new VerbsException("ibv_dealloc_pd", -rc);
        }
        closed = true;
    }

    @Override
    public String toString() {
        return "pd on " + device.name() + (closed ? " (closed)" : "");
    }
}
