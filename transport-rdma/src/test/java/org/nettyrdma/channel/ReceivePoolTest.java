package org.nettyrdma.channel;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.nettyrdma.verbs.ProtectionDomain;
import org.nettyrdma.verbs.SharedReceiveQueue;
import org.nettyrdma.verbs.VerbsProvider;
import org.nettyrdma.verbs.emulated.EmulatedProvider;

import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Random;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The shared receive pool's bookkeeping on the emulated provider's shared receive queue (docs/srq-design.md). */
class ReceivePoolTest {
    private static final int SIZE = 1024;
    private ProtectionDomain pd;
    private RdmaByteBufAllocator alloc;

    @BeforeEach
    void open() throws Exception {
        VerbsProvider provider = EmulatedProvider.create();
        pd = provider.devices().get(0).allocPd();
        alloc = new RdmaByteBufAllocator(true);
    }

    @AfterEach
    void closePd() throws Exception {
        alloc.deregister(pd);
        pd.close(); // EBUSY if a pool's queue were still open
    }

    private ReceivePool pool(int capacity, int index) throws Exception {
        return pool(capacity, capacity, index);
    }

    private ReceivePool pool(int queueCapacity, int slots, int index) throws Exception {
        SharedReceiveQueue srq = pd.createSharedReceiveQueue(queueCapacity, 1);
        return new ReceivePool(srq, slots, alloc, SIZE, index);
    }

    @Test
    void refillPostsUpToTheTargetAndATakenReceiveFreesItsSlot() throws Exception {
        int before = alloc.buffersInUse();
        ReceivePool p = pool(64, 5);
        assertEquals(64, p.capacity());
        assertTrue(p.tryReserve(CreditWindow.POOLED_INITIAL));
        assertEquals(4 + 16, p.target(), "reserved plus the margin of at least 16");
        assertEquals(20, p.refill());
        assertEquals(20, p.posted());
        assertEquals(0, p.refill(), "caught up");
        assertEquals(before + 20, alloc.buffersInUse());

        long wrId = p.wrId(3);
        assertTrue(ReceivePool.isPoolWrId(wrId));
        assertEquals(5, ReceivePool.poolIndex(wrId));
        assertEquals(ConnectionResources.RECV_BIT, wrId & ConnectionResources.RECV_BIT, "a receive, as every receive");
        assertFalse(ReceivePool.isPoolWrId((long) 7 << 32 | 3), "a registration's work request");
        RdmaByteBuf taken = p.take(wrId);
        assertEquals(SIZE, taken.capacity());
        assertEquals(19, p.posted());
        assertFalse(p.isPosted(3));
        assertThrows(IllegalStateException.class, () -> p.take(wrId), "taken already");
        assertThrows(IllegalStateException.class, () -> p.take(p.wrId(3) & ~(127L << 24) | 6L << 24), "pool 6's");
        p.recycle(taken);
        assertEquals(1, p.refill());
        assertTrue(p.isPosted(3), "the freed slot is used again");
        assertEquals(before + 20, alloc.buffersInUse(), "the recycled buffer is posted again, no new one");
        RdmaByteBuf again = p.take(p.wrId(3));
        assertSame(taken, again);
        p.recycle(again);
        p.close();
        assertEquals(before, alloc.buffersInUse(), "closing frees the posted buffers and the spares");
        assertEquals(0, p.posted());
    }

    @Test
    void reservationsStopAtTheQueuesCapacityWithItsMargin() throws Exception {
        ReceivePool p = pool(64, 0);
        assertTrue(p.tryReserve(48));
        assertEquals(64, p.target());
        assertFalse(p.tryReserve(1), "49 + a margin of 16 > 64");
        p.release(8);
        assertTrue(p.tryReserve(8));
        assertThrows(IllegalArgumentException.class, () -> p.release(49));
        assertThrows(IllegalArgumentException.class, () -> p.tryReserve(-1));
        assertEquals(64, p.refill());
        p.close();
        assertFalse(p.tryReserve(1), "closed");
    }

    /** A target that went down is reached as messages take the excess, never by taking receives back. */
    @Test
    void aLowerTargetIsReachedThroughConsumption() throws Exception {
        ReceivePool p = pool(256, 1);
        assertTrue(p.tryReserve(64));
        assertEquals(80, p.refill());
        p.release(60);
        assertEquals(0, p.refill());
        assertEquals(80, p.posted(), "the receives stay: the peers may hold credits for them");
        for (int slot = 0; slot < 70; slot++) {
            p.recycle(p.take(p.wrId(slot)));
        }
        assertEquals(10, p.posted());
        assertEquals(10, p.refill(), "back to 4 + 16");
        p.close();
    }

    /**
     * I2: after every refill the pool has its reservations posted, whatever happened before (and its margin, or, after
     * a lagging refill, more than half of it); no slot posted twice, no buffer handed out twice. The takes here are the
     * pool's side of a consumption only (no message consumed the queue's receive), so the queue gets a capacity far
     * beyond the pool's slots and the run stops before it fills.
     */
    @Test
    void randomReserveConsumeReleaseKeepsTheReservationsPosted() throws Exception {
        Random random = new Random(11);
        int before = alloc.buffersInUse();
        ReceivePool p = pool(16384, 512, 2);
        List<RdmaByteBuf> held = new ArrayList<>();
        int reserved = 0;
        int everPosted = 0;
        for (int step = 0; step < 20_000 && everPosted < 16384 - 512; step++) {
            int action = random.nextInt(5);
            if (action == 0) {
                int n = 1 + random.nextInt(32);
                if (p.tryReserve(n)) {
                    reserved += n;
                }
            } else if (action == 1 && reserved > 0) {
                int n = 1 + random.nextInt(reserved);
                p.release(n);
                reserved -= n;
            } else if (action == 2) {
                int slot = random.nextInt(p.capacity());
                for (int k = 0; k < p.capacity() && !p.isPosted(slot); k++) {
                    slot = (slot + 1) % p.capacity(); // a message consumes one of the posted receives
                }
                if (p.isPosted(slot)) {
                    held.add(p.take(p.wrId(slot)));
                }
            } else if (action == 3 && !held.isEmpty()) {
                p.recycle(held.remove(random.nextInt(held.size())));
            } else {
                boolean lagging = random.nextBoolean(); // as after a consumed message, or as a new reservation
                int n = lagging ? p.refillLagging() : p.refill();
                assertTrue(n >= 0, "refill: " + n);
                everPosted += n;
                assertTrue(p.posted() >= p.reserved(), "posted " + p.posted() + ", reserved " + p.reserved());
                assertTrue(p.posted() > Math.min(p.target(), p.capacity()) - (lagging ? p.lag() : 1),
                        "posted " + p.posted() + ", target " + p.target() + ", lag " + p.lag());
                Set<RdmaByteBuf> distinct = Collections.newSetFromMap(new IdentityHashMap<>());
                int count = 0;
                for (int slot = 0; slot < p.capacity(); slot++) {
                    if (p.isPosted(slot)) {
                        count++;
                    }
                }
                assertEquals(p.posted(), count);
                for (RdmaByteBuf b : held) {
                    assertTrue(distinct.add(b), "a buffer handed out twice");
                }
            }
            assertEquals(reserved, p.reserved());
            assertTrue(p.target() <= p.capacity());
        }
        assertTrue(everPosted > 4 * p.capacity(), "the run reused slots and buffers: " + everPosted);
        for (RdmaByteBuf b : held) {
            assertNotSame(null, b);
            b.release();
        }
        p.close();
        assertEquals(before, alloc.buffersInUse());
    }
}
