package org.nettyrdma.channel;

/**
 * The credits of one connection, both ways (docs/protocol.md, "Credits"): what this side may send into the peer's
 * receives, and what it owes the peer for receives it posted again. Event loop only.
 *
 * <p>Rules kept here: DATA and FIN need two credits (the last is kept for a CREDIT message); every header carries
 * what is owed, at most {@value RdmaProtocol#MAX_CREDITS_PER_HEADER}; a CREDIT message goes out when owed data
 * credits reach a quarter of the receives, or when the peer may be out of credits and data credits, or at least two
 * control credits, are owed; and a peer never grants more credits than the receive buffers it announced.
 */
final class CreditWindow {
    private final int receiveCount;
    /** Credits this side may spend: receives the peer has posted for it. */
    private int sendCredits;
    /** The receive buffers the peer announced: more credits than these it cannot honestly grant. */
    private int peerReceiveCount = Integer.MAX_VALUE;
    /** Receives posted again after the pipeline read a DATA message (or one was dropped), not yet announced. */
    private int owedData;
    /** Receives posted again at once after a CREDIT or FIN, not yet announced. */
    private int owedCtrl;
    private long grantedToPeer;
    private long receivedFromPeer;

    /** @param receiveCount this side's receive buffers: the credits the peer starts with */
    CreditWindow(int receiveCount) {
        this.receiveCount = receiveCount;
        grantedToPeer = receiveCount;
    }

    /** A copy of {@code other} (CreditWindowModelTest explores the states of two windows). */
    CreditWindow(CreditWindow other) {
        receiveCount = other.receiveCount;
        sendCredits = other.sendCredits;
        peerReceiveCount = other.peerReceiveCount;
        owedData = other.owedData;
        owedCtrl = other.owedCtrl;
        grantedToPeer = other.grantedToPeer;
        receivedFromPeer = other.receivedFromPeer;
    }

    /**
     * The peer's handshake: it posted {@code count} receives for this side. Returns what is wrong if credits that came
     * earlier (with data that beat the handshake) already exceed them, else {@code null}.
     */
    String peerReady(int count) {
        peerReceiveCount = count;
        sendCredits += count;
        return sendCredits > count ? "granted " + sendCredits + " credits, more than its " + count
                + " receive buffers" : null;
    }

    /**
     * A message arrived granting {@code credits}; returns what is wrong if that makes more credits than the peer has
     * receive buffers (they are not taken then), else {@code null}.
     */
    String onReceived(int credits) {
        receivedFromPeer++;
        if (receivedFromPeer > grantedToPeer) {
            return "sent " + receivedFromPeer + " messages, more than the " + grantedToPeer + " credits it was granted";
        }
        if ((long) sendCredits + credits > peerReceiveCount) {
            return "granted " + ((long) sendCredits + credits) + " credits, more than its " + peerReceiveCount
                    + " receive buffers";
        }
        sendCredits += credits;
        return null;
    }

    /** Whether a DATA or FIN message may be sent: it needs a credit beyond the one kept for CREDIT messages. */
    boolean canSendData() {
        return sendCredits >= 2;
    }

    /** Whether {@code n} data messages may be sent, keeping the credit for CREDIT messages. */
    boolean canSpend(int n) {
        return sendCredits >= n + 1;
    }

    /** Whether a CREDIT message may be sent. */
    boolean canSendControl() {
        return sendCredits >= 1;
    }

    /** A message was posted: it took one of the peer's receives. */
    void spend() {
        sendCredits--;
    }

    /** {@code n} receives were posted again for DATA (read by the pipeline, or dropped). */
    void oweData(int n) {
        owedData += n;
    }

    /** A receive was posted again at once after a CREDIT or FIN (or data nobody reads). */
    void oweControl() {
        owedCtrl++;
    }

    /** The credits for the next header: everything owed, at most what a header holds. */
    int takeOwed() {
        return takeOwed(RdmaProtocol.MAX_CREDITS_PER_HEADER);
    }

    /** The credits for a message that holds at most {@code max} (a ring write's immediate data): what is owed, up to it. */
    int takeOwed(int max) {
        int n = Math.min(owedData + owedCtrl, max);
        int fromData = Math.min(n, owedData);
        owedData -= fromData;
        owedCtrl -= n - fromData;
        grantedToPeer += n;
        return n;
    }

    /**
     * Whether a CREDIT message should go out now, with a credit to spend on it (docs/protocol.md, "Credits", rule 2):
     * <ul>
     *   <li>data credits owed reached a quarter of the receives; or</li>
     *   <li>the peer may be out of credits (what it was granted minus what it sent is at most 1) and data credits are
     *   owed, or at least two control credits.</li>
     * </ul>
     * The second case returns control credits without data: a side whose last credits went into CREDIT messages would
     * otherwise wait forever for a peer with nothing to write. A single control credit never goes back alone: the
     * CREDIT carrying it is a control credit itself, so two peers that each look out of credits to the other (both
     * hold unread messages) would bounce it forever; carrying at least two, every such CREDIT lowers what both sides
     * owe. CreditWindowModelTest checks both, deadlock and ping-pong, over every interleaving of two windows.
     */
    boolean shouldReturnCredits() {
        if (owedData + owedCtrl == 0 || !canSendControl()) {
            return false;
        }
        if (owedData >= Math.max(1, receiveCount / 4)) {
            return true;
        }
        boolean peerStarving = grantedToPeer - receivedFromPeer <= 1;
        return peerStarving && (owedData > 0 || owedCtrl >= 2);
    }

    /** Credits this side may spend. */
    int sendCredits() {
        return sendCredits;
    }

    /** Data credits owed to the peer. */
    int owedData() {
        return owedData;
    }

    /** Control credits owed to the peer. */
    int owedControl() {
        return owedCtrl;
    }

    /** Messages the peer may still send or has in flight: what it was granted minus what arrived from it. */
    long peerOutstanding() {
        return grantedToPeer - receivedFromPeer;
    }

    /** Messages that arrived from the peer in all (each spent one of its credits). */
    long receivedFromPeer() {
        return receivedFromPeer;
    }

    @Override
    public String toString() {
        return "credits{send " + sendCredits + ", owed data " + owedData + ", owed control " + owedCtrl
                + ", granted " + grantedToPeer + ", received " + receivedFromPeer + '}';
    }
}
