package org.nettyrdma.channel;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.nettyrdma.verbs.Access;
import org.nettyrdma.verbs.Device;
import org.nettyrdma.verbs.DeviceAttributes;
import org.nettyrdma.verbs.MemoryRegion;
import org.nettyrdma.verbs.ProtectionDomain;
import org.nettyrdma.verbs.VerbsException;
import org.nettyrdma.verbs.WorkRequestList;
import org.nettyrdma.verbs.WrOpcode;
import org.nettyrdma.verbs.emulated.EmulatedFabric;

import java.net.InetAddress;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The rendezvous sender's table alone ({@link RendezvousSends}): FIFO ids and DONE checks, the binds it writes, its
 * buffers retained and released once, its windows deallocated at close, and settlement in stream order checked against
 * a reference model under random interleavings of posts, in-order completions and DONEs.
 */
class RendezvousSendsTest {
    private static final int SLOTS = 64;
    private ProtectionDomain pd;
    private ByteBuffer memory;
    private MemoryRegion mr;
    private final WorkRequestList wrs = new WorkRequestList(4, 1);

    @BeforeEach
    void setUp() throws VerbsException {
        Device device = new EmulatedFabric().addDevice("emu0",
                EmulatedFabric.defaultAttributes(DeviceAttributes.Transport.ROCE), InetAddress.getLoopbackAddress());
        pd = device.allocPd();
        memory = ByteBuffer.allocateDirect(1 << 20);
        mr = pd.registerMemory(memory, Access.LOCAL_WRITE | Access.MW_BIND);
    }

    @AfterEach
    void tearDown() throws VerbsException {
        mr.close();
        pd.close();
    }

    private int start(RendezvousSends t, ByteBuf buf, int length, int rndvSlot) throws VerbsException {
        return t.start(buf, mr, mr.address() + 100, length, wrs, 0, 7, 0, rndvSlot);
    }

    @Test
    void startBindsAWindowOverTheBytesAndTheRndvSaysWhere() throws VerbsException {
        RdmaCounters channel = new RdmaCounters();
        RdmaCounters loop = new RdmaCounters();
        loop.rendezvousExposedBytes = 300; // another connection's
        RendezvousSends t = new RendezvousSends(pd, SLOTS, channel, loop);
        ByteBuf buf = Unpooled.buffer(8);
        int id = start(t, buf, 5000, 1);
        assertEquals(0, id);
        assertEquals(2, buf.refCnt(), "retained while exposed");
        assertEquals(WrOpcode.BIND_MW, wrs.opcode(0));
        assertEquals(5000, t.exposedBytes());
        assertEquals(5000, channel.rendezvousExposedBytes(), "the channel's gauge");
        assertEquals(5300, loop.rendezvousExposedBytes(), "the loop's gauge");
        ByteBuffer rndv = ByteBuffer.allocate(RdmaProtocol.RNDV_MESSAGE_LENGTH);
        t.putRendezvous(rndv, 0, 3, id);
        ByteBuf m = Unpooled.wrappedBuffer(rndv);
        assertNull(RdmaProtocol.checkHeader(m, RdmaProtocol.RNDV_MESSAGE_LENGTH, RdmaProtocol.FLAG_READ_RENDEZVOUS));
        assertEquals(RdmaProtocol.TYPE_RNDV, RdmaProtocol.headerType(m));
        assertEquals(3, RdmaProtocol.headerCredits(m));
        assertEquals(0, RdmaProtocol.rendezvousId(m));
        assertEquals(5000, RdmaProtocol.rendezvousLength(m));
        assertEquals(mr.address() + 100, RdmaProtocol.rendezvousAddress(m));
        int rkey = RdmaProtocol.rendezvousRkey(m);
        assertNotEquals(0, rkey);
        t.close();
        assertEquals(1, buf.refCnt(), "released at close");
        assertEquals(0, t.exposedBytes());
        assertEquals(0, channel.rendezvousExposedBytes());
        assertEquals(300, loop.rendezvousExposedBytes());
        t.close();
        assertEquals(1, buf.refCnt(), "close is idempotent");
        assertEquals(300, loop.rendezvousExposedBytes());
        assertFalse(t.canStart());
    }

    @Test
    void donesComeInOrderOneEachInvalidatingTheirWindow() throws VerbsException {
        RendezvousSends t = new RendezvousSends(pd, SLOTS, new RdmaCounters(), new RdmaCounters());
        assertEquals("sent a DONE for rendezvous 0 with none outstanding", t.checkDone(0, true, 1));
        List<ByteBuf> bufs = new ArrayList<>();
        int[] rkeys = new int[RendezvousSends.MAX_RENDEZVOUS];
        for (int i = 0; i < RendezvousSends.MAX_RENDEZVOUS; i++) {
            assertTrue(t.canStart());
            ByteBuf buf = Unpooled.buffer(1);
            bufs.add(buf);
            assertEquals(i, start(t, buf, 1000 + i, 2 * i + 1));
            ByteBuffer rndv = ByteBuffer.allocate(RdmaProtocol.RNDV_MESSAGE_LENGTH);
            t.putRendezvous(rndv, 0, 0, i);
            rkeys[i] = rndv.getInt(RdmaProtocol.HEADER_LENGTH + 16);
            t.posted(2 * i);
            t.posted(2 * i + 1);
        }
        assertFalse(t.canStart(), "at most " + RendezvousSends.MAX_RENDEZVOUS + " outstanding");
        assertThrows(IllegalStateException.class, () -> start(t, Unpooled.buffer(1), 1, 9));
        assertEquals("sent a DONE for rendezvous 1, but the oldest outstanding is 0", t.checkDone(1, true, rkeys[1]));
        assertEquals("sent a DONE for rendezvous 4294967295, but the oldest outstanding is 0",
                t.checkDone(-1, true, rkeys[0]));
        assertEquals("sent a DONE for rendezvous 0 without invalidating its window (a SEND_WITH_INV of rkey 0x"
                + Integer.toHexString(rkeys[0]) + ")", t.checkDone(0, false, 0));
        assertEquals("sent a DONE for rendezvous 0 invalidating rkey 0x" + Integer.toHexString(rkeys[1])
                + ", not its window's 0x" + Integer.toHexString(rkeys[0]), t.checkDone(0, true, rkeys[1]));
        assertNull(t.checkDone(0, true, rkeys[0]));
        assertEquals(0, t.done(), "its RNDV's slot has not completed: nothing settles yet");
        assertEquals(4000 + 6 - 1000, t.exposedBytes());
        assertEquals(1, bufs.get(0).refCnt() - 1, "still held until it settles");
        assertEquals("sent a DONE for rendezvous 0, but the oldest outstanding is 1", t.checkDone(0, true, rkeys[0]));
        assertEquals(1000, t.completed(0, 0) + t.completed(1, 0), "the RNDV's completion settles it");
        assertEquals(1, bufs.get(0).refCnt(), "released once settled");
        assertTrue(t.canStart());
        t.close();
        for (ByteBuf buf : bufs) {
            assertEquals(1, buf.refCnt());
        }
    }

    /**
     * Random streams of plain sends and rendezvous, completed in posted order in random batches (as signalling every
     * Nth request retires several slots at once), DONEs arriving in RNDV order at random times after their RNDV was
     * posted (before or after its completion): the bytes settled so far always equal the longest prefix of the stream
     * whose every piece is done (a send completed; a rendezvous with its RNDV completed and its DONE arrived).
     */
    @Test
    void settlementFollowsStreamOrder() throws VerbsException {
        for (int seed = 0; seed < 200; seed++) {
            runModel(new Random(seed), seed);
        }
    }

    private void runModel(Random rnd, int seed) throws VerbsException {
        RendezvousSends t = new RendezvousSends(pd, SLOTS, new RdmaCounters(), new RdmaCounters());
        // the stream's pieces in posted order: bytes, and whether a rendezvous (then the index of its RNDV's slot post)
        List<long[]> pieces = new ArrayList<>(); // {bytes, isRendezvous, completed, doneArrived}
        List<Integer> slotPiece = new ArrayList<>(); // posted slot (sequence) -> piece index
        List<Long> slotBytes = new ArrayList<>();
        List<Integer> rendezvousPieces = new ArrayList<>();
        List<ByteBuf> bufs = new ArrayList<>();
        int completedSlots = 0;
        int dones = 0;
        long settled = 0;
        for (int step = 0; step < 400; step++) {
            int action = rnd.nextInt(10);
            int inFlight = slotPiece.size() - completedSlots;
            if (action < 4 && inFlight < SLOTS - 2) { // a plain SEND
                long bytes = 1 + rnd.nextInt(20000);
                pieces.add(new long[] {bytes, 0, 0, 0});
                t.posted(seq(slotPiece.size()));
                slotPiece.add(pieces.size() - 1);
                slotBytes.add(bytes);
            } else if (action < 6 && inFlight < SLOTS - 2 && t.canStart()) { // bind + RNDV
                int length = 1 + rnd.nextInt(1 << 20);
                ByteBuf buf = Unpooled.buffer(1);
                bufs.add(buf);
                int bindSeq = slotPiece.size();
                start(t, buf, length, seq(bindSeq + 1));
                pieces.add(new long[] {length, 1, 0, 0});
                rendezvousPieces.add(pieces.size() - 1);
                for (int k = 0; k < 2; k++) { // the bind, then the RNDV: neither carries bytes of its own
                    t.posted(seq(slotPiece.size()));
                    slotPiece.add(pieces.size() - 1);
                    slotBytes.add(0L);
                }
            } else if (action < 9 && inFlight > 0) { // a completion retires a batch, in posted order
                int n = 1 + rnd.nextInt(inFlight);
                for (int k = 0; k < n; k++) {
                    int s = completedSlots++;
                    long[] piece = pieces.get(slotPiece.get(s));
                    boolean last = s + 1 == slotPiece.size() || !slotPiece.get(s + 1).equals(slotPiece.get(s));
                    if (last) {
                        piece[2] = 1;
                    }
                    settled += t.completed(seq(s), slotBytes.get(s));
                }
            } else if (dones < rendezvousPieces.size()) { // the oldest DONE
                assertNull(t.checkDone(dones, true, rkeyOf(t, dones)), "seed " + seed);
                pieces.get(rendezvousPieces.get(dones))[3] = 1;
                dones++;
                settled += t.done();
            }
            assertEquals(donePrefix(pieces), settled, "seed " + seed + ", step " + step);
        }
        t.close();
        for (ByteBuf buf : bufs) {
            assertEquals(1, buf.refCnt(), "seed " + seed + ": released exactly once");
        }
    }

    private static int seq(int s) {
        return s % SLOTS;
    }

    private static int rkeyOf(RendezvousSends t, int id) {
        ByteBuffer rndv = ByteBuffer.allocate(RdmaProtocol.RNDV_MESSAGE_LENGTH);
        t.putRendezvous(rndv, 0, 0, id);
        return rndv.getInt(RdmaProtocol.HEADER_LENGTH + 16);
    }

    private static long donePrefix(List<long[]> pieces) {
        long sum = 0;
        for (long[] p : pieces) {
            boolean done = p[2] == 1 && (p[1] == 0 || p[3] == 1);
            if (!done) {
                break;
            }
            sum += p[0];
        }
        return sum;
    }
}
