package org.nettyrdma.channel;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.CompositeByteBuf;
import io.netty.channel.EventLoop;
import io.netty.channel.RecvByteBufAllocator;
import org.nettyrdma.verbs.VerbsException;

/**
 * The receive side of one connection: what arrived, in order, until the pipeline takes it, in the slots of its
 * {@link ReceiveSlots} (its own queue pair's receives, or buffers of its loop's shared receive queue).
 *
 * <p>Lending (docs/protocol.md, "Receiving"): a DATA buffer goes to the pipeline as it is, and its slot goes on
 * without it (its own receive is posted again at once with a fresh buffer), so the peer's credit comes back whatever
 * the application does with the buffer, as Netty's io_uring transport does with its buffer ring. Lent bytes are
 * bounded per channel and per event loop ({@link LendLimits}); past a bound the bytes are copied out and the buffer
 * receives again. Backpressure comes only from reading: a slot whose message the pipeline has not read yet does not
 * receive again.
 *
 * <p>Event loop only, except {@link #returned(int)}: a lent buffer is released on any thread.
 */
final class ReceiveQueue implements RdmaByteBuf.LendHook {
    private static final int FIN = -1;
    /** A pending entry in the WRITE ring (protocol v2): offset and end are ring offsets. */
    private static final int RING = -2;
    /** A pending READ rendezvous (protocol v2): its bytes come from {@link #rendezvous}, chunk by chunk. */
    private static final int RENDEZVOUS = -3;

    /** The bounds of lent bytes and where they are counted: the channel's and the loop's counters. */
    static final class LendLimits {
        final RdmaCounters channel;
        final long channelLimit;
        final RdmaCounters loop;
        final long loopLimit;

        LendLimits(RdmaCounters channel, long channelLimit, RdmaCounters loop, long loopLimit) {
            this.channel = channel;
            this.channelLimit = channelLimit;
            this.loop = loop;
            this.loopLimit = loopLimit;
        }
    }

    private final ReceiveSlots slots;
    private final LendLimits limits;
    private final EventLoop loop;

    // received, not yet delivered, in order: slot, offset, end (a FIN: slot -1)
    private final int[] pendSlot;
    private final int[] pendOffset;
    private final int[] pendEnd;
    private int pendHead;
    private int pendCount;
    /** DATA receives given back since {@link #takeReposted()}: credits the peer is owed. */
    private int reposted;
    private boolean closed;
    /** Protocol v2: this side's WRITE ring, whose messages wait here in order with the SENDs' ones; or null. */
    private LocalRing ring;
    /** Protocol v2: the READ rendezvous announced to this side, pulled into chunks; or null. */
    private RendezvousReceives rendezvous;

    /** The receive side over {@code slots}, of which at most {@code count} hold messages at once. */
    ReceiveQueue(ReceiveSlots slots, int count, LendLimits limits, EventLoop loop) {
        this.slots = slots;
        this.limits = limits;
        this.loop = loop;
        pendSlot = new int[count + 1];
        pendOffset = new int[count + 1];
        pendEnd = new int[count + 1];
    }

    /** The receive buffer of {@code slot}, to read a message's header from (event loop only). */
    ByteBuf buffer(int slot) {
        return slots.buffer(slot);
    }

    /** The message in {@code slot} was consumed: its buffer receives again. */
    void repost(int slot) throws VerbsException {
        slots.consumed(slot);
    }

    /** Queues DATA received in {@code slot}, bytes {@code [offset, end)}, for the pipeline. */
    void enqueue(int slot, int offset, int end) {
        int i = (pendHead + pendCount) % pendSlot.length;
        pendSlot[i] = slot;
        pendOffset[i] = offset;
        pendEnd[i] = end;
        pendCount++;
    }

    /** Protocol v2: the connection's WRITE ring, whose messages are queued with {@link #enqueueRing}. */
    void attachRing(LocalRing ring) {
        this.ring = ring;
    }

    /** Queues a message the peer wrote into the ring, ring bytes {@code [offset, end)}, in order with the SENDs'. */
    void enqueueRing(int offset, int end) {
        enqueue(RING, offset, end);
    }

    /** Protocol v2: the READ rendezvous' receiving table, whose rendezvous are queued with {@link #enqueueRendezvous}. */
    void attachRendezvous(RendezvousReceives rendezvous) {
        this.rendezvous = rendezvous;
    }

    /** Queues a rendezvous the peer announced (its RNDV is in {@link #rendezvous}), in order with the SENDs'. */
    void enqueueRendezvous() {
        enqueue(RENDEZVOUS, 0, 0);
    }

    /** Messages received and not yet delivered (each holds a credit of the peer's until then). */
    int pendingMessages() {
        return pendCount;
    }

    /** Queues the peer's FIN behind the data before it. */
    void enqueueFin() {
        enqueue(FIN, 0, 0);
    }

    boolean hasPending() {
        return pendCount > 0;
    }

    /** Whether the head is data the pipeline can read now (a rendezvous only once its next chunk has been READ). */
    boolean hasPendingData() {
        if (pendCount == 0) {
            return false;
        }
        int slot = pendSlot[pendHead];
        return slot != FIN && (slot != RENDEZVOUS || rendezvous.headReady());
    }

    boolean finAtHead() {
        return pendCount > 0 && pendSlot[pendHead] == FIN;
    }

    /** Takes the FIN at the head. */
    void takeFin() {
        dequeue();
    }

    private void dequeue() {
        pendHead = (pendHead + 1) % pendSlot.length;
        pendCount--;
    }

    /**
     * The next buffer for the pipeline, as a socket read gives it: the receive buffer itself when the allocator's guess
     * covers what is left of it and the lending bounds allow (its slot goes on without it), otherwise a copy of as much
     * as a buffer of {@code copyTo} takes (the buffer receives again once its message is consumed). With
     * {@code oneRead} (auto-read off: a {@code read()} gives the pipeline one buffer) a lent buffer comes with the
     * messages after it that can be lent whole within the guess, in a composite, as a socket read fills one buffer
     * with all that arrived up to the guess.
     */
    ByteBuf nextRead(RecvByteBufAllocator.Handle allocHandle, ByteBufAllocator copyTo, boolean oneRead)
            throws VerbsException {
        int slot = pendSlot[pendHead];
        int offset = pendOffset[pendHead];
        int end = pendEnd[pendHead];
        int remaining = end - offset;
        if (slot == RING) {
            return copyFromRing(allocHandle, copyTo, offset, remaining);
        }
        if (slot == RENDEZVOUS) {
            return takeRendezvousChunk(allocHandle);
        }
        if (allocHandle.guess() >= remaining) {
            ByteBuf lent = lend(slot, offset, end);
            if (lent != null) {
                dequeue();
                reposted++;
                int n = remaining;
                if (oneRead) {
                    lent = lendFollowing(lent, allocHandle.guess() - remaining, copyTo);
                    n = lent.readableBytes();
                    if (pendCount > 0 && pendSlot[pendHead] >= 0) {
                        // DATA waits that did not fit whole: a socket's read would have filled the buffer, which is
                        // what tells the allocator to guess larger (the bytes are whole messages, never exactly that)
                        n = Math.max(n, allocHandle.guess());
                    }
                }
                allocHandle.attemptedBytesRead(n);
                allocHandle.lastBytesRead(n);
                allocHandle.incMessagesRead(1);
                return lent;
            }
        }
        ByteBuf buf = allocHandle.allocate(copyTo);
        int n = Math.min(buf.writableBytes(), remaining);
        allocHandle.attemptedBytesRead(buf.writableBytes());
        buf.writeBytes(slots.buffer(slot), offset, n);
        limits.channel.receiveCopies++;
        limits.channel.receiveCopiedBytes += n;
        limits.loop.receiveCopies++;
        limits.loop.receiveCopiedBytes += n;
        if (n == remaining) {
            dequeue();
            try {
                repost(slot);
            } catch (VerbsException e) {
                buf.release();
                throw e;
            }
            reposted++;
        } else {
            pendOffset[pendHead] = offset + n;
        }
        allocHandle.lastBytesRead(n);
        allocHandle.incMessagesRead(1);
        return buf;
    }

    /**
     * {@code first}, lent, with the DATA messages queued after it lent and added behind it in a composite of
     * {@code alloc}, while each fits whole in {@code room} bytes and the lending bounds allow; {@code first} alone if
     * none does.
     */
    private ByteBuf lendFollowing(ByteBuf first, int room, ByteBufAllocator alloc) throws VerbsException {
        CompositeByteBuf gathered = null;
        ByteBuf lent = null; // lent, not yet in the composite
        try {
            while (pendCount > 0 && pendSlot[pendHead] >= 0) { // DATA: not a FIN, a ring message or a rendezvous
                int offset = pendOffset[pendHead];
                int end = pendEnd[pendHead];
                if (end - offset > room) {
                    break;
                }
                lent = lend(pendSlot[pendHead], offset, end);
                if (lent == null) {
                    break;
                }
                dequeue();
                reposted++;
                room -= end - offset;
                if (gathered == null) {
                    gathered = alloc.compositeDirectBuffer(pendCount + 2).addComponent(true, first);
                }
                gathered.addComponent(true, lent);
                lent = null;
            }
        } catch (Throwable t) {
            // a receive not posted again (the connection fails), no memory for the composite: what was lent goes back
            if (lent != null) {
                lent.release();
            }
            (gathered != null ? gathered : first).release();
            throw t;
        }
        return gathered != null ? gathered : first;
    }

    /**
     * Protocol v2: copies the ring message at the head (from ring offset {@code offset}, {@code remaining} bytes) into a
     * buffer of {@code copyTo}; once all of it is copied its ring space is freed (in ring order: messages are read in
     * order) and its credit owed. The ring is not lent to the pipeline: a peer that writes outside the space it was
     * given could otherwise change bytes the application holds.
     */
    private ByteBuf copyFromRing(RecvByteBufAllocator.Handle allocHandle, ByteBufAllocator copyTo, int offset,
                                 int remaining) {
        ByteBuf buf = allocHandle.allocate(copyTo);
        int n = Math.min(buf.writableBytes(), remaining);
        allocHandle.attemptedBytesRead(buf.writableBytes());
        ring.copyTo(buf, offset, n);
        limits.channel.receiveCopies++;
        limits.channel.receiveCopiedBytes += n;
        limits.loop.receiveCopies++;
        limits.loop.receiveCopiedBytes += n;
        if (n == remaining) {
            dequeue();
            ring.space.freeOldest();
            reposted++; // its receive was posted again when the notification came: the credit is owed now
        } else {
            pendOffset[pendHead] = offset + n;
        }
        allocHandle.lastBytesRead(n);
        allocHandle.incMessagesRead(1);
        return buf;
    }

    /**
     * Protocol v2: the head rendezvous' next chunk, READ into a buffer of this side's allocator, as it is (no copy,
     * whatever the allocator's guess: it is the pipeline's buffer, no receive is behind it); once its last chunk is
     * taken, its credit is owed.
     */
    private ByteBuf takeRendezvousChunk(RecvByteBufAllocator.Handle allocHandle) {
        ByteBuf chunk = rendezvous.takeChunk();
        int n = chunk.readableBytes();
        if (rendezvous.headDelivered()) {
            dequeue();
            reposted++; // its receive was posted again when the RNDV came: the credit is owed now
        }
        allocHandle.attemptedBytesRead(n);
        allocHandle.lastBytesRead(n);
        allocHandle.incMessagesRead(1);
        return chunk;
    }

    /**
     * The buffer of {@code slot}, lent with {@code [offset, end)}, after its slot went on without it; or {@code null}
     * if the lending bounds or memory don't allow that (the caller copies instead).
     */
    private ByteBuf lend(int slot, int offset, int end) throws VerbsException {
        RdmaByteBuf buf = slots.buffer(slot);
        int bytes = buf.capacity();
        if (limits.channel.lentBytes.get() + bytes > limits.channelLimit
                || limits.loop.lentBytes.get() + bytes > limits.loopLimit || !slots.handOver(slot)) {
            return null;
        }
        // counted before the pipeline sees it; only one thread (this loop) adds, so the bounds hold
        limits.channel.lentBytes.addAndGet(bytes);
        limits.loop.lentBytes.addAndGet(bytes);
        return RdmaByteBufAllocator.trackLeaks(buf.lend(this, bytes, offset, end));
    }

    @Override
    public boolean reclaim(RdmaByteBuf buf) {
        // on the loop only: the slots' spares are the loop's
        return loop.inEventLoop() && !closed && slots.keep(buf);
    }

    @Override
    public void returned(int bytes) {
        limits.channel.lentBytes.addAndGet(-bytes);
        limits.loop.lentBytes.addAndGet(-bytes);
    }

    /** Receives posted again for DATA since the last call: credits the peer is owed for them. */
    int takeReposted() {
        int n = reposted;
        reposted = 0;
        return n;
    }

    /** Drops what the pipeline has not read (input shut down, or the channel closed), posting those receives again. */
    void discardPending() throws VerbsException {
        if (rendezvous != null) {
            rendezvous.discard();
        }
        while (pendCount > 0) {
            int slot = pendSlot[pendHead];
            dequeue();
            if (slot == RING) {
                ring.space.freeOldest();
                reposted++;
            } else if (slot == RENDEZVOUS) {
                reposted++; // its DONE is owed by the table's discard
            } else if (slot != FIN) {
                repost(slot);
                reposted++;
            }
        }
    }

    /**
     * Frees every buffer the queue holds; lent buffers are the application's to release. Only after the QP is
     * destroyed (or was never given the receives): a posted buffer must not go back to the pool under a receive.
     */
    void close() {
        if (closed) {
            return;
        }
        closed = true;
        pendCount = 0;
        slots.close();
        if (rendezvous != null) {
            rendezvous.close(); // no READ writes its chunks any more either
        }
    }
}
