package org.nettyrdma.verbs.emulated;

import org.nettyrdma.verbs.Access;
import org.nettyrdma.verbs.Device;
import org.nettyrdma.verbs.Errno;
import org.nettyrdma.verbs.MemoryRegion;
import org.nettyrdma.verbs.MemoryWindow;
import org.nettyrdma.verbs.ProtectionDomain;
import org.nettyrdma.verbs.SharedReceiveQueue;
import org.nettyrdma.verbs.VerbsException;

import java.nio.ByteBuffer;

final class EmulatedProtectionDomain implements ProtectionDomain {

    private final EmulatedDevice device;
    private int users;
    private boolean closed;

    EmulatedProtectionDomain(EmulatedDevice device) {
        this.device = device;
    }

    @Override
    public Device device() {
        return device;
    }

    EmulatedDevice emulatedDevice() {
        return device;
    }

    @Override
    public MemoryRegion registerMemory(ByteBuffer buffer, int access) throws VerbsException {
        Access.checkRegistration(buffer, access);
        if (buffer.capacity() > device.attributes().maxMrSize()) {
            throw new VerbsException("ibv_reg_mr", Errno.EINVAL,
                    buffer.capacity() + " bytes over max_mr_size " + device.attributes().maxMrSize());
        }
        synchronized (this) {
            if (closed) {
                throw new VerbsException("ibv_reg_mr", Errno.EBADF, "protection domain closed");
            }
            device.reserveMr();
            users++;
        }
        return device.fabric().register(this, buffer, access);
    }

    @Override
    public MemoryWindow allocMemoryWindow() throws VerbsException {
        if (!device.attributes().supportsMemoryWindows()) {
            throw new VerbsException("ibv_alloc_mw", Errno.EOPNOTSUPP, device.name() + " has no memory windows");
        }
        synchronized (this) {
            if (closed) {
                throw new VerbsException("ibv_alloc_mw", Errno.EBADF, "protection domain closed");
            }
            device.reserveMw();
            users++;
        }
        return device.fabric().allocWindow(this);
    }

    @Override
    public SharedReceiveQueue createSharedReceiveQueue(int maxWr, int maxSge) throws VerbsException {
        device.attributes().checkSharedReceiveQueue(device.name(), maxWr, maxSge);
        synchronized (this) {
            if (closed) {
                throw new VerbsException("ibv_create_srq", Errno.EBADF, "protection domain closed");
            }
            device.reserveSrq();
            users++;
        }
        return new EmulatedSharedReceiveQueue(device, this, maxWr, maxSge);
    }

    synchronized void use() throws VerbsException {
        if (closed) {
            throw new VerbsException("rdma_create_qp", Errno.EBADF, "protection domain closed");
        }
        users++;
    }

    synchronized void release() {
        users--;
    }

    @Override
    public synchronized void close() throws VerbsException {
        if (closed) {
            return;
        }
        if (users > 0) {
            throw new VerbsException("ibv_dealloc_pd", Errno.EBUSY, users + " memory regions, windows, shared receive queues or queue pairs use it");
        }
        closed = true;
    }
}
