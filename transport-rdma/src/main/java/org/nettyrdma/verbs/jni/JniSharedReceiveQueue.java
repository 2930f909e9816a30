package org.nettyrdma.verbs.jni;

import org.nettyrdma.verbs.Errno;
import org.nettyrdma.verbs.ProtectionDomain;
import org.nettyrdma.verbs.SharedReceiveQueue;
import org.nettyrdma.verbs.VerbsException;
import org.nettyrdma.verbs.WorkRequestList;

/**
 * {@code ibv_srq}. Posted to by one thread, as a QP is ({@link #postRecv} is not synchronized); the count of the QPs
 * created with it is, because a soft-iWARP QP may be destroyed by its connect's thread. The limit events are counted
 * and its error noted in the C struct by the asynchronous events' thread ({@link JniAsyncEvents}).
 */
final class JniSharedReceiveQueue implements SharedReceiveQueue {
    private final JniProtectionDomain pd;
    private final long handle;
    private final int capacity;
    private final int maxSge;
    private int attached;
    /** {@link #limitEvents()} once closed (the C struct is gone). */
    private long limitEventsAtClose;
    /** {@link #failed()} once closed. */
    private boolean failedAtClose;
    private volatile boolean closed;

    private WorkRequestList lastList;
    private long lastAddress;

    JniSharedReceiveQueue(JniProtectionDomain pd, long handle) {
        this.pd = pd;
        this.handle = handle;
        this.capacity = Native.srqCapacity(handle);
        this.maxSge = Native.srqMaxSge(handle);
    }

    long handle() {
        return handle;
    }

    @Override
    public ProtectionDomain pd() {
        return pd;
    }

    @Override
    public int capacity() {
        return capacity;
    }

    @Override
    public int maxSge() {
        return maxSge;
    }

    @Override
    public int postRecv(WorkRequestList wrs, int offset, int count) {
        if (closed || offset < 0 || count < 0 || offset + count > wrs.capacity()) {
            wrs.badIndex(offset);
            return closed ? -Errno.EBADF : -Errno.EINVAL;
        }
        if (wrs != lastList) {
            lastAddress = Native.directBufferAddress(wrs.memory());
            lastList = wrs;
        }
        long result = Native.postSrqRecv(handle, lastAddress, wrs.slotSize(), offset, count);
        if (result != 0) {
            wrs.badIndex(Native.badIndex(result));
            return Native.errno(result);
        }
        wrs.badIndex(-1);
        return 0;
    }

    @Override
    public void setLimit(int limit) throws VerbsException {
        if (closed) {
            throw new VerbsException("ibv_modify_srq", Errno.EBADF, "shared receive queue closed");
        }
        SharedReceiveQueue.checkLimit(limit, capacity);
        int rc = Native.modifySrqLimit(handle, limit);
        if (rc < 0) {
            throw new VerbsException("ibv_modify_srq", -rc, "srq_limit " + limit);
        }
    }

    @Override
    public long limitEvents() {
        return closed ? limitEventsAtClose : Native.srqLimitEvents(handle);
    }

    @Override
    public boolean failed() {
        return closed ? failedAtClose : Native.srqFailed(handle);
    }

    synchronized void attach() throws VerbsException {
        if (closed) {
            throw new VerbsException("rdma_create_qp", Errno.EBADF, "shared receive queue closed");
        }
        attached++;
    }

    synchronized void detach() {
        attached--;
    }

    @Override
    public void close() throws VerbsException {
        synchronized (this) {
            if (closed) {
                return;
            }
            if (attached > 0) {
                throw new VerbsException("ibv_destroy_srq", Errno.EBUSY, attached + " queue pairs use it");
            }
            long events = Native.srqLimitEvents(handle);
            boolean failed = Native.srqFailed(handle);
            int rc = Native.destroySrq(handle);
            if (rc < 0) {
                throw new VerbsException("ibv_destroy_srq", -rc);
            }
            limitEventsAtClose = events;
            failedAtClose = failed;
            closed = true;
            lastList = null;
        }
        pd.release();
    }

    @Override
    public String toString() {
        return "srq of " + capacity + " receives on " + pd.jniDevice().name() + (closed ? " (closed)" : "");
    }
}
