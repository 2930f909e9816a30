package org.nettyrdma.channel;

/**
 * The credits of one connection, both ways (docs/protocol.md, "Credits"): what this side may send into the peer's
 * receives, and what it owes the peer for receives it posted again. Event loop only.
 *
 * <p>Rules kept here: DATA and FIN need two credits (the last is kept for a CREDIT message; only a FIN after
 * {@code close()} may take it, {@code RdmaConnection#sendFin}); every header carries what is owed, at most
 * {@value RdmaProtocol#MAX_CREDITS_PER_HEADER}; a CREDIT message goes out when owed data credits reach a quarter of the
 * window, or when the peer may be out of credits and data credits, or at least two control credits, are owed; and a
 * peer never grants more credits than the limit it announced.
 *
 * <p>Pooled credits (docs/srq-design.md, section 2): the receive side has a <em>target</em> {@code T}, the receives
 * it means the peer to hold, between {@value #FLOOR} and its announced limit. Credits owed beyond it are
 * <em>forgiven</em> as soon as they are owed: never granted, so that what the peer holds plus what is owed to it stays
 * within {@code T} ({@link #forgiven()} counts them for the pool). Growing the target owes the new receives as data
 * credits, but never more than the limit leaves beside what the connection takes already ({@link #occupied}: what
 * the peer holds, what is owed to it, and its messages held unread, which a shrink does not count): the peer can never
 * have more messages in flight and unread than the receive slots its limit announced. With the target equal to the
 * receive count (per-QP receives, and every window until the pool exists) no credit is ever forgiven and the rules are
 * v1's.
 */
final class CreditWindow {
    /**
     * The smallest target of a window when neither side keeps a starving peer going ({@link #keepPeerGoing}): a DATA
     * needs two credits, and a side stuck at one credit with nothing in flight leaves {@code FLOOR - 1} receives with
     * its peer as unread messages or owed credits, which rule 2 returns (data credits, or at least two control
     * credits). CreditWindowModelTest checks it.
     */
    static final int FLOOR = 3;
    /**
     * The smallest target when one side of the connection keeps a starving peer going (pooled credits, the accepted
     * side announcing it: {@link #keepPeerGoing}); at 2 without it two windows deadlock (CreditWindowModelTest).
     */
    static final int KEPT_FLOOR = 2;
    /**
     * The credits a pooled window starts with (what a handshake's extension says), and the least receive count. Sides
     * that came before the floor came down refuse a handshake that starts them lower than 4, so a window starts here
     * and comes down at its first unstarved tick.
     */
    static final int POOLED_INITIAL = 4;

    /** The most receives this side announced it may grant the peer (its handshake's credit limit). */
    private final int limit;
    /** The receives this side means the peer to hold: FLOOR..limit. */
    private int target;
    /** Credits this side may spend: receives the peer has posted for it. */
    private int sendCredits;
    /** The most credits the peer announced it may grant: more it cannot honestly grant. */
    private int peerLimit = Integer.MAX_VALUE;
    /** Receives posted again after the pipeline read a DATA message (or one was dropped), not yet announced. */
    private int owedData;
    /** Receives posted again at once after a CREDIT or FIN, not yet announced. */
    private int owedCtrl;
    private long grantedToPeer;
    private long receivedFromPeer;
    /** Messages of the peer's that arrived and are not owed back yet: DATA not read (or dropped) yet. */
    private int unread;
    /** Owed credits that went beyond the target and were never granted, in all. */
    private long forgiven;
    /** Messages this side sent in all (each spent a credit). */
    private long spent;
    /** Credits taken out of {@link #sendCredits} to be given back by the next CREDIT message (pooled credits). */
    private int returning;
    /** The smallest target: {@link #FLOOR}, or {@link #KEPT_FLOOR} when a side keeps a starving peer going. */
    private int floor = FLOOR;
    /** Whether this side keeps a starving peer going: returns a lone control credit, pokes ({@link #shouldPoke}). */
    private boolean keepsPeerGoing;

    /** @param receiveCount this side's receive buffers: the credits the peer starts with, and all it may ever hold */
    CreditWindow(int receiveCount) {
        this(receiveCount, receiveCount);
    }

    /**
     * @param initial the credits the peer starts with: the window's first target
     * @param limit the most credits this side may ever grant (announced to the peer); at least {@code initial}
     */
    CreditWindow(int initial, int limit) {
        if (initial < 1 || limit < initial) {
            throw new IllegalArgumentException("initial credits " + initial + ", limit " + limit
                    + ": need 1 <= initial <= limit");
        }
        this.limit = limit;
        target = initial;
        grantedToPeer = initial;
    }

    /** A copy of {@code other} (CreditWindowModelTest explores the states of two windows). */
    CreditWindow(CreditWindow other) {
        limit = other.limit;
        target = other.target;
        sendCredits = other.sendCredits;
        peerLimit = other.peerLimit;
        owedData = other.owedData;
        owedCtrl = other.owedCtrl;
        grantedToPeer = other.grantedToPeer;
        receivedFromPeer = other.receivedFromPeer;
        unread = other.unread;
        forgiven = other.forgiven;
        spent = other.spent;
        returning = other.returning;
        floor = other.floor;
        keepsPeerGoing = other.keepsPeerGoing;
    }

    /**
     * The peer's handshake (v1): it posted {@code count} receives for this side, all it may ever grant. Returns what
     * is wrong if credits that came earlier (with data that beat the handshake) already exceed them, else {@code null}.
     */
    String peerReady(int count) {
        return peerReady(count, count);
    }

    /**
     * The peer's handshake: it starts this side with {@code initial} credits and may grant up to {@code limit} (pooled
     * credits; v1: both its receive count). Returns what is wrong if credits that came earlier (with data that beat
     * the handshake) already exceed the limit, else {@code null}.
     */
    String peerReady(int initial, int limit) {
        peerLimit = limit;
        sendCredits += initial;
        return sendCredits > limit ? "granted " + sendCredits + " credits, more than its limit of " + limit
                + " receives" : null;
    }

    /**
     * Pooled credits were negotiated after this side created its window with its whole receive count (the connecting
     * side, which speaks first): the peer starts with {@code initial} credits, as the handshake's extension said, and
     * the target comes down to it. Nothing was granted since (the send side opens only now). Returns what is wrong if
     * the peer already sent more messages than that, else {@code null}.
     */
    String startPooled(int initial) {
        if (initial < FLOOR || initial > target || grantedToPeer != target) {
            throw new IllegalStateException("pooled start at " + initial + " credits: " + this);
        }
        grantedToPeer = initial;
        target = initial;
        forgiveExcess();
        return receivedFromPeer > grantedToPeer ? "sent " + receivedFromPeer + " messages before the handshake, more "
                + "than the " + grantedToPeer + " credits it starts with" : null;
    }

    /**
     * Pooled credits with a side that keeps a starving peer going (docs/protocol.md, "Credits"): the accepted side,
     * which announced it in its handshake. The target may come down to {@link #KEPT_FLOOR}. If {@code thisSide}, this
     * side returns a single control credit to a peer that may be out of credits (the connecting side never does: both
     * doing so would bounce it for ever), and spends its last credit on a CREDIT message when a DATA or FIN waits
     * ({@link #shouldPoke}): the peer then owes two control credits, which rule 2 returns.
     */
    void keepPeerGoing(boolean thisSide) {
        floor = KEPT_FLOOR;
        keepsPeerGoing = thisSide;
    }

    /**
     * What an idle sender keeps when it gives its surplus back ({@link #returnSurplus}): {@code floor - 1}, so that
     * with the CREDIT message's own credit owed back its peer's window is at the floor again. At a floor of 2 the
     * sender then holds one credit: a connecting side gets the CREDIT message's credit straight back (a lone control
     * credit to a starving peer), an accepted side pokes before its next DATA.
     */
    int creditsToKeep() {
        return floor - 1;
    }

    /** The smallest target of this window. */
    int floor() {
        return floor;
    }

    /**
     * Whether this side, keeping its peer going, should spend its last credit on a CREDIT message: {@code waiting} a
     * DATA or FIN that needs two. Without it a peer at a window of 2 that owes one control credit would never return
     * it.
     */
    boolean shouldPoke(boolean waiting) {
        return keepsPeerGoing && waiting && sendCredits == 1;
    }

    /**
     * A message arrived granting {@code credits}; returns what is wrong if that makes more credits than the peer's
     * limit (they are not taken then), else {@code null}.
     */
    String onReceived(int credits) {
        receivedFromPeer++;
        unread++;
        if (receivedFromPeer > grantedToPeer) {
            return "sent " + receivedFromPeer + " messages, more than the " + grantedToPeer + " credits it was granted";
        }
        if ((long) sendCredits + credits > peerLimit) {
            return "granted " + ((long) sendCredits + credits) + " credits, more than its limit of " + peerLimit
                    + " receives";
        }
        sendCredits += credits;
        return null;
    }

    /**
     * Whether a DATA message, or the FIN of a {@code shutdownOutput()}, may be sent: it needs a credit beyond the one
     * kept for CREDIT messages.
     */
    boolean canSendData() {
        return sendCredits >= 2;
    }

    /** Whether {@code n} data messages may be sent, keeping the credit for CREDIT messages. */
    boolean canSpend(int n) {
        return sendCredits >= n + 1;
    }

    /** Whether a CREDIT message, or the FIN of a {@code close()}, may be sent. */
    boolean canSendControl() {
        return sendCredits >= 1;
    }

    /** A message was posted: it took one of the peer's receives. */
    void spend() {
        sendCredits--;
        spent++;
    }

    /** Messages this side sent in all. */
    long spent() {
        return spent;
    }

    /**
     * Pooled credits: sets aside the credits beyond {@code keep} and the one the CREDIT message carrying them spends, to
     * be given back to the peer unspent ({@link #takeReturning}); returns whether there are any (the caller then posts
     * a CREDIT message). An idle sender does so, so that its peer's pool can let the receives behind them go; it keeps
     * {@code FLOOR - 1}, as the peer owes the CREDIT message's own credit back: the floor again, in all.
     */
    boolean returnSurplus(int keep) {
        int surplus = Math.min(sendCredits - 1 - keep, RdmaProtocol.MAX_RETURNED_PER_HEADER - returning);
        if (surplus <= 0) {
            return false;
        }
        sendCredits -= surplus;
        returning += surplus;
        return true;
    }

    /** The credits set aside by {@link #returnSurplus}, for the CREDIT message's header: taken, no longer owed back. */
    int takeReturning() {
        int n = returning;
        returning = 0;
        return n;
    }

    /**
     * The peer gave back {@code n} credits unspent (pooled credits): it will not send into those receives. Returns what
     * is wrong if it did not hold that many, else {@code null}. They are not owed back: the peer's window is smaller.
     */
    String onReturned(int n) {
        receivedFromPeer += n;
        return receivedFromPeer > grantedToPeer ? "returned " + n + " credits, more than it held (" + (grantedToPeer
                - receivedFromPeer + n) + ')' : null;
    }

    /** {@code n} receives were posted again for DATA (read by the pipeline, or dropped). */
    void oweData(int n) {
        unread -= n;
        owedData += n;
        forgiveExcess();
    }

    /** A receive was posted again at once after a CREDIT or FIN (or data nobody reads). */
    void oweControl() {
        unread--;
        owedCtrl++;
        forgiveExcess();
    }

    /**
     * Sets the receives the peer is meant to hold ({@value #FLOOR} to the limit). Growing owes the new receives as
     * data credits ({@link #growth}; the caller reserved {@link #reservation(int)} at the new target first); shrinking
     * forgives what is owed beyond the new target, and what the peer still holds beyond it is forgiven as it comes
     * back.
     */
    void setTarget(int t) {
        if (t < floor || t > limit) {
            throw new IllegalArgumentException("target " + t + " outside " + floor + ".." + limit);
        }
        owedData += growth(t);
        target = t;
        forgiveExcess();
    }

    /**
     * The receives a growth of the target to {@code t} owes: the new ones, but no more than the limit leaves beside what
     * the connection takes ({@link #occupied}). Messages held unread after a shrink are not counted by the target, so
     * without this bound a slow reader's window that shrank and grew again could let the peer send more than the
     * receive slots the limit announced (CreditWindowModelTest).
     */
    private int growth(int t) {
        return t <= target ? 0 : (int) Math.max(0, Math.min(t - target, limit - occupied()));
    }

    /**
     * Keeps what the peer holds plus what is owed to it within the target: the excess is forgiven, control credits
     * first (data credits are the ones that make a CREDIT message go out: rule 2).
     */
    private void forgiveExcess() {
        long excess = grantedToPeer - receivedFromPeer + owedData + owedCtrl - target;
        if (excess <= 0) {
            return;
        }
        int fromCtrl = (int) Math.min(excess, owedCtrl);
        int fromData = (int) Math.min(excess - fromCtrl, owedData);
        owedCtrl -= fromCtrl;
        owedData -= fromData;
        forgiven += fromCtrl + fromData;
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
     *   <li>data credits owed reached a quarter of the target (the receive count without a pool), at least 2 (a
     *   single one waits for the next header: the reply, in a ping-pong); or</li>
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
        if (owedData >= Math.max(2, target / 4)) {
            return true;
        }
        boolean peerStarving = grantedToPeer - receivedFromPeer <= 1;
        return peerStarving && (owedData > 0 || owedCtrl >= (keepsPeerGoing ? 1 : 2));
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

    /** The receives this side means the peer to hold. */
    int target() {
        return target;
    }

    /** The most credits this side may grant. */
    int limit() {
        return limit;
    }

    /** Owed credits never granted because they went beyond the target, in all. */
    long forgiven() {
        return forgiven;
    }

    /**
     * What the connection takes of the receives: what the peer holds, what is owed to it, and its messages held unread
     * (each owed when read). Only a growth of the target raises it, and never beyond the limit.
     */
    long occupied() {
        return grantedToPeer - receivedFromPeer + owedData + owedCtrl + unread;
    }

    /**
     * The receives this connection needs in a pool at a target of {@code t} (before {@link #setTarget} grows it there):
     * {@code t}, or more while it takes more ({@link #occupied}), as after the target came down (they are forgiven as
     * the peer's messages arrive and are read). Only a growth of the target raises what it takes, so a reservation kept
     * at least at this covers every message an honest peer can send.
     */
    long reservation(int t) {
        return Math.max(t, occupied() + growth(t));
    }

    /** The receives this connection needs in a pool now: {@link #reservation(int)} at its target. */
    long reservation() {
        return reservation(target);
    }

    /** Messages that arrived from the peer in all (each spent one of its credits). */
    long receivedFromPeer() {
        return receivedFromPeer;
    }

    @Override
    public String toString() {
        return "credits{send " + sendCredits + ", target " + target + " of " + limit + ", owed data " + owedData
                + ", owed control " + owedCtrl + ", unread " + unread + ", granted " + grantedToPeer + ", received "
                + receivedFromPeer + ", forgiven " + forgiven + ", spent " + spent
                + (returning > 0 ? ", returning " + returning : "") + '}';
    }
}
