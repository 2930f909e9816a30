package org.nettyrdma.channel;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.Unpooled;
import io.netty.buffer.UnpooledByteBufAllocator;
import org.junit.jupiter.api.Test;
import org.nettyrdma.verbs.WcStatus;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The rendezvous receiver's table alone ({@link RendezvousReceives}) with a fake READ poster that "reads" a byte
 * pattern of the announced address: ids, chunking, the read-ahead and READ bounds, delivery in order with no byte twice,
 * DONEs in RNDV order once the last READ completed, discarding, a failed READ, and every chunk released once.
 */
class RendezvousReceivesTest {
    private static final long BASE = 0x7000_0000_0000L;

    /** Posts nothing: records the READs; {@link #complete} writes what the peer's memory holds at the address. */
    private static final class FakePoster implements RendezvousReceives.ReadPoster {
        final ArrayDeque<long[]> inFlight = new ArrayDeque<>(); // remote address, rkey, length, slot
        final ArrayDeque<ByteBuf> buffers = new ArrayDeque<>();
        final List<ByteBuf> all = new ArrayList<>();
        int nextSlot;
        boolean full; // the send queue has no place

        @Override
        public int postRead(long remoteAddress, int rkey, ByteBuf into, int length) {
            if (full) {
                return -1;
            }
            int slot = nextSlot++ % 1000;
            inFlight.add(new long[] {remoteAddress, rkey, length, slot});
            buffers.add(into);
            all.add(into);
            return slot;
        }

        int inFlight() {
            return inFlight.size();
        }

        /** Completes the oldest READ in flight successfully. */
        void complete(RendezvousReceives t) {
            long[] r = inFlight.poll();
            ByteBuf into = buffers.poll();
            assertTrue(t.isRead((int) r[3]), "the oldest READ's slot");
            for (int i = 0; i < r[2]; i++) {
                into.setByte(into.writerIndex() + i, byteAt(r[0] + i, (int) r[1]));
            }
            assertNull(t.readCompleted(WcStatus.SUCCESS));
        }
    }

    /** What the peer's memory holds at {@code address} of the rendezvous whose rkey is {@code rkey}. */
    private static byte byteAt(long address, int rkey) {
        long x = (address - BASE) * 31 + rkey * 7L;
        return (byte) (x ^ (x >>> 9));
    }

    private static ByteBuf rndv(int id, int length, int rkey) {
        ByteBuffer b = ByteBuffer.allocate(RdmaProtocol.RNDV_MESSAGE_LENGTH);
        RdmaProtocol.putRendezvous(b, 0, 0, id, length, BASE, rkey);
        return Unpooled.wrappedBuffer(b);
    }

    private final ByteBufAllocator alloc = new UnpooledByteBufAllocator(false, true); // no leak records: the test reads bytes one by one

    /** A table alone on its loop: a loop bound it never reaches. */
    private static RendezvousReceives table(int maxEntries, int chunkSize, int readAhead, int maxReads) {
        return new RendezvousReceives(maxEntries, chunkSize, readAhead, maxReads,
                new ReadAheadBudget(Long.MAX_VALUE, new RdmaCounters()), () -> { });
    }

    private static final int MIB = 1 << 20;

    /**
     * Two connections' tables on one loop bound of 2.5 MiB (1 MiB chunks, 4 MiB each of their own, four READs), each
     * with a rendezvous announced: {@code a} of 4 MiB, {@code b} of {@code bLength} bytes; {@code woken} counts the
     * wakes of each.
     */
    private static final class TwoTables {
        final RdmaCounters loop = new RdmaCounters();
        final ReadAheadBudget budget = new ReadAheadBudget(5L * MIB / 2, loop);
        final int[] woken = new int[2];
        final RendezvousReceives a = new RendezvousReceives(8, MIB, 4 * MIB, 4, budget, () -> woken[0]++);
        final RendezvousReceives b = new RendezvousReceives(8, MIB, 4 * MIB, 4, budget, () -> woken[1]++);
        final FakePoster pa = new FakePoster();
        final FakePoster pb = new FakePoster();

        TwoTables(int bLength) {
            assertNull(a.onRendezvous(rndv(0, 4 * MIB, 1)));
            assertNull(b.onRendezvous(rndv(0, bLength, 2)));
        }
    }

    /**
     * Two connections' tables on one loop bound of 2.5 MiB (1 MiB chunks, 4 MiB each of their own): the first takes
     * two chunks and waits; the second, holding nothing, still gets 64 KiB (another's unread bytes never stop it for
     * good) and then waits too. Bytes coming back wake the longest waiter, once; each pulls within the bound again; the
     * stalls are counted; closing gives back every byte and forgets the waiter.
     */
    @Test
    void theLoopBoundHoldsBackTablesAndBytesComingBackWakeThem() throws IOException {
        TwoTables t = new TwoTables(2 * MIB);
        assertEquals(2, t.a.pull(t.pa, alloc), "a third MiB would pass the loop's 2.5 MiB");
        assertEquals(2L * MIB, t.budget.held());
        assertEquals(1, t.budget.waiterCount());
        assertEquals(1, t.b.pull(t.pb, alloc), "holding nothing: one small chunk past the bound");
        assertEquals(ReadAheadBudget.MIN_CHUNK, t.pb.inFlight.peek()[2]);
        assertEquals(2L * MIB + ReadAheadBudget.MIN_CHUNK, t.budget.held());
        assertEquals(0, t.b.pull(t.pb, alloc), "holding one: waits");
        assertEquals(2, t.budget.waiterCount(), "each queued once");
        assertEquals(3, t.loop.rendezvousReadAheadStalls, "a's third chunk, b's cut one, b's second");
        t.pa.complete(t.a);
        t.pa.complete(t.a);
        t.pb.complete(t.b);
        ByteBuf c = t.a.takeChunk();
        c.release();
        assertArrayEquals(new int[] {1, 0}, t.woken, "a waited longest: woken first, once");
        assertEquals(1, t.a.pull(t.pa, alloc), "a MiB came back: a takes one, and waits for its next");
        assertEquals(2, t.budget.waiterCount(), "b, then a");
        c = t.b.takeChunk();
        assertEquals(ReadAheadBudget.MIN_CHUNK, c.readableBytes());
        for (int i = 0; i < c.readableBytes(); i++) {
            assertEquals(byteAt(BASE + i, 2), c.getByte(i));
        }
        c.release();
        assertArrayEquals(new int[] {1, 1}, t.woken);
        assertEquals(1, t.b.pull(t.pb, alloc), "holding nothing again: the next 64 KiB of its rendezvous");
        assertEquals(BASE + ReadAheadBudget.MIN_CHUNK, t.pb.inFlight.peek()[0]);
        assertEquals(2L * MIB + ReadAheadBudget.MIN_CHUNK, t.budget.held());
        assertEquals(2, t.budget.waiterCount(), "a, then b again");
        assertEquals(0, t.a.pull(t.pa, alloc));
        assertEquals(2, t.budget.waiterCount(), "a pulling again while it waits is not queued twice");
        assertEquals(6, t.loop.rendezvousReadAheadStalls, "three more: a waiting again, b cut and waiting again");
        t.a.close();
        assertEquals(ReadAheadBudget.MIN_CHUNK, t.budget.held(), "a's chunks back");
        assertArrayEquals(new int[] {1, 2}, t.woken, "b woken by a's bytes coming back at its close");
        assertEquals(0, t.budget.waiterCount(), "a's wait forgotten");
        t.b.close();
        assertEquals(0, t.budget.held());
        for (ByteBuf x : t.pa.all) {
            assertEquals(0, x.refCnt());
        }
        for (ByteBuf x : t.pb.all) {
            assertEquals(0, x.refCnt());
        }
    }

    /**
     * A table that waits for the loop's bound and then discards (its input shut down) waits no more: the bytes that
     * come back wake the next table that still reads. Before, the wake went to the discarding table, which took
     * nothing, and the other waited until some unrelated chunk came back (found by a review).
     */
    @Test
    void aTableThatDiscardsWaitsNoMoreAndTheWakeGoesToOneThatReads() throws IOException {
        TwoTables t = new TwoTables(2 * MIB);
        assertEquals(2, t.a.pull(t.pa, alloc));
        assertEquals(1, t.b.pull(t.pb, alloc));
        assertEquals(0, t.b.pull(t.pb, alloc));
        assertEquals(2, t.budget.waiterCount(), "a, then b");
        t.a.discard();
        assertEquals(1, t.budget.waiterCount(), "a waits no more");
        t.pa.complete(t.a); // a's READs in flight complete: their chunks are dropped, their bytes come back
        t.pa.complete(t.a);
        assertArrayEquals(new int[] {0, 1}, t.woken, "b woken, not a");
        assertTrue(t.b.pull(t.pb, alloc) > 0, "b pulls within the bound again");
        t.a.close();
        t.b.close();
        assertEquals(0, t.budget.held());
        assertEquals(0, t.budget.waiterCount());
    }

    /**
     * A READ the send queue has no place for gives its bytes back to the loop's bound without waking a waiter: what
     * it waits for (bytes other connections hold) did not come back, and a wake would only queue it again.
     */
    @Test
    void aReadWithNoPlaceGivesItsBytesBackWithoutWakingAWaiter() throws IOException {
        TwoTables t = new TwoTables(MIB / 4);
        assertEquals(2, t.a.pull(t.pa, alloc));
        assertEquals(1, t.budget.waiterCount(), "a waits");
        t.pb.full = true;
        assertEquals(0, t.b.pull(t.pb, alloc));
        assertEquals(2L * MIB, t.budget.held(), "b's bytes back");
        assertArrayEquals(new int[] {0, 0}, t.woken, "a still waits: nothing it waits for came back");
        assertEquals(1, t.budget.waiterCount());
        t.pb.full = false;
        assertEquals(1, t.b.pull(t.pb, alloc), "the next batch end pulls again");
        t.pb.complete(t.b);
        t.b.takeChunk().release();
        assertArrayEquals(new int[] {1, 0}, t.woken, "bytes delivered and released wake a");
        t.a.close();
        t.b.close();
        assertEquals(0, t.budget.held());
    }

    @Test
    void idsComeInOrderAndEntriesAreBoundedByCredits() {
        RendezvousReceives t = table(2, 1024, 4096, 2);
        assertEquals("sent an RNDV for rendezvous 1, but the next is 0", t.onRendezvous(rndv(1, 10, 1)));
        assertNull(t.onRendezvous(rndv(0, 10, 1)));
        assertEquals("sent an RNDV for rendezvous 0, but the next is 1", t.onRendezvous(rndv(0, 10, 1)));
        assertEquals("sent an RNDV for rendezvous 4294967295, but the next is 1", t.onRendezvous(rndv(-1, 10, 1)));
        assertNull(t.onRendezvous(rndv(1, 10, 1)));
        assertEquals("sent more RNDVs than it had credits for", t.onRendezvous(rndv(2, 10, 1)));
        t.close();
    }

    @Test
    void pullsInChunksWithinTheBoundsAndOwesDoneAfterTheLastRead() throws IOException {
        RendezvousReceives t = table(8, 1000, 2500, 2);
        FakePoster p = new FakePoster();
        assertNull(t.onRendezvous(rndv(0, 4500, 11)));
        assertEquals(2, t.pull(p, alloc), "two READs in flight at most");
        assertEquals(0, t.pull(p, alloc));
        long[] first = p.inFlight.peek();
        assertEquals(BASE, first[0]);
        assertEquals(11, first[1]);
        assertEquals(1000, first[2]);
        p.complete(t);
        assertEquals(0, t.pull(p, alloc), "a third chunk would pass the read-ahead of 2500");
        assertFalse(t.owesDone());
        assertTrue(t.headReady());
        ByteBuf c = t.takeChunk();
        assertEquals(1000, c.readableBytes());
        for (int i = 0; i < 1000; i++) {
            assertEquals(byteAt(BASE + i, 11), c.getByte(i));
        }
        c.release();
        assertFalse(t.headDelivered());
        assertEquals(1, t.pull(p, alloc), "taken: room for one more");
        assertEquals(2000, t.heldBytes());
        p.complete(t);
        p.complete(t);
        c = t.takeChunk(); // 1000 held: room for the last 1500 bytes, 3000-3999 and 4000-4499
        assertEquals(1000, c.readableBytes());
        c.release();
        assertEquals(2, t.pull(p, alloc));
        assertEquals(2500, t.heldBytes());
        assertEquals(BASE + 3000, p.inFlight.peekFirst()[0]);
        assertEquals(BASE + 4000, p.inFlight.peekLast()[0]);
        assertEquals(500, p.inFlight.peekLast()[2]);
        assertEquals(0, t.pull(p, alloc), "all of it pulled");
        p.complete(t);
        assertFalse(t.owesDone());
        p.complete(t);
        assertTrue(t.owesDone(), "all of it read: DONE owed before it is delivered");
        assertEquals(0, t.doneId());
        assertEquals(11, t.doneRkey());
        t.donePosted();
        for (int expected : new int[] {1000, 1000, 500}) {
            assertTrue(t.headReady());
            c = t.takeChunk();
            assertEquals(expected, c.readableBytes());
            c.release();
        }
        assertTrue(t.headDelivered());
        assertFalse(t.headReady());
        assertEquals(0, t.heldBytes());
        assertFalse(t.headDelivered());
        t.close();
    }

    /**
     * Random rendezvous of random lengths, pulled, completed and taken in random interleavings: the pipeline gets every
     * byte once and in order, chunks at most the chunk size, the read-ahead and the READs in flight never exceeded,
     * DONEs in RNDV order and each only once all its bytes were read, every chunk released once by its taker or close.
     */
    @Test
    void randomInterleavingsDeliverEveryByteOnceInOrder() throws IOException {
        for (int seed = 0; seed < 300; seed++) {
            Random rnd = new Random(seed);
            int chunk = 1 + rnd.nextInt(5000);
            int readAhead = chunk + rnd.nextInt(20000);
            int maxReads = 1 + rnd.nextInt(4);
            int credits = 1 + rnd.nextInt(6);
            long limit = 1 + rnd.nextInt(30000); // the loop's bound: below the table's own at times, above at others
            ReadAheadBudget budget = new ReadAheadBudget(limit, new RdmaCounters());
            RendezvousReceives t = new RendezvousReceives(credits, chunk, readAhead, maxReads, budget, () -> { });
            FakePoster p = new FakePoster();
            List<int[]> sent = new ArrayList<>(); // length, rkey
            int queued = 0;
            int sentId = 0;
            int doneExpected = 0;
            int deliveredEntry = 0;
            int deliveredOffset = 0;
            long readBytes = 0;
            long[] readPerEntry = new long[100];
            for (int step = 0; step < 300; step++) {
                int a = rnd.nextInt(4);
                if (a == 0 && queued < credits && sentId - doneExpected < RendezvousSends.MAX_RENDEZVOUS && sentId < 100) {
                    int length = 1 + rnd.nextInt(3 * chunk + 10);
                    int rkey = 100 + sentId;
                    assertNull(t.onRendezvous(rndv(sentId, length, rkey)));
                    sent.add(new int[] {length, rkey});
                    sentId++;
                    queued++;
                } else if (a == 1) {
                    t.pull(p, alloc);
                } else if (a == 2 && p.inFlight() > 0) {
                    long[] r = p.inFlight.peek();
                    int entry = (int) r[1] - 100;
                    readPerEntry[entry] += r[2];
                    p.complete(t);
                } else if (t.headReady()) {
                    ByteBuf c = t.takeChunk();
                    assertTrue(c.readableBytes() <= chunk && c.readableBytes() > 0);
                    int[] e = sent.get(deliveredEntry);
                    for (int i = 0; i < c.readableBytes(); i++) {
                        assertEquals(byteAt(BASE + deliveredOffset + i, e[1]), c.getByte(c.readerIndex() + i),
                                "seed " + seed + ": rendezvous " + deliveredEntry + ", byte " + (deliveredOffset + i));
                    }
                    deliveredOffset += c.readableBytes();
                    c.release();
                    if (t.headDelivered()) {
                        assertEquals(e[0], deliveredOffset, "seed " + seed);
                        deliveredEntry++;
                        deliveredOffset = 0;
                        queued--;
                    }
                }
                assertTrue(p.inFlight() <= maxReads, "seed " + seed + ": READs in flight");
                assertTrue(t.heldBytes() <= readAhead, "seed " + seed + ": read-ahead");
                assertEquals(t.heldBytes(), budget.held(), "seed " + seed + ": the loop's count");
                assertTrue(budget.held() <= Math.max(limit, chunk), "seed " + seed + ": the loop's bound, or one chunk");
                while (t.owesDone()) {
                    assertEquals(doneExpected, t.doneId(), "seed " + seed + ": DONEs in order");
                    assertEquals(100 + doneExpected, t.doneRkey());
                    assertEquals(sent.get(doneExpected)[0], readPerEntry[doneExpected],
                            "seed " + seed + ": a DONE only once all its bytes were read");
                    t.donePosted();
                    doneExpected++;
                }
            }
            t.close();
            assertEquals(0, budget.held(), "seed " + seed + ": the loop's bytes back");
            assertEquals(0, budget.waiterCount(), "seed " + seed + ": no waiter left");
            for (ByteBuf b : p.all) {
                assertEquals(0, b.refCnt(), "seed " + seed + ": every chunk released once");
            }
        }
    }

    /**
     * Discarding (input shut down, or close): ready chunks released, nothing pulled further; a rendezvous with READs in
     * flight owes its DONE when they complete, those behind it after it (RNDV order); an RNDV arriving later owes its
     * DONE at once.
     */
    @Test
    void discardOwesEveryDoneInOrderAfterTheReadsInFlight() throws IOException {
        RendezvousReceives t = table(8, 100, 1000, 2);
        FakePoster p = new FakePoster();
        assertNull(t.onRendezvous(rndv(0, 150, 1)));
        assertNull(t.onRendezvous(rndv(1, 300, 2)));
        assertNull(t.onRendezvous(rndv(2, 50, 3)));
        assertEquals(2, t.pull(p, alloc));
        p.complete(t);
        p.complete(t); // rendezvous 0 read: its DONE is owed
        assertTrue(t.owesDone());
        assertEquals(0, t.doneId());
        t.donePosted();
        assertEquals(2, t.pull(p, alloc)); // two chunks of rendezvous 1
        p.complete(t);
        t.discard();
        assertEquals(100, t.heldBytes(), "ready chunks released; the one in flight is held");
        assertFalse(t.owesDone(), "rendezvous 1 has a READ in flight: no DONE yet, nor for 2 behind it");
        assertEquals(0, t.pull(p, alloc), "nothing more is pulled");
        p.complete(t);
        assertEquals(0, t.heldBytes());
        assertEquals(1, t.doneId());
        t.donePosted();
        assertEquals(2, t.doneId());
        t.donePosted();
        assertFalse(t.owesDone());
        assertNull(t.onRendezvous(rndv(3, 5000, 4)));
        assertTrue(t.owesDone(), "an RNDV after the discard: its DONE at once");
        assertEquals(3, t.doneId());
        assertEquals(4, t.doneRkey());
        t.donePosted();
        assertFalse(t.headReady());
        t.close();
        for (ByteBuf b : p.all) {
            assertEquals(0, b.refCnt());
        }
    }

    /**
     * A discarding table owes an RNDV's DONE at once and forgets the entry, so the credit limit no longer bounds the
     * DONEs owed: the peer's limit of four rendezvous outstanding does (a fifth overwrote the first DONE owed).
     */
    @Test
    void aFifthRndvWhileFourAwaitTheirDoneIsRefusedWhenDiscarding() throws IOException {
        RendezvousReceives t = table(2, 100, 1000, 2); // two entries: the four DONEs owed are not bound by the credits
        t.discard();
        for (int i = 0; i < 4; i++) {
            assertNull(t.onRendezvous(rndv(i, 10, i + 1)));
        }
        assertEquals("sent an RNDV while 4 of its rendezvous awaited their DONE (at most 4 may be outstanding)",
                t.onRendezvous(rndv(4, 10, 5)));
        t.donePosted(); // DONE 0 is out: the peer may start one more
        assertNull(t.onRendezvous(rndv(4, 10, 5)));
        for (int i = 1; i <= 4; i++) {
            assertEquals(i, t.doneId(), "DONEs in RNDV order");
            assertEquals(i + 1, t.doneRkey());
            t.donePosted();
        }
        assertFalse(t.owesDone());
        t.close();
    }

    /** Delivered rendezvous whose DONE is not posted yet (no place in the send queue) still count as outstanding. */
    @Test
    void aFifthRndvWhileFourDeliveredAwaitTheirDoneIsRefused() throws IOException {
        RendezvousReceives t = table(4, 100, 1000, 4);
        FakePoster p = new FakePoster();
        for (int i = 0; i < 4; i++) {
            assertNull(t.onRendezvous(rndv(i, 10, i + 1)));
        }
        assertEquals(4, t.pull(p, alloc));
        for (int i = 0; i < 4; i++) {
            p.complete(t);
        }
        for (int i = 0; i < 4; i++) {
            t.takeChunk().release();
            assertTrue(t.headDelivered(), "its credit is owed back: the table has room again");
        }
        assertTrue(t.owesDone());
        assertEquals("sent an RNDV while 4 of its rendezvous awaited their DONE (at most 4 may be outstanding)",
                t.onRendezvous(rndv(4, 10, 5)));
        t.close();
    }

    @Test
    void aFailedReadSaysWhatFailed() throws IOException {
        RendezvousReceives t = table(8, 1 << 20, 4 << 20, 4);
        FakePoster p = new FakePoster();
        assertNull(t.onRendezvous(rndv(0, 3 << 20, 1)));
        assertEquals(3, t.pull(p, alloc));
        p.complete(t);
        IOException e = t.readCompleted(WcStatus.REM_ACCESS_ERR);
        assertNotNull(e);
        assertEquals("rendezvous READ of 1048576 bytes at offset 1048576 of 3145728 failed: remote access error (the "
                + "peer revoked its buffer, or announced memory it does not expose)", e.getMessage());
        t.close();
        for (ByteBuf b : p.all) {
            assertEquals(0, b.refCnt(), "close releases chunks in flight and ready (after the QP is gone)");
        }
    }
}
