package org.nettyrdma.channel;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.UnpooledByteBufAllocator;
import io.netty.channel.EventLoop;
import io.netty.channel.FixedRecvByteBufAllocator;
import io.netty.channel.RecvByteBufAllocator;
import io.netty.channel.embedded.EmbeddedChannel;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.nettyrdma.verbs.ProtectionDomain;
import org.nettyrdma.verbs.VerbsException;
import org.nettyrdma.verbs.emulated.EmulatedProvider;

import java.nio.charset.StandardCharsets;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A connection's receive side over its loop's shared receive pool (docs/srq-design.md, step 7): messages held in the
 * connection's slots in order, lent or copied as with its own receives, their buffers back to the pool, a message
 * beyond the slots refused. The pool's receives are taken by wr_id here (the pool's bookkeeping, as ReceivePoolTest);
 * the transport does not use the pool yet.
 */
class PooledReceivesTest {
    private static final int SIZE = 1024;
    private static final int COUNT = 4;
    private ProtectionDomain pd;
    private RdmaByteBufAllocator alloc;
    private ReceivePool pool;
    private EmbeddedChannel loopOwner;
    private final RdmaCounters channel = new RdmaCounters();
    private final RdmaCounters loopCounters = new RdmaCounters();
    private int base;

    @BeforeEach
    void open() throws Exception {
        pd = EmulatedProvider.create().devices().get(0).allocPd();
        alloc = new RdmaByteBufAllocator(true);
        base = alloc.buffersInUse();
        pool = new ReceivePool(pd.createSharedReceiveQueue(1024, 1), 64, alloc, SIZE, 0);
        assertTrue(pool.tryReserve(COUNT));
        assertEquals(COUNT + 16, pool.refill());
        loopOwner = new EmbeddedChannel(); // an event loop this thread is in
    }

    @AfterEach
    void close() throws Exception {
        pool.close();
        assertEquals(base, alloc.buffersInUse(), "every buffer back: the pool's, the slots', the lent ones");
        alloc.deregister(pd);
        pd.close();
        loopOwner.finishAndReleaseAll();
    }

    private ReceiveQueue queue(PooledReceives slots, long lendLimit) {
        EventLoop loop = loopOwner.eventLoop();
        return new ReceiveQueue(slots, COUNT,
                new ReceiveQueue.LendLimits(channel, lendLimit, loopCounters, lendLimit), loop);
    }

    /** A message "arrives" in the pool's receive {@code i}: its bytes written, then held by the connection. */
    private int arrive(PooledReceives slots, int i, String text) {
        long wrId = pool.wrId(i);
        int slot = slots.hold(wrId);
        assertTrue(slot >= 0);
        RdmaByteBuf buf = slots.buffer(slot);
        buf.setCharSequence(RdmaProtocol.HEADER_LENGTH, text, StandardCharsets.US_ASCII);
        return slot;
    }

    private static RecvByteBufAllocator.Handle handle(int guess) {
        return new FixedRecvByteBufAllocator(guess).newHandle();
    }

    /** The buffer under a lent one (leak detection may wrap it). */
    private static ByteBuf underlying(ByteBuf lent) {
        return lent.unwrap() != null ? lent.unwrap() : lent;
    }

    /**
     * Lending a message's buffer posts the pool's receives first where it then lacks its lag; when the device refuses
     * that post, the lend fails (the channel fails with it) and the buffer goes back to the pool instead of to no one
     * (the check after each test counts it). Found by a review: the buffer was leaked.
     */
    @Test
    void aLendWhoseReceiveCannotBePostedFailsAndItsBufferGoesBackToThePool() throws Exception {
        PooledReceives slots = new PooledReceives(pool, COUNT);
        ReceiveQueue rq = queue(slots, SIZE);
        int a = arrive(slots, 0, "first");
        rq.enqueue(a, RdmaProtocol.HEADER_LENGTH, RdmaProtocol.HEADER_LENGTH + 5);
        for (int i = 1; i < pool.lag(); i++) { // other messages consumed: the lend makes the pool lack its lag
            pool.recycle(pool.take(pool.wrId(i)));
        }
        pool.queue().close(); // every post refused from now on (EBADF)
        VerbsException e = assertThrows(VerbsException.class,
                () -> rq.nextRead(handle(SIZE), UnpooledByteBufAllocator.DEFAULT, false));
        assertTrue(e.getMessage().contains("ibv_post_srq_recv"), e.getMessage());
        assertEquals(0, channel.lentBytes(), "nothing lent");
    }

    @Test
    void messagesAreReadInOrderLentOrCopiedAndTheirBuffersGoBackToThePool() throws Exception {
        PooledReceives slots = new PooledReceives(pool, COUNT);
        ReceiveQueue rq = queue(slots, SIZE); // one buffer may be lent at a time
        int h = RdmaProtocol.HEADER_LENGTH;
        int a = arrive(slots, 0, "first");
        int b = arrive(slots, 1, "second");
        assertNotSame(slots.buffer(a), slots.buffer(b));
        rq.enqueue(a, h, h + 5);
        rq.enqueue(b, h, h + 6);
        assertEquals(COUNT + 16 - 2, pool.posted());
        int inUse = alloc.buffersInUse();

        // lent: the very buffer, and its slot is free at once
        RdmaByteBuf first = slots.buffer(a);
        ByteBuf lent = rq.nextRead(handle(SIZE), UnpooledByteBufAllocator.DEFAULT, false);
        assertSame(first, underlying(lent));
        assertEquals("first", lent.toString(StandardCharsets.US_ASCII));
        assertEquals(SIZE, channel.lentBytes.get());
        assertEquals(SIZE, loopCounters.lentBytes.get());
        assertEquals(1, rq.takeReposted(), "its credit is owed");
        assertEquals(COUNT + 16 - 2, pool.posted(), "one receive short: the pool posts once it lacks its lag");
        assertEquals(1, pool.refill(), "the one the lent buffer leaves (none for the unread message)");
        assertEquals(inUse + 1, alloc.buffersInUse(), "one new buffer: no spare yet");

        // copied (a guess below the message, then the lending bound): in two reads, then its buffer is posted again
        ByteBuf part = rq.nextRead(handle(4), UnpooledByteBufAllocator.DEFAULT, false);
        assertEquals("seco", part.toString(StandardCharsets.US_ASCII));
        part.release();
        assertEquals(0, rq.takeReposted(), "not consumed yet");
        ByteBuf rest = rq.nextRead(handle(4), UnpooledByteBufAllocator.DEFAULT, false);
        assertEquals("nd", rest.toString(StandardCharsets.US_ASCII));
        rest.release();
        assertEquals(1, rq.takeReposted());
        assertFalse(rq.hasPending());
        assertEquals(COUNT + 16 - 1, pool.posted(), "the read message's buffer a spare until the pool lacks its lag");
        assertEquals(1, pool.refill());
        assertEquals(inUse + 1, alloc.buffersInUse(), "with the copied message's own buffer");

        // the lent buffer released on the loop becomes a spare of the pool too: refills need no new buffer
        lent.release();
        assertEquals(0, channel.lentBytes.get());
        assertEquals(0, loopCounters.lentBytes.get());
        assertEquals(inUse + 1, alloc.buffersInUse(), "kept by the pool, not freed");
        pool.take(pool.wrId(2)).release();
        pool.take(pool.wrId(3)).release();
        assertEquals(2, pool.refill());
        assertEquals(inUse, alloc.buffersInUse(), "the lent buffer posted again, and one new");
        rq.close();
    }

    /**
     * A consumed message's receive is posted again once the pool lacks its lag, all of them in one chain; until then
     * the pool stays within its margin of the reservations, so the peers' credits are always covered.
     */
    @Test
    void consumedReceivesArePostedInOneChainOnceThePoolLacksItsLag() throws Exception {
        PooledReceives slots = new PooledReceives(pool, COUNT);
        int lag = pool.lag();
        assertEquals(8, lag, "half the margin of 16");
        int next = 0;
        for (int message = 1; message <= 3 * lag; message++) {
            int slot = slots.hold(pool.wrId(next));
            slots.consumed(slot);
            int lacking = pool.target() - pool.posted();
            assertTrue(lacking < lag, "never lacking the lag after a consumption: " + lacking);
            assertTrue(pool.posted() >= COUNT + 16 - lag + 1, "the credits and half the margin posted");
            assertEquals(message % lag, lacking,
                    "message " + message + ": posted again in a chain every " + lag + " messages");
            next = nextPosted(next);
        }
    }

    /** A posted receive of the pool after {@code slot}. */
    private int nextPosted(int slot) {
        for (int i = 1; i <= pool.capacity(); i++) {
            int s = (slot + i) % pool.capacity();
            if (pool.isPosted(s)) {
                return s;
            }
        }
        throw new AssertionError("nothing posted");
    }

    @Test
    void aMessageBeyondTheSlotsIsRefusedAndItsBufferGoesBack() throws Exception {
        PooledReceives slots = new PooledReceives(pool, COUNT);
        for (int i = 0; i < COUNT; i++) {
            assertEquals(i, slots.hold(pool.wrId(i)), "slot 0 first, then the next");
        }
        int inUse = alloc.buffersInUse();
        assertEquals(-1, slots.hold(pool.wrId(COUNT)), "more messages than the peer may have sent unread");
        assertEquals(inUse, alloc.buffersInUse(), "its buffer is the pool's spare");
        slots.consumed(2);
        assertEquals(COUNT + 16 - 5, pool.posted(), "two short of the target (none for the 3 unread): under the lag");
        assertEquals(2, pool.refill());
        assertEquals(2, slots.hold(pool.wrId(COUNT + 1)), "a consumed message's slot is free again");
        RdmaByteBuf lent = slots.buffer(0);
        assertTrue(slots.handOver(0), "lent: the slot goes on without its buffer");
        assertEquals(1, pool.refill(), "a receive for the lent one");
        assertThrows(IllegalStateException.class, () -> slots.consumed(0), "slot 0 holds nothing now");
        inUse = alloc.buffersInUse();
        slots.close();
        assertEquals(inUse, alloc.buffersInUse(), "closing gives the held buffers to the pool");
        assertEquals(-1, slots.hold(pool.wrId(COUNT + 3)), "closed: nothing held any more");
        lent.release();
    }
}
