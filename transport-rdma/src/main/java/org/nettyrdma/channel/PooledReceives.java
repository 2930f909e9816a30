package org.nettyrdma.channel;

import org.nettyrdma.verbs.VerbsException;

/**
 * A connection's receives from its loop's shared receive queue ({@link ReceivePool}, docs/srq-design.md): the buffer
 * of a shared receive that completed for this connection is held in a slot of its own until the message in it is
 * consumed, then goes back to the pool, which posts a receive for it (in a chain with others once it lacks a few:
 * {@link ReceivePool#lag()}); a lent buffer leaves its slot, and the pool posts a new one the same way. There are as
 * many slots as messages the peer may have sent unread (the most credits it can hold): one more arriving is a protocol
 * violation. Used where {@link RdmaIoHandlerConfig#setSharedReceiveQueue} is on. Event loop only.
 */
final class PooledReceives implements ReceiveSlots {
    private final ReceivePool pool;
    private final RdmaByteBuf[] held;
    /** Free slots, a stack. */
    private final int[] free;
    private int freeCount;
    private boolean closed;

    /** Receives from {@code pool}, at most {@code count} messages held at once. */
    PooledReceives(ReceivePool pool, int count) {
        this.pool = pool;
        held = new RdmaByteBuf[count];
        free = new int[count];
        for (int i = 0; i < count; i++) {
            free[i] = count - 1 - i; // slot 0 on top
        }
        freeCount = count;
    }

    /**
     * Takes the buffer of the pool's receive {@code wrId}, which completed for this connection, into a free slot and
     * returns the slot; or -1, the buffer given back to the pool, if every slot holds a message already (the peer sent
     * more than its credits allowed).
     */
    int hold(long wrId) {
        RdmaByteBuf buf = pool.take(wrId);
        if (freeCount == 0 || closed) {
            pool.recycle(buf);
            return -1;
        }
        int slot = free[--freeCount];
        held[slot] = buf;
        pool.held(1);
        return slot;
    }

    @Override
    public RdmaByteBuf buffer(int slot) {
        return held[slot];
    }

    @Override
    public void consumed(int slot) throws VerbsException {
        pool.recycle(release(slot));
        refill();
    }

    @Override
    public boolean handOver(int slot) throws VerbsException {
        RdmaByteBuf buf = release(slot);
        try {
            refill();
        } catch (VerbsException | RuntimeException e) {
            pool.recycle(buf); // not handed over: the channel fails, and the buffer is no one's but the pool's
            throw e;
        }
        return true;
    }

    /**
     * Posts the pool's receives once the messages consumed since its last post reach its lag
     * ({@link ReceivePool#refillLagging}): the caller owes the message's credit next, and the margin covers a credit
     * that goes back before its receive is posted again, so with every connection's credits within its reservation the
     * queue never runs empty on honest traffic, which matters where the device has no RNR retry (iWARP: an empty queue
     * ends the connection).
     */
    private void refill() throws VerbsException {
        int rc = pool.refillLagging();
        if (rc < 0) {
            throw new VerbsException("ibv_post_srq_recv", -rc);
        }
    }

    private RdmaByteBuf release(int slot) {
        RdmaByteBuf buf = held[slot];
        if (buf == null) {
            throw new IllegalStateException("receive slot " + slot + " holds no message");
        }
        held[slot] = null;
        free[freeCount++] = slot;
        pool.held(-1);
        return buf;
    }

    @Override
    public boolean keep(RdmaByteBuf buf) {
        return pool.keep(buf);
    }

    /** Gives the buffers of the messages not consumed back to the pool. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        for (int slot = 0; slot < held.length; slot++) {
            if (held[slot] != null) {
                pool.recycle(release(slot));
            }
        }
    }
}
