package org.nettyrdma.channel;

import org.nettyrdma.verbs.VerbsException;

/**
 * The window of a connection with pooled credits (docs/srq-design.md section 2, docs/protocol.md "Pooled credits"): its
 * target in the {@link CreditWindow} and its reservation in the loop's shared receive pool, moved together. It starts
 * at {@link CreditWindow#POOLED_INITIAL}; when the peer may be starving (it holds at most one credit) and data credits
 * are owed, the target doubles, up to the limit, if the pool has room; a connection whose peer did not starve for a
 * whole tick of the loop ({@link RdmaIoHandler#TICK_MILLIS}) halves it, down to its floor ({@link CreditWindow#floor}).
 * The reservation always covers what the connection takes ({@link CreditWindow#occupied}: what the peer may still
 * consume, what is owed to it, its messages held unread), so honest peers never find the shared queue empty. Event
 * loop only.
 */
final class PooledWindow {
    private final CreditWindow credits;
    private final ConnectionResources res;
    /** Whether the peer looked starving since the last tick. */
    private boolean starved;
    /** Messages this side had sent at the last tick. */
    private long spentAtTick;
    /** Whether this side sent nothing between the last two ticks. */
    private boolean idleSender;

    PooledWindow(CreditWindow credits, ConnectionResources res) {
        this.credits = credits;
        this.res = res;
    }

    /**
     * Before credits are returned: grows the target when the peer may be starving and data credits are owed (a peer
     * that returns only control credits is not short of data), for the second time since the last tick: at a window of
     * 2 a single message (a request, an echo) leaves its sender one credit, which a stream does over and over but a
     * message now and then does once. The new receives are posted before this returns: a shared receive queue cannot
     * give receives back, so a growth for nothing would stay registered until messages consume them.
     *
     * @throws VerbsException if the pool could not post them
     */
    void beforeReturn() throws VerbsException {
        if (credits.owedData() == 0 || credits.peerOutstanding() > 1) {
            return;
        }
        if (!starved) {
            starved = true;
            return;
        }
        int target = credits.target();
        int grown = Math.min(credits.limit(), 2 * target);
        // the target's growth is owed to the peer at once: the receives for it are reserved first
        if (grown > target && res.reserveReceives((int) Math.max(res.reservedReceives(), credits.reservation(grown)))) {
            credits.setTarget(grown);
        }
    }

    /** A tick: an unstarved window halves; the reservation comes down to what is still needed. */
    void tick() throws VerbsException {
        idleSender = credits.spent() == spentAtTick;
        spentAtTick = credits.spent();
        if (!starved && credits.target() > credits.floor()) {
            credits.setTarget(Math.max(credits.floor(), credits.target() / 2));
        }
        starved = false;
        release();
    }

    /**
     * Whether this side sent nothing between the last two ticks: it then gives its peer back the credits beyond the
     * floor ({@link CreditWindow#returnSurplus}), as the peer's pool would otherwise keep their receives for ever.
     */
    boolean idleSender() {
        return idleSender;
    }

    /** Gives back the reservation beyond what is needed (after the target came down, as the peer's messages arrive). */
    void release() throws VerbsException {
        int needed = (int) credits.reservation();
        if (needed < res.reservedReceives()) {
            res.reserveReceives(needed);
        }
    }
}
