package org.nettyrdma.channel;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The credit rules of docs/protocol.md, one at a time. */
class CreditWindowTest {

    @Test
    void dataKeepsTheLastCreditForACreditMessage() {
        CreditWindow w = new CreditWindow(16);
        assertNull(w.peerReady(3));
        assertTrue(w.canSendData());
        w.spend();
        assertTrue(w.canSendData());
        w.spend();
        assertFalse(w.canSendData(), "one credit left: kept for a CREDIT message");
        assertTrue(w.canSendControl());
        w.spend();
        assertFalse(w.canSendControl());
        assertNull(w.onReceived(2));
        assertTrue(w.canSendData());
    }

    @Test
    void aHeaderCarriesEverythingOwedUpToItsLimit() {
        CreditWindow w = new CreditWindow(16);
        w.oweData(3);
        w.oweControl();
        assertEquals(4, w.takeOwed());
        assertEquals(0, w.takeOwed());
        w.oweData(RdmaProtocol.MAX_CREDITS_PER_HEADER + 5);
        assertEquals(RdmaProtocol.MAX_CREDITS_PER_HEADER, w.takeOwed());
        assertEquals(5, w.takeOwed());
    }

    @Test
    void creditMessagesGoOutForAQuarterOfTheReceivesNeverForControlCreditsAlone() {
        CreditWindow w = new CreditWindow(16);
        assertNull(w.peerReady(16));
        // the peer has all 16 of our receives as credits: it is not starving
        for (int i = 0; i < 10; i++) {
            w.oweControl();
        }
        assertFalse(w.shouldReturnCredits(), "control credits alone would ping-pong between idle peers");
        w.oweData(3);
        assertFalse(w.shouldReturnCredits(), "3 data credits of 16 receives: below a quarter");
        w.oweData(1);
        assertTrue(w.shouldReturnCredits());
        w.takeOwed();
        assertFalse(w.shouldReturnCredits());
    }

    @Test
    void aStarvingPeerGetsEvenOneCredit() {
        CreditWindow w = new CreditWindow(16);
        assertNull(w.peerReady(16));
        for (int i = 0; i < 15; i++) {
            assertNull(w.onReceived(0)); // the peer used 15 of the 16 receives it was granted
        }
        w.oweData(1);
        assertTrue(w.shouldReturnCredits(), "granted 16, received 15: the peer may be down to its last credit");
    }

    /** Rule 2's second case: the trace of docs/protocol.md, from the side that holds the control credits. */
    @Test
    void controlCreditsGoBackToAStarvingPeerTwoOrMoreAtATime() {
        CreditWindow w = new CreditWindow(4);
        assertNull(w.peerReady(4));
        for (int i = 0; i < 3; i++) {
            assertNull(w.onReceived(0)); // the peer's greeting and two CREDIT messages: it holds 1 of our 4 receives
            w.oweControl();
        }
        assertTrue(w.shouldReturnCredits(), "3 control credits owed to a peer down to 1 credit: it may be stuck");
        assertEquals(3, w.takeOwed());
        assertFalse(w.shouldReturnCredits());
        CreditWindow one = new CreditWindow(4);
        assertNull(one.peerReady(4));
        for (int i = 0; i < 3; i++) {
            assertNull(one.onReceived(0));
        }
        one.oweControl();
        assertFalse(one.shouldReturnCredits(), "one control credit alone would bounce between two starving peers");
        one.oweControl();
        assertTrue(one.shouldReturnCredits());
    }

    @Test
    void noCreditMessageWithoutACreditToSendItWith() {
        CreditWindow w = new CreditWindow(4);
        assertNull(w.peerReady(2));
        w.spend();
        w.spend();
        w.oweData(4);
        assertFalse(w.shouldReturnCredits());
    }

    @Test
    void aPeerCannotGrantMoreThanItsReceiveBuffers() {
        CreditWindow w = new CreditWindow(16);
        assertNull(w.peerReady(8));
        w.spend();
        w.spend();
        assertNull(w.onReceived(2), "back to 8 of 8");
        String violation = w.onReceived(1);
        assertNotNull(violation);
        assertTrue(violation.contains("9 credits, more than its 8 receive buffers"), violation);
        assertNotNull(w.onReceived(0xffff), "a header's largest grant");
    }

    @Test
    void creditsBeforeTheHandshakeAreCheckedWhenItComes() {
        CreditWindow early = new CreditWindow(16);
        assertNull(early.onReceived(40), "the peer's receive count is not known yet");
        assertNotNull(early.peerReady(16), "40 credits before a handshake of 16 receives");
        CreditWindow honest = new CreditWindow(16);
        assertNull(honest.peerReady(16));
        assertEquals(16, countDataSends(honest) + 1, "all but the reserved credit can carry data");
    }

    private static int countDataSends(CreditWindow w) {
        int n = 0;
        while (w.canSendData()) {
            w.spend();
            n++;
        }
        return n;
    }
}
