package org.nettyrdma.channel;

import org.nettyrdma.verbs.MemoryRegion;
import org.nettyrdma.verbs.ProtectionDomain;
import org.nettyrdma.verbs.SharedReceiveQueue;
import org.nettyrdma.verbs.VerbsException;
import org.nettyrdma.verbs.WorkRequestList;

/**
 * A loop's shared receive queue and its buffers (docs/srq-design.md, sections 1 and 2): receives of one buffer size,
 * posted for the connections that reserved them (with {@link RdmaIoHandlerConfig#setSharedReceiveQueue}). Event loop
 * only.
 *
 * <p>Accounting: connections reserve receives ({@link #tryReserve}, at least {@link CreditWindow#FLOOR} each, their
 * {@link CreditWindow#reservation} as it moves) and the pool keeps {@link #target()} = reserved + margin posted
 * ({@link #refill()}). A receive a message consumed completes on the loop's completion queue; {@link #take} hands its
 * buffer over and counts it out of {@link #posted()}. Every honest message consumes a receive its sender had a credit
 * for, and a connection's credits never exceed its reservation, so with refill caught up the queue is never empty
 * (invariant I2).
 *
 * <p>A receive's wr_id: upper 32 bits 0 (the loop's pools, not a registration), bit 31 as every receive, the pool's
 * index in bits 24..30, the slot in bits 0..23.
 */
final class ReceivePool implements AutoCloseable {
    /** Pools a loop may have: the index has 7 bits. */
    static final int MAX_POOLS = 128;
    /** Slots a pool may have: the slot has 24 bits. */
    static final int MAX_SLOTS = 1 << 24;
    /** Receives posted by one {@code ibv_post_srq_recv}. */
    static final int POST_BATCH = 32;
    /** Taken buffers kept for the next refill instead of going back to the allocator. */
    static final int MAX_SPARES = 64;

    private final SharedReceiveQueue srq;
    private final ProtectionDomain pd;
    private final RdmaByteBufAllocator alloc;
    private final int bufferSize;
    private final long wrIdBase;
    private final WorkRequestList wrs = new WorkRequestList(POST_BATCH, 1);
    /** The buffer of each slot while it is posted, else null. */
    private final RdmaByteBuf[] bufs;
    /** Free slots, a stack. */
    private final int[] free;
    private int freeCount;
    /** Buffers taken back ({@link #recycle}), posted again before new ones are allocated. */
    private final RdmaByteBuf[] spares;
    private int spareCount;
    private int reserved;
    private int held;
    private int posted;
    private boolean closed;
    /** The device reported the queue in error, and the loop retired the pool ({@link #retire}). */
    private boolean failed;

    /**
     * @param srq the queue, owned by the pool from now on
     * @param slots the most receives the pool posts: at most the queue's capacity and {@link #MAX_SLOTS}
     * @param index this pool's index among its loop's ({@code 0 .. MAX_POOLS - 1})
     */
    ReceivePool(SharedReceiveQueue srq, int slots, RdmaByteBufAllocator alloc, int bufferSize, int index) {
        if (index < 0 || index >= MAX_POOLS) {
            throw new IllegalArgumentException("pool index " + index + " outside 0.." + (MAX_POOLS - 1));
        }
        if (slots < 1 || slots > Math.min(srq.capacity(), MAX_SLOTS)) {
            throw new IllegalArgumentException(slots + " slots in a shared receive queue of " + srq.capacity());
        }
        this.srq = srq;
        pd = srq.pd();
        this.alloc = alloc;
        this.bufferSize = bufferSize;
        wrIdBase = ConnectionResources.RECV_BIT | (long) index << 24;
        bufs = new RdmaByteBuf[slots];
        free = new int[slots];
        for (int i = 0; i < slots; i++) {
            free[i] = slots - 1 - i; // slot 0 on top
        }
        freeCount = slots;
        spares = new RdmaByteBuf[Math.min(slots, MAX_SPARES)];
    }

    /** Whether {@code wrId} is a receive of a loop's pool (not a registration's work request). */
    static boolean isPoolWrId(long wrId) {
        return wrId >>> 32 == 0;
    }

    /** The index of the pool that posted the receive {@code wrId}. */
    static int poolIndex(long wrId) {
        return (int) (wrId >>> 24) & (MAX_POOLS - 1);
    }

    /** Receives a reservation of {@code reserved} keeps posted beyond it: max(16, reserved / 16). */
    static int margin(int reserved) {
        return Math.max(16, reserved / 16);
    }

    /**
     * The receives the pool keeps posted: what is reserved, less the buffers connections hold with a message not yet
     * read (each stands for a credit its peer does not have), plus the margin.
     */
    int target() {
        return Math.max(0, reserved - held) + margin(reserved);
    }

    /**
     * A connection holds one more ({@code +1}) or one fewer ({@code -1}) of this pool's buffers with a message its
     * pipeline has not read: that message used a receive of its reservation, so the pool does not post another for it
     * until it is read (else unread messages would cost a second buffer each).
     */
    void held(int delta) {
        held += delta;
    }

    /** The shared receive queue, for the QPs that consume its receives. */
    SharedReceiveQueue queue() {
        return srq;
    }

    int bufferSize() {
        return bufferSize;
    }

    /** Where the pool's receive buffers come from. */
    RdmaByteBufAllocator allocator() {
        return alloc;
    }

    /** This pool's index among its loop's (in its receives' wr_ids). */
    int index() {
        return poolIndex(wrIdBase);
    }

    int reserved() {
        return reserved;
    }

    int posted() {
        return posted;
    }

    /**
     * The registered bytes of this pool's buffers that no connection's reservation counts: receives posted beyond what
     * is reserved (the margin, and a reservation that came down before messages consumed the excess) and the spares.
     * The loop counts them with its own registered bytes ({@link RdmaIoHandler#counters()}).
     */
    long unreservedBytes() {
        return (long) Math.max(0, posted + held + spareCount - reserved) * alloc.slotSize(bufferSize);
    }

    int capacity() {
        return bufs.length;
    }

    /**
     * Reserves {@code n} receives for a connection if the target stays within the queue's capacity; returns whether it
     * did. The caller posts them with {@link #refill()}.
     */
    boolean tryReserve(int n) {
        if (n < 0) {
            throw new IllegalArgumentException("reserve " + n);
        }
        long after = (long) reserved + n;
        if (closed || after + margin((int) Math.min(after, Integer.MAX_VALUE)) > bufs.length) {
            return false;
        }
        reserved = (int) after;
        return true;
    }

    /** Gives back {@code n} reserved receives (a connection's reservation went down, or it ended). */
    void release(int n) {
        if (n < 0 || n > reserved) {
            throw new IllegalArgumentException("release " + n + " of " + reserved + " reserved");
        }
        reserved -= n;
    }

    /**
     * Receives the pool may lack before {@link #refillLagging()} posts: half the margin. Posting a consumed message's
     * receive at once cost one {@code ibv_post_srq_recv} (and a JNI crossing) per message; this way a pool posts once
     * every {@code lag()} messages, in one chain. The honest peers' credits stay covered: they hold at most
     * {@code reserved - held}, and the pool never lacks more than {@code lag() - 1} of {@code reserved - held + margin};
     * the other half of the margin stays for receives a QP's teardown may lose (docs/srq-design.md, section 1).
     */
    int lag() {
        return margin(reserved) / 2;
    }

    /**
     * {@link #refill()} once the pool lacks {@link #lag()} receives or more; else nothing (returns 0). After a message
     * was consumed or lent; a new reservation is posted at once ({@link #refill()}), before its peer can use it.
     */
    int refillLagging() throws VerbsException {
        return lagging() ? refill() : 0;
    }

    /** Whether the pool lacks {@link #lag()} receives or more. */
    boolean lagging() {
        return target() - posted >= lag();
    }

    /**
     * Posts receives until {@link #posted()} reaches {@link #target()} (none beyond it: a target that went down is
     * reached as messages consume the excess). Returns how many it posted, or {@code -errno} if the queue refused
     * (what it posted before stays counted).
     *
     * @throws VerbsException if a new buffer's region could not be registered with the queue's protection domain
     */
    int refill() throws VerbsException {
        int want = Math.min(target(), bufs.length) - posted;
        int done = 0;
        while (want > 0 && !closed && !failed) {
            int n = Math.min(want, POST_BATCH);
            for (int i = 0; i < n; i++) {
                int slot = free[--freeCount];
                RdmaByteBuf buf = spareCount > 0 ? spares[--spareCount] : alloc.untrackedBuffer(bufferSize, bufferSize);
                MemoryRegion mr;
                try {
                    mr = buf.region().memoryRegion(pd);
                } catch (VerbsException | RuntimeException e) {
                    buf.release();
                    free[freeCount++] = slot;
                    for (int j = 0; j < i; j++) { // prepared, not posted
                        int s = (int) (wrs.wrId(j) & (MAX_SLOTS - 1));
                        recycle(bufs[s]);
                        bufs[s] = null;
                        free[freeCount++] = s;
                    }
                    throw e;
                }
                bufs[slot] = buf;
                wrs.setRecv(i, wrIdBase | slot).addSge(i, mr.address() + buf.regionOffset(), bufferSize, mr.lkey());
            }
            int rc = srq.postRecv(wrs, 0, n);
            int ok = rc == 0 ? n : Math.max(0, wrs.badIndex());
            for (int i = ok; i < n; i++) { // not posted: back to the free slots and the spares
                int slot = (int) (wrs.wrId(i) & (MAX_SLOTS - 1));
                recycle(bufs[slot]);
                bufs[slot] = null;
                free[freeCount++] = slot;
            }
            posted += ok;
            done += ok;
            want -= n;
            if (rc != 0) {
                return rc;
            }
        }
        return done;
    }

    /**
     * The buffer of the receive {@code wrId} (of this pool) that completed: the caller owns it now (it reads it, lends
     * it, or {@link #recycle}s it). Its slot is free again.
     */
    RdmaByteBuf take(long wrId) {
        int slot = (int) (wrId & (MAX_SLOTS - 1));
        RdmaByteBuf buf = slot < bufs.length ? bufs[slot] : null;
        if (buf == null || poolIndex(wrId) != poolIndex(wrIdBase)) {
            throw new IllegalStateException("receive 0x" + Long.toHexString(wrId) + " is not posted by this pool");
        }
        bufs[slot] = null;
        free[freeCount++] = slot;
        posted--;
        return buf;
    }

    /** Whether {@code slot} has a receive posted (tests). */
    boolean isPosted(int slot) {
        return bufs[slot] != null;
    }

    /** Whether the receive {@code wrId} is one of this pool's and posted (not taken). */
    boolean isPostedReceive(long wrId) {
        int slot = (int) (wrId & (MAX_SLOTS - 1));
        return poolIndex(wrId) == poolIndex(wrIdBase) && slot < bufs.length && bufs[slot] != null;
    }

    /** The wr_id of {@code slot}'s receive. */
    long wrId(int slot) {
        return wrIdBase | slot;
    }

    /** Takes back a buffer of this pool's size that was taken and is done with: it is posted again before new ones. */
    void recycle(RdmaByteBuf buf) {
        if (!keep(buf)) {
            buf.release();
        }
    }

    /**
     * Keeps {@code buf} as a spare if it is of this pool's size and there is room (a lent buffer released on the loop,
     * or one {@link #recycle}d); returns whether it did. The caller frees a buffer not kept.
     */
    boolean keep(RdmaByteBuf buf) {
        if (closed || spareCount == spares.length || buf.capacity() != bufferSize) {
            return false;
        }
        buf.clear();
        spares[spareCount++] = buf;
        return true;
    }

    /** Whether the device reported the queue in error ({@link SharedReceiveQueue#failed}); a call into the provider. */
    boolean queueFailed() {
        return !closed && srq.failed();
    }

    /**
     * The loop found the queue in error ({@link #queueFailed}): nothing is posted to it any more; its connections fail
     * at their next tick ({@link #failed}), and no new connection takes the pool.
     */
    void retire() {
        failed = true;
    }

    /** Whether the loop retired the pool because its queue failed. */
    boolean failed() {
        return failed;
    }

    /**
     * Destroys the queue (its QPs must be gone: EBUSY otherwise, and the pool stays open) and frees every buffer: the
     * posted ones, dropped with the queue without completions, and the spares.
     */
    @Override
    public void close() throws VerbsException {
        if (closed) {
            return;
        }
        srq.close();
        closed = true;
        for (int i = 0; i < bufs.length; i++) {
            if (bufs[i] != null) {
                bufs[i].release();
                bufs[i] = null;
            }
        }
        while (spareCount > 0) {
            spares[--spareCount].release();
            spares[spareCount] = null;
        }
        posted = 0;
    }
}
