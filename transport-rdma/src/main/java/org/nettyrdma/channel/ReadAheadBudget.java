package org.nettyrdma.channel;

import java.util.ArrayDeque;

/**
 * The bytes of READ rendezvous chunks (protocol v2) that the connections of one event loop hold at most: allocated for
 * a READ and not yet handed to a pipeline. Each connection has its own bound too ({@link RendezvousReceives}); this
 * one keeps many connections whose pipelines read nothing from each holding its whole read-ahead (a peer with 1,000
 * connections would otherwise make this side allocate 4 GiB for its bytes).
 *
 * <p>A connection that holds no chunk may always take one of at most {@link #MIN_CHUNK} bytes past the bound: chunks
 * that other connections' pipelines leave unread never stop a connection for good (its pipeline may be the one the
 * others wait for). The loop holds at most the bound plus {@code MIN_CHUNK} per connection with a rendezvous. A
 * connection stopped by the bound waits ({@link #await}); bytes coming back wake the longest waiter, which pulls again
 * (and waits again, at the back, if what came back is not enough). Event loop only.
 */
final class ReadAheadBudget {
    /** The chunk a connection holding nothing may take past the bound. */
    static final int MIN_CHUNK = 64 << 10;

    /** A connection's table, woken (once per {@link #await}) when bytes come back. */
    interface Waiter {
        void readAheadFreed();
    }

    private final long limit;
    private final RdmaCounters counters;
    private final ArrayDeque<Waiter> waiters = new ArrayDeque<>();
    private long held;

    /** A bound of {@code limit} bytes; stalls are counted in {@code counters} (the loop's). */
    ReadAheadBudget(long limit, RdmaCounters counters) {
        this.limit = limit;
        this.counters = counters;
    }

    /**
     * Takes {@code n} bytes for a chunk of a connection that holds {@code connectionHeld} bytes: all of them if they fit
     * the bound; if they do not and the connection holds nothing, {@code min(n, MIN_CHUNK)} (a stall, counted).
     * Returns the bytes taken; 0 if the connection must wait ({@link #await}).
     */
    int take(int n, long connectionHeld) {
        if (held + n <= limit) {
            held += n;
            return n;
        }
        if (connectionHeld > 0) {
            return 0;
        }
        counters.rendezvousReadAheadStalls++;
        int m = Math.min(n, MIN_CHUNK);
        held += m;
        return m;
    }

    /**
     * {@code n} bytes just {@linkplain #take taken} went unused (no buffer, no send queue slot): back, waking no one
     * (the waiters wait for bytes that other connections hold, and none of those came back).
     */
    void untake(int n) {
        held -= n;
    }

    /** {@code n} bytes taken before came back (a chunk delivered or released); wakes the longest waiter. */
    void give(long n) {
        held -= n;
        Waiter w = waiters.poll();
        if (w != null) {
            w.readAheadFreed();
        }
    }

    /**
     * {@code w} is woken once when bytes come back (a stall, counted); the caller queues it only if it is not queued
     * already.
     */
    void await(Waiter w) {
        counters.rendezvousReadAheadStalls++;
        waiters.add(w);
    }

    /** {@code w}, queued, no longer waits (its connection is gone). */
    void forget(Waiter w) {
        waiters.remove(w);
    }

    /** Bytes of chunks the loop's connections hold now. */
    long held() {
        return held;
    }

    int waiterCount() {
        return waiters.size();
    }

    @Override
    public String toString() {
        return "ReadAheadBudget{held=" + held + ", limit=" + limit + ", waiters=" + waiters.size() + '}';
    }
}
