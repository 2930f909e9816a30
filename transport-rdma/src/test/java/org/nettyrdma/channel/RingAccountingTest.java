package org.nettyrdma.channel;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The WRITE ring's accounting on both ends (docs/protocol.md, "The WRITE ring"), with what a hostile peer may claim. */
class RingAccountingTest {
    private static final int SIZE = 1000;
    private static final long BASE = 1L << 40;

    @Test
    void writerPlacesMessagesWithoutWrappingAndPadsTheTail() {
        RingWriter w = new RingWriter(BASE, SIZE, 7);
        assertTrue(w.fits(600));
        assertEquals(BASE, w.place(600));
        assertFalse(w.needsPad(400));
        assertTrue(w.needsPad(401));
        assertFalse(w.fits(401), "400 bytes free");
        assertNull(w.onReleased(600));
        assertTrue(w.fits(500), "a 400-byte PAD and 500 bytes at 0 fit in 1000 free bytes");
        assertEquals(400, w.tail());
        assertEquals(BASE + 600, w.placePad());
        assertEquals(BASE, w.place(500));
        assertFalse(w.fits(101), "100 bytes free");
        assertTrue(w.fits(100));
    }

    @Test
    void writerRefusesReleasesBackwardsOrBeyondWhatWasWritten() {
        RingWriter w = new RingWriter(BASE, SIZE, 7);
        w.place(300);
        assertNotNull(w.onReleased(301), "beyond written");
        assertNull(w.onReleased(200));
        assertNotNull(w.onReleased(199), "backwards");
        assertNull(w.onReleased(200), "the same count again is no release");
        assertNull(w.onReleased(300));
    }

    @Test
    void writerReleasedCountWrapsAt32Bits() {
        RingWriter w = new RingWriter(BASE, 1 << 30, 7);
        long total = 0;
        for (int i = 0; i < 9; i++) { // 9 GiB through a 1 GiB ring: the u32 count wraps twice
            w.place(1 << 29);
            w.place(1 << 29);
            total += 1L << 30;
            assertNull(w.onReleased((int) total));
        }
        assertTrue(w.fits(1 << 29));
    }

    @Test
    void receiverAcceptsHonestMessagesAndFreesInOrder() {
        RingReceiveSpace r = new RingReceiveSpace(SIZE, 4);
        assertNull(r.onNotification(600, 600));
        assertEquals(0, r.lastOffset());
        assertNull(r.onNotification(400 | RingReceiveSpace.IMM_PAD, 0));
        assertEquals(-1, r.lastOffset());
        assertNotNull(r.onNotification(1, 1), "nothing released yet: the ring is full");
        r.freeOldest(); // the 600, and the PAD after it
        assertEquals(1000, r.takeReleased());
        assertNull(r.onNotification(500, 500));
        assertEquals(0, r.lastOffset());
    }

    @Test
    void receiverRefusesWhatAHostilePeerClaims() {
        RingReceiveSpace r = new RingReceiveSpace(SIZE, 4);
        assertNotNull(r.onNotification(100, 50), "more bytes claimed than written");
        assertNotNull(r.onNotification(0, 0), "an empty message");
        assertNotNull(r.onNotification(1001, 1001), "beyond the ring's end");
        assertNotNull(r.onNotification(999 | RingReceiveSpace.IMM_PAD, 0), "a PAD that is not the tail");
        assertNull(r.onNotification(900, 900));
        assertNotNull(r.onNotification(101, 101), "past the end");
        assertNotNull(r.onNotification(100 | RingReceiveSpace.IMM_PAD, 4), "a PAD that wrote bytes");
        assertNull(r.onNotification(100 | RingReceiveSpace.IMM_PAD, 0));
        assertNotNull(r.onNotification(1, 1), "beyond the space given: nothing released");
        r.freeOldest();
        assertEquals(1000, r.takeReleased());
        assertNull(r.onNotification(1000, 1000));
    }

    @Test
    void messageImmediateCarriesLengthAndCredits() {
        int imm = RingReceiveSpace.messageImm(RingReceiveSpace.IMM_MAX_LENGTH, RingReceiveSpace.IMM_MAX_CREDITS);
        assertEquals(RingReceiveSpace.IMM_MAX_CREDITS, RingReceiveSpace.immCredits(imm));
        assertEquals(0, RingReceiveSpace.immCredits(RingReceiveSpace.IMM_PAD | 5), "a PAD grants nothing");
        RingReceiveSpace r = new RingReceiveSpace(SIZE, 4);
        assertNull(r.onNotification(RingReceiveSpace.messageImm(10, 3), 10));
        assertNotNull(r.onNotification(RingReceiveSpace.messageImm(10, 3), 11), "length beside the credits checked");
    }

    @Test
    void receiverCountsOutstandingMessages() {
        RingReceiveSpace r = new RingReceiveSpace(SIZE, 2);
        assertNull(r.onNotification(10, 10));
        assertNull(r.onNotification(10, 10));
        assertNotNull(r.onNotification(10, 10), "more messages than receives");
        r.freeOldest();
        assertNull(r.onNotification(10, 10));
    }

    @Test
    void receiverAnnouncesAQuarterOfTheRing() {
        RingReceiveSpace r = new RingReceiveSpace(SIZE, 8);
        assertNull(r.onNotification(249, 249));
        r.freeOldest();
        assertFalse(r.shouldAnnounce());
        assertNull(r.onNotification(1, 1));
        r.freeOldest();
        assertTrue(r.shouldAnnounce());
        assertEquals(250, r.takeReleased());
        assertFalse(r.shouldAnnounce());
    }
}
