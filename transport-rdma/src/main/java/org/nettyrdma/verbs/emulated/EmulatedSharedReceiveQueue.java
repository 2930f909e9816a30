package org.nettyrdma.verbs.emulated;

import org.nettyrdma.verbs.Errno;
import org.nettyrdma.verbs.ProtectionDomain;
import org.nettyrdma.verbs.SharedReceiveQueue;
import org.nettyrdma.verbs.VerbsException;
import org.nettyrdma.verbs.WorkRequestList;

import java.util.ArrayDeque;

/**
 * A shared receive queue. Its monitor guards its receives; a QP that consumes one holds its own link's monitor first
 * and takes this one inside it (link, then queue: never the other way). A sender that found the queue empty and waits
 * (RNR) registers here; {@link #postRecv} resumes such senders after releasing this monitor, each under its own link.
 */
final class EmulatedSharedReceiveQueue implements SharedReceiveQueue {
    private final EmulatedDevice device;
    private final EmulatedProtectionDomain pd;
    private final int maxSge;
    /** Guarded by this. */
    final ReceiveRing ring;
    /** Senders stalled (RNR) on an empty queue, each at most once ({@link EmulatedQueuePair#srqWaiting}). */
    private final ArrayDeque<EmulatedQueuePair> waiters = new ArrayDeque<>();
    private int attached;
    private int limit;
    private long limitEvents;
    private volatile boolean failed;
    private boolean closed;

    EmulatedSharedReceiveQueue(EmulatedDevice device, EmulatedProtectionDomain pd, int maxWr, int maxSge) {
        this.device = device;
        this.pd = pd;
        this.maxSge = maxSge;
        this.ring = new ReceiveRing(maxWr, maxSge);
    }

    @Override
    public ProtectionDomain pd() {
        return pd;
    }

    EmulatedProtectionDomain emulatedPd() {
        return pd;
    }

    EmulatedDevice emulatedDevice() {
        return device;
    }

    @Override
    public int capacity() {
        return ring.size;
    }

    @Override
    public int maxSge() {
        return maxSge;
    }

    @Override
    public int postRecv(WorkRequestList wrs, int offset, int count) {
        int rc = 0;
        int stalled;
        synchronized (this) {
            if (closed || offset < 0 || count < 0 || offset + count > wrs.capacity()) {
                wrs.badIndex(offset);
                return closed ? -Errno.EBADF : -Errno.EINVAL;
            }
            int end = offset + count;
            for (int i = offset; i < end; i++) {
                rc = ring.enqueue(wrs, i, maxSge);
                if (rc != 0) {
                    wrs.badIndex(i);
                    break;
                }
            }
            if (rc == 0) {
                wrs.badIndex(-1);
            }
            stalled = waiters.size();
        }
        // each of the senders that waited when this post began tries again (it registers anew if it stalls again)
        for (int k = 0; k < stalled; k++) {
            EmulatedQueuePair sender;
            synchronized (this) {
                sender = waiters.poll();
                if (sender == null) {
                    break;
                }
                sender.srqWaiting = false;
            }
            sender.onSharedReceivePosted();
        }
        return rc;
    }

    /** A sender found the queue empty and waits for a receive (RNR); with this monitor held. */
    void addWaiter(EmulatedQueuePair sender) {
        if (!sender.srqWaiting && !closed) {
            sender.srqWaiting = true;
            waiters.add(sender);
        }
    }

    /** A QP took a receive; fires the armed limit event if fewer than the limit are left. This monitor held. */
    void consumed() {
        if (limit > 0 && ring.count() < limit) {
            limit = 0;
            limitEvents++;
        }
    }

    @Override
    public synchronized void setLimit(int limit) throws VerbsException {
        if (closed) {
            throw new VerbsException("ibv_modify_srq", Errno.EBADF, "shared receive queue closed");
        }
        SharedReceiveQueue.checkLimit(limit, ring.size);
        this.limit = limit;
    }

    @Override
    public synchronized long limitEvents() {
        return limitEvents;
    }

    @Override
    public boolean failed() {
        return failed;
    }

    /** {@link org.nettyrdma.verbs.FaultInjector#failSharedReceiveQueue}. */
    void fail() {
        failed = true;
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
            closed = true;
            ring.head = ring.tail;
            while (!waiters.isEmpty()) {
                waiters.poll().srqWaiting = false;
            }
        }
        pd.release();
        device.releaseSrq();
    }

    @Override
    public String toString() {
        return "srq on " + device.name() + " (" + ring.size + " receives)";
    }
}
