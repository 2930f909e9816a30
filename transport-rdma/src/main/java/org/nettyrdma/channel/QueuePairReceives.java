package org.nettyrdma.channel;

import io.netty.util.internal.logging.InternalLogger;
import io.netty.util.internal.logging.InternalLoggerFactory;
import org.nettyrdma.verbs.MemoryRegion;
import org.nettyrdma.verbs.ProtectionDomain;
import org.nettyrdma.verbs.QueuePair;
import org.nettyrdma.verbs.VerbsException;
import org.nettyrdma.verbs.WorkRequestList;

/**
 * A connection's own receives: one posted in each slot of its queue pair, each into a buffer of its own from a
 * registered pool. A slot whose buffer is lent gets a fresh one (a spare first: a lent buffer released on the loop is
 * kept as one) and is posted again at once; a consumed message's buffer is posted again as it is. Event loop only.
 */
final class QueuePairReceives implements ReceiveSlots {
    private static final InternalLogger logger = InternalLoggerFactory.getInstance(QueuePairReceives.class);
    /** Released lent buffers kept to be posted again (released on the loop: no pool round trip). */
    static final int MAX_SPARES = 8;

    private final QueuePair qp;
    private final ProtectionDomain pd;
    private final RdmaByteBufAllocator alloc;
    private final int size;
    private final long wrIdBase;
    private final RdmaCounters channel;
    private final RdmaCounters loop;
    private final WorkRequestList wrs = new WorkRequestList(1, 1);
    /** The buffer of each slot: posted, or received and not yet consumed. */
    private final RdmaByteBuf[] bufs;
    private final RdmaByteBuf[] spares = new RdmaByteBuf[MAX_SPARES];
    private int spareCount;
    private boolean closed;

    /**
     * Takes a buffer of {@code size} bytes for each of {@code count} slots of {@code qp} (work request ids
     * {@code wrIdBase | slot}); {@link #postAll()} posts them. On failure nothing stays allocated.
     */
    QueuePairReceives(QueuePair qp, ProtectionDomain pd, RdmaByteBufAllocator alloc, int size, int count,
                      long wrIdBase, RdmaCounters channel, RdmaCounters loop) {
        this.qp = qp;
        this.pd = pd;
        this.alloc = alloc;
        this.size = size;
        this.wrIdBase = wrIdBase;
        this.channel = channel;
        this.loop = loop;
        bufs = new RdmaByteBuf[count];
        boolean ok = false;
        try {
            for (int slot = 0; slot < count; slot++) {
                bufs[slot] = alloc.untrackedBuffer(size, size);
            }
            ok = true;
        } finally {
            if (!ok) {
                close();
            }
        }
    }

    /** Posts every slot's receive. If it fails, the caller destroys the QP, then {@link #close()}s these receives. */
    void postAll() throws VerbsException {
        for (int slot = 0; slot < bufs.length; slot++) {
            post(slot, bufs[slot]);
        }
    }

    private void post(int slot, RdmaByteBuf buf) throws VerbsException {
        MemoryRegion mr = buf.region().memoryRegion(pd);
        wrs.setRecv(0, wrIdBase | slot).addSge(0, mr.address() + buf.regionOffset(), size, mr.lkey());
        int rc = qp.postRecv(wrs, 0, 1);
        if (rc < 0) {
            throw new VerbsException("ibv_post_recv", -rc);
        }
        channel.workRequestsPosted++;
        loop.workRequestsPosted++;
    }

    @Override
    public RdmaByteBuf buffer(int slot) {
        return bufs[slot];
    }

    @Override
    public void consumed(int slot) throws VerbsException {
        post(slot, bufs[slot]);
    }

    @Override
    public boolean handOver(int slot) throws VerbsException {
        RdmaByteBuf fresh = null;
        try {
            fresh = spareCount > 0 ? spares[--spareCount] : alloc.untrackedBuffer(size, size);
            fresh.region().memoryRegion(pd); // registers a new pool region here, or fails before anything changed
        } catch (VerbsException | OutOfMemoryError e) {
            if (fresh != null) {
                fresh.release(); // allocated, not registered (memlock limit, max_mr)
            }
            logger.debug("no fresh receive buffer ({}); copying the received bytes instead", e.toString());
            return false;
        }
        RdmaByteBuf lent = bufs[slot];
        bufs[slot] = fresh;
        try {
            post(slot, fresh);
        } catch (VerbsException e) {
            lent.release(); // not handed over: the channel fails, close() frees the fresh one
            throw e;
        }
        return true;
    }

    @Override
    public boolean keep(RdmaByteBuf buf) {
        // a buffer the application resized goes back to the pool
        if (closed || spareCount == MAX_SPARES || buf.capacity() != size) {
            return false;
        }
        spares[spareCount++] = buf;
        return true;
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        while (spareCount > 0) {
            spares[--spareCount].release();
        }
        for (int i = 0; i < bufs.length; i++) {
            if (bufs[i] != null) {
                bufs[i].release();
                bufs[i] = null;
            }
        }
    }
}
