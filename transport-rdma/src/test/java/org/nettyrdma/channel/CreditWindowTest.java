package org.nettyrdma.channel;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
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
        int many = RdmaProtocol.MAX_CREDITS_PER_HEADER + 5;
        CreditWindow w = new CreditWindow(many);
        receive(w, 4);
        w.oweData(3);
        w.oweControl();
        assertEquals(4, w.takeOwed());
        assertEquals(0, w.takeOwed());
        receive(w, many);
        w.oweData(many);
        assertEquals(RdmaProtocol.MAX_CREDITS_PER_HEADER, w.takeOwed());
        assertEquals(5, w.takeOwed());
        assertEquals(0, w.forgiven());
    }

    @Test
    void creditMessagesGoOutForAQuarterOfTheReceivesNeverForControlCreditsAlone() {
        CreditWindow w = new CreditWindow(32);
        assertNull(w.peerReady(16));
        receive(w, 16);
        // the peer still has 16 of our 32 receives as credits: it is not starving
        for (int i = 0; i < 12; i++) {
            w.oweControl();
        }
        assertFalse(w.shouldReturnCredits(), "control credits alone would ping-pong between idle peers");
        w.oweData(7);
        assertFalse(w.shouldReturnCredits(), "7 data credits of 32 receives: below a quarter");
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
        receive(w, 4);
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
        assertTrue(violation.contains("9 credits, more than its limit of 8 receives"), violation);
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

    /** The peer's handshake grants fewer credits than its limit; it may grant up to the limit, not beyond. */
    @Test
    void aPooledPeerMayGrantUpToItsLimitNotBeyond() {
        CreditWindow w = new CreditWindow(16);
        assertNull(w.peerReady(4, 8));
        assertEquals(4, w.sendCredits());
        assertNull(w.onReceived(4), "8 of a limit of 8");
        String violation = w.onReceived(1);
        assertNotNull(violation);
        assertTrue(violation.contains("9 credits, more than its limit of 8 receives"), violation);
        CreditWindow early = new CreditWindow(16);
        assertNull(early.onReceived(4), "credits with data before the handshake");
        assertNull(early.peerReady(4, 8), "4 early and 4 initial: within the limit of 8");
        CreditWindow tooEarly = new CreditWindow(16);
        assertNull(tooEarly.onReceived(5));
        assertNotNull(tooEarly.peerReady(4, 8), "5 early and 4 initial: beyond the limit of 8");
    }

    /** Shrinking the target: owed credits beyond it are forgiven, then what the peer still holds beyond it. */
    @Test
    void owedCreditsBeyondTheTargetAreForgivenControlFirst() {
        CreditWindow w = new CreditWindow(16, 16);
        assertNull(w.peerReady(16));
        receive(w, 10); // the peer holds 6 of our receives; 10 messages arrived
        w.oweControl();
        w.oweControl();
        w.oweData(5); // 3 DATA still unread
        assertEquals(16, w.reservation());
        w.setTarget(8);
        assertEquals(8, w.peerOutstanding() + w.owedData() + w.owedControl(), "6 held, 2 owed: the target");
        assertEquals(0, w.owedControl(), "control credits go first");
        assertEquals(2, w.owedData());
        assertEquals(5, w.forgiven());
        assertEquals(11, w.reservation(), "and 3 unread in their receives");
        w.oweData(3); // the last 3 read: all beyond the target
        assertEquals(2, w.owedData());
        assertEquals(8, w.forgiven());
        assertEquals(2, w.takeOwed());
        assertEquals(8, w.peerOutstanding());
        // shrinking below what the peer holds: its credits stay valid, the reservation follows them down
        w.setTarget(4);
        assertEquals(8, w.reservation(), "the peer holds 8: the receives must stay posted");
        receive(w, 3);
        assertEquals(8, w.reservation(), "5 held, 3 unread");
        w.oweData(3);
        assertEquals(5, w.reservation());
        assertEquals(0, w.takeOwed(), "5 held of a target of 4: nothing more to grant");
        receive(w, 2);
        w.oweData(2);
        assertEquals(4, w.reservation());
        assertEquals(1, w.takeOwed(), "3 held: one back to the target");
        assertEquals(4, w.peerOutstanding());
    }

    /**
     * A slow reader's window shrank with the peer's messages unread, and grows again: the growth owes no more than the
     * limit leaves beside them, so the peer never has more messages in flight and unread than the limit's receive slots
     * (a pool holds at most that many for the connection: one more is a protocol violation). Found by
     * CreditWindowModelTest; before, the growth owed all 8 new receives and the peer could hold 9 with 15 unread.
     */
    @Test
    void growingWithMessagesUnreadStaysWithinTheLimit() {
        CreditWindow w = new CreditWindow(16, 16);
        assertNull(w.peerReady(16));
        receive(w, 16); // all unread: the pipeline holds them (auto-read off, a reader on another executor)
        w.setTarget(8);
        w.oweData(1); // one read
        assertEquals(1, w.owedData());
        assertEquals(16, w.reservation(16), "all 16 taken: nothing to reserve beyond them");
        w.setTarget(16);
        assertEquals(1, w.owedData(), "15 unread: no receive left beside them");
        assertEquals(1, w.takeOwed());
        assertEquals(16, w.peerOutstanding() + 15, "in flight and unread: the limit");
        assertEquals(16, w.occupied());
        w.oweData(15); // all read: owed back, the peer may hold all 16
        assertEquals(15, w.takeOwed());
        assertEquals(16, w.peerOutstanding());
        w.setTarget(4);
        receive(w, 12);
        w.oweData(2); // beyond the target: forgiven
        assertEquals(0, w.owedData());
        assertEquals(16, w.reservation(8), "4 held, 10 unread: the growth to 8 owes 2, not 4");
        w.setTarget(8);
        assertEquals(2, w.owedData());
    }

    /** Growing the target owes the new receives, as data credits, so that they reach the peer soon. */
    @Test
    void growingTheTargetOwesTheNewReceives() {
        CreditWindow w = new CreditWindow(4, 16);
        assertNull(w.peerReady(4));
        receive(w, 3); // the peer is down to 1 credit
        w.oweData(1);
        w.setTarget(8);
        assertEquals(5, w.owedData(), "1 read and 4 new receives");
        assertTrue(w.shouldReturnCredits(), "a quarter of the new target of 8");
        assertEquals(5, w.takeOwed());
        assertEquals(6, w.peerOutstanding());
        assertEquals(8, w.reservation());
        assertEquals(0, w.forgiven());
        assertThrows(IllegalArgumentException.class, () -> w.setTarget(17), "beyond the announced limit");
        assertThrows(IllegalArgumentException.class, () -> w.setTarget(CreditWindow.FLOOR - 1), "below the floor");
    }

    /**
     * The accepted side keeps its peer going (pooled credits): windows may come down to 2; it returns a single control
     * credit to a peer that may be starving (the connecting side waits for two) and pokes at its last credit when a
     * DATA or FIN waits.
     */
    @Test
    void theAcceptedSideKeepsAStarvingPeerGoing() {
        CreditWindow server = new CreditWindow(4, 16);
        CreditWindow client = new CreditWindow(4, 16);
        assertNull(server.peerReady(4, 16));
        assertNull(client.peerReady(4, 16));
        assertThrows(IllegalArgumentException.class, () -> server.setTarget(CreditWindow.KEPT_FLOOR), "floor 3 first");
        server.keepPeerGoing(true);
        client.keepPeerGoing(false);
        server.setTarget(CreditWindow.KEPT_FLOOR);
        client.setTarget(CreditWindow.KEPT_FLOOR);
        assertEquals(CreditWindow.KEPT_FLOOR, server.floor());
        for (CreditWindow w : new CreditWindow[] {server, client}) {
            receive(w, 3); // the peer holds 1 of the 4 it started with: it may be starving
            w.oweControl();
        }
        assertTrue(server.shouldReturnCredits(), "one control credit to a starving peer: the accepted side returns it");
        assertFalse(client.shouldReturnCredits(), "the connecting side waits for two");
        receive(client, 1); // the server's poke: its last credit
        client.oweControl();
        assertEquals(2, client.owedControl());
        assertTrue(client.shouldReturnCredits(), "two control credits to a starving peer");

        CreditWindow keeper = new CreditWindow(4, 16);
        assertNull(keeper.peerReady(2, 16));
        keeper.keepPeerGoing(true);
        keeper.spend();
        assertTrue(keeper.shouldPoke(true), "at its last credit with a DATA waiting");
        assertFalse(keeper.shouldPoke(false), "nothing waits");
        keeper.spend();
        assertFalse(keeper.shouldPoke(true), "no credit left to poke with");
        CreditWindow other = new CreditWindow(4, 16);
        assertNull(other.peerReady(1, 16));
        other.keepPeerGoing(false);
        assertFalse(other.shouldPoke(true), "the connecting side never pokes");
    }

    /** With the target at the receive count (no pool), nothing an honest peer does makes a credit forgiven. */
    @Test
    void aFixedWindowForgivesNothing() {
        CreditWindow w = new CreditWindow(4);
        assertNull(w.peerReady(4));
        for (int round = 0; round < 10; round++) {
            receive(w, 4);
            w.oweControl();
            w.oweData(3);
            assertEquals(4, w.takeOwed());
        }
        assertEquals(0, w.forgiven());
        assertEquals(4, w.peerOutstanding());
    }

    /**
     * The connecting side created its window with its whole receive count; pooled credits negotiated, its handshake
     * started the peer at {@link CreditWindow#POOLED_INITIAL}, and the window restates that: nothing granted beyond it, early messages checked.
     */
    @Test
    void aConnectingSideRestatesItsWindowAtThePooledStart() {
        CreditWindow w = new CreditWindow(16, 16);
        receive(w, 2); // data that beat the handshake
        w.oweControl();
        assertNull(w.peerReady(4, 16));
        assertNull(w.startPooled(CreditWindow.POOLED_INITIAL));
        assertEquals(CreditWindow.POOLED_INITIAL, w.target());
        assertEquals(2, w.peerOutstanding(), "4 granted, 2 arrived");
        assertEquals(1, w.owedControl(), "within the target: still owed");
        assertEquals(16, w.limit(), "it may grow to the limit it announced");

        CreditWindow early = new CreditWindow(16, 16);
        receive(early, 5);
        assertTrue(early.startPooled(CreditWindow.POOLED_INITIAL).contains("sent 5 messages before the handshake, more than "
                + "the 4 credits"));
        CreditWindow granted = new CreditWindow(16, 16);
        receive(granted, 1);
        granted.oweControl();
        assertEquals(1, granted.takeOwed());
        assertThrows(IllegalStateException.class, () -> granted.startPooled(CreditWindow.POOLED_INITIAL),
                "credits granted beyond the start: the send side was open before the handshake");
    }

    /**
     * An idle sender gives back what it holds beyond the floor, keeping one credit for the CREDIT message that carries
     * them; the receiver takes them as arrived messages that owe nothing, and refuses more than the sender held.
     */
    @Test
    void surplusCreditsGoBackUnspentAndTheReceiverChecksThem() {
        CreditWindow sender = new CreditWindow(4, 16);
        assertNull(sender.peerReady(12, 16));
        assertTrue(sender.returnSurplus(CreditWindow.FLOOR - 1));
        assertEquals(3, sender.sendCredits(), "FLOOR - 1 = 2 kept and the CREDIT message's credit");
        assertFalse(sender.returnSurplus(CreditWindow.FLOOR - 1), "nothing more to return");
        assertEquals(9, sender.takeReturning());
        assertEquals(0, sender.takeReturning(), "taken once");
        sender.spend();
        assertEquals(1, sender.spent());

        CreditWindow receiver = new CreditWindow(12, 16);
        assertNull(receiver.peerReady(4, 16));
        receiver.setTarget(CreditWindow.FLOOR); // the window shrank: the peer still holds 12
        assertEquals(12, receiver.reservation());
        assertNull(receiver.onReceived(0)); // the CREDIT message itself
        assertNull(receiver.onReturned(9));
        assertEquals(2, receiver.peerOutstanding(), "12 granted, 1 message and 9 returned");
        assertEquals(0, receiver.owedData() + receiver.owedControl(), "returned credits are not owed back");
        receiver.oweControl(); // the CREDIT message's receive, posted again: the floor in all
        assertEquals(3, receiver.reservation());
        assertNull(receiver.onReceived(0));
        assertEquals("returned 3 credits, more than it held (1)", receiver.onReturned(3));
    }

    private static void receive(CreditWindow w, int messages) {
        for (int i = 0; i < messages; i++) {
            assertNull(w.onReceived(0));
        }
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
