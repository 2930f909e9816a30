package org.nettyrdma.channel;

import org.junit.jupiter.api.Test;

import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * A model check of the credit rules (docs/protocol.md, "Credits"): two real {@link CreditWindow}s, driven as
 * {@link RdmaConnection} drives them, explored over every interleaving of what each side may do. It proves, for
 * receive windows of 3 to 6 on each side (2 with the keeper) and up to {@value #MESSAGES} application messages each
 * way, that
 * <ul>
 *   <li>no reachable state has a side with a message or its FIN to send while nothing can happen any more (no
 *   message in flight, nothing to read, no write left): a credit deadlock;</li>
 *   <li>the state graph has no cycle: every step but CREDIT messages makes progress (a write, a DATA, a FIN, a read),
 *   so a cycle would be an endless exchange of CREDIT messages between peers;</li>
 *   <li>an honest peer never trips a window's checks (more messages than credits, more credits than receives).</li>
 * </ul>
 *
 * <p>What the model does, per side, as RdmaConnection does it:
 * <ul>
 *   <li>the connecting side (client) sends its greeting, a CREDIT of 0, before anything else; the accepted side
 *   (server) sends nothing until a message from the peer arrived, or its RDMA CM ESTABLISHED (InfiniBand, RoCE) came;
 *   </li>
 *   <li><b>write</b>: the application writes and flushes one message; it goes out as a DATA message (taking every
 *   owed credit along) if {@link CreditWindow#canSendData()}, else it waits; the application may also stop writing, or
 *   shut its output down ({@code shutdownOutput()}: what waits goes out first, then the FIN, which needs a data
 *   credit too);</li>
 *   <li><b>batch</b>: one or more messages from the peer arrive in order ({@link CreditWindow#onReceived}; a CREDIT or
 *   FIN is owed back at once as a control credit, a DATA waits to be read), then the end of the batch: the read loop
 *   reads any number of the waiting messages (each read owes a data credit and asks
 *   {@link CreditWindow#shouldReturnCredits()}), waiting writes and a waiting FIN go out as credits allow, and
 *   {@link CreditWindow#shouldReturnCredits()} is asked once more;</li>
 *   <li><b>read</b>: the application reads later ({@code read()} with autoRead off, or the read loop's next round):
 *   one or more messages, each followed by the question;</li>
 *   <li>a side that has received the peer's FIN sends no CREDIT (the peer sends nothing more).</li>
 * </ul>
 * Pooled credits (docs/srq-design.md, section 2) add one action: <b>retarget</b>, the window's target set to any value
 * from {@value CreditWindow#FLOOR} to its limit ({@link CreditWindow#setTarget}), followed by rule 2's question; owed
 * credits beyond the target are forgiven. The check then also asserts that no grant takes the peer beyond the target
 * (what the pool reserved for the connection), nor, with the side's unread messages counted, beyond the receive slots
 * its limit announced (a pool holds no more for a connection: the growth bug of 2026-12-03). And one more, once per side: <b>return</b>, a sender gives back its
 * credits beyond the floor unspent in a CREDIT message ({@link CreditWindow#returnSurplus}, what an idle sender does
 * every tick; modelled at any moment, a superset), which its peer takes with {@link CreditWindow#onReturned}.
 *
 * <p>Not modelled: the send queue's room (its depth, count + 4, exceeds any window here), close() (shutdownOutput
 * covers its FIN), protocol v2's ring (its PADs would be one more action: docs/srq-design.md).
 *
 * <p>States are keyed by everything that decides what can happen next: each window's credits, owed credits and the
 * peer's outstanding messages (granted minus received: the absolute counters only grow), each side's application
 * state, and the messages in flight each way. The search is a depth-first search with the path on a stack, so a
 * deadlock or a cycle is reported with the steps that lead to it.
 */
class CreditWindowModelTest {
    /** Application messages each side may write. */
    static final int MESSAGES = 4;

    private static final int DATA = 1;
    private static final int CREDIT = 2;
    private static final int FIN = 3;
    /** A CREDIT message returning unspent credits (pooled credits: the second byte of its header). */
    private static final int RETURN = 0;
    private static final String[] SIDE = {"client", "server"};
    private static final String[] TYPE = {"CREDIT(returning)", "DATA", "CREDIT", "FIN"};
    /** Pooled credits as before 2026-12-03's keeper: no side keeps a starving peer going, floors 3. */
    static final int NO_KEEPER = 0;
    /** The accepted side keeps its peer going (its floor 2); the connecting side does not know it (its floor 3). */
    static final int SERVER_KEEPS = 1;
    /** The accepted side keeps its peer going and said so: both floors 2. */
    static final int SERVER_KEEPS_CLIENT_KNOWS = 2;

    /** Writes and reads only: the pattern of docs/protocol.md's trace. */
    @Test
    void noDeadlockAndNoEndlessCreditExchangeWithoutFin() {
        check(false);
    }

    /** Writes, reads, and either side shutting its output down (FIN) at any point. */
    @Test
    void noDeadlockAndNoEndlessCreditExchangeWithFin() {
        check(true);
    }

    /**
     * Pooled credits (docs/srq-design.md, section 2): a side may change its target at any moment to any value from
     * {@value CreditWindow#FLOOR} to its limit (a superset of the pool's doubling and halving), a bounded number of
     * times (what is left is part of the state, so the graph stays finite), owed credits beyond the target being
     * forgiven. The windows, as {initial, limit, target changes} for client and server: both pooled (starting at the
     * floor, growing and shrinking again); a pooled side that answered a v1 peer with its limit and shrinks to the
     * floor, against that v1 peer; a pooled side against a v1 peer of the smallest window. Writes and reads only.
     */
    @Test
    void pooledWindowsWithForgivenessNeitherDeadlockNorPingPongWithoutFin() {
        check(false, new int[][] {{4, 5, 2, 4, 5, 2}, {6, 6, 1, 6, 6, 0}, {4, 6, 2, 4, 4, 0}});
    }

    /** As above, with FINs (the two cases with a v1 peer: the first costs a minute of CPU with FINs). */
    @Test
    void pooledWindowsWithForgivenessNeitherDeadlockNorPingPongWithFin() {
        check(true, new int[][] {{6, 6, 1, 6, 6, 0}, {4, 6, 2, 4, 4, 0}});
    }

    /**
     * Windows down to {@value CreditWindow#KEPT_FLOOR}: the accepted side keeps a starving peer going
     * ({@link CreditWindow#keepPeerGoing}). Both pooled, 4/5 with one target change each, the client knowing (floors
     * 2) or a client of before (its floor 3, either surplus rule); windows of 2 from the start; with FINs, those and
     * 4/4 with one change each.
     */
    @Test
    void windowsOfTwoLiveWhenTheServerKeepsItsPeerGoing() {
        check(false, new int[][] {{4, 5, 1, 4, 5, 1, SERVER_KEEPS_CLIENT_KNOWS}, {4, 5, 1, 4, 5, 1, SERVER_KEEPS},
                {2, 2, 0, 2, 2, 0, SERVER_KEEPS_CLIENT_KNOWS}});
        check(true, new int[][] {{2, 2, 0, 2, 2, 0, SERVER_KEEPS_CLIENT_KNOWS},
                {4, 4, 1, 4, 4, 1, SERVER_KEEPS_CLIENT_KNOWS}});
    }

    /**
     * Why the keeper: without it, windows of 2 deadlock (the checker finds it). (Without the poke, or without the lone
     * control credit, the cases above deadlock too: checked by mutation when it was built.)
     */
    @Test
    void windowsOfTwoDeadlockWithoutAKeeper() {
        String problem = new Checker(2, 2, 0, 2, 2, 0, false, true, NO_KEEPER).run();
        assertNotNull(problem, "windows of 2 without a keeper");
        assertTrue(problem.startsWith("deadlock"), problem);
    }

    private static void check(boolean fins) {
        List<int[]> windows = new ArrayList<>(); // {client's initial, limit, changes, server's initial, ...}: v1
        for (int client = CreditWindow.FLOOR; client <= 6; client++) {
            for (int server = CreditWindow.FLOOR; server <= 6; server++) {
                windows.add(new int[] {client, client, 0, server, server, 0});
            }
        }
        check(fins, windows.toArray(new int[0][]));
    }

    private static void check(boolean fins, int[][] windows) {
        long states = 0;
        long forgave = 0;
        long start = System.nanoTime();
        long cpuStart = ManagementFactory.getThreadMXBean().getCurrentThreadCpuTime();
        boolean pooled = false;
        for (int[] w : windows) {
            pooled |= w[2] + w[5] > 0;
            Checker c = new Checker(w[0], w[1], w[2], w[3], w[4], w[5], fins, true, w.length > 6 ? w[6] : NO_KEEPER);
            String problem = c.run();
            if (problem != null) {
                fail(problem);
            }
            assertTrue(c.completed > 0, "no run ended with everything sent: the model is broken");
            states += c.visited;
            forgave += c.forgivingStates;
            if (w[2] + w[5] > 0) {
                assertTrue(c.forgivingStates > 0, "no state forgave a credit: the model does not exercise forgiveness");
                if (w[1] > CreditWindow.FLOOR || w[4] > CreditWindow.FLOOR) {
                    assertTrue(c.returnsSent > 0, "no surplus returned: the model does not exercise returns");
                }
            }
        }
        System.out.println("CreditWindowModelTest: " + states + " states explored " + (pooled ? "(pooled, "
                + forgave + " having forgiven credits) " : "") + (fins ? "with" : "without") + " FIN in "
                + (System.nanoTime() - start) / 1_000_000 + " ms ("
                + (ManagementFactory.getThreadMXBean().getCurrentThreadCpuTime() - cpuStart) / 1_000_000 + " ms CPU)");
    }

    /** The checker itself: a reader that never sends a CREDIT message leaves its writer stuck, and it says so. */
    @Test
    void theCheckerFindsADeadlockWhenNoCreditsAreReturned() {
        Checker c = new Checker(4, 4, 0, 4, 4, 0, false, false, NO_KEEPER);
        String problem = c.run();
        assertNotNull(problem, "withholding every CREDIT message must strand a writer");
        assertTrue(problem.startsWith("deadlock"), problem);
    }

    /** One side of the connection: its window and what its application and connection are doing. */
    private static final class Side {
        CreditWindow w;
        /** Target changes left. */
        int retargets;
        /** Surplus returns left (pooled credits). */
        int returns;
        int toWrite;
        /** Written (flushed) messages waiting for credits. */
        int queued;
        /** DATA messages arrived, not read yet. */
        int pending;
        boolean open;
        boolean shut;
        boolean finPending;
        boolean finSent;
        boolean finReceived;

        Side copy() {
            Side s = new Side();
            s.w = new CreditWindow(w);
            s.retargets = retargets;
            s.returns = returns;
            s.toWrite = toWrite;
            s.queued = queued;
            s.pending = pending;
            s.open = open;
            s.shut = shut;
            s.finPending = finPending;
            s.finSent = finSent;
            s.finReceived = finReceived;
            return s;
        }

        long key() {
            long k = bits(w.sendCredits(), 3);
            k = k << 3 | bits(w.owedData(), 3);
            k = k << 3 | bits(w.owedControl(), 3);
            k = k << 3 | bits(w.peerOutstanding(), 3);
            k = k << 3 | bits(w.target(), 3);
            k = k << 2 | bits(retargets, 2);
            k = k << 3 | bits(toWrite, 3);
            k = k << 3 | bits(queued, 3);
            k = k << 3 | bits(pending, 3);
            k = k << 1 | (open ? 1 : 0);
            k = k << 1 | (shut ? 1 : 0);
            k = k << 1 | (finPending ? 1 : 0);
            k = k << 1 | (finSent ? 1 : 0);
            return k << 1 | (finReceived ? 1 : 0);
        }

        boolean wantsToSend() {
            return queued > 0 || finPending;
        }

        @Override
        public String toString() {
            return "{send " + w.sendCredits() + ", target " + w.target() + ", owed data " + w.owedData() + ", owed control " + w.owedControl()
                    + ", peer outstanding " + w.peerOutstanding() + ", to write " + toWrite + ", waiting " + queued
                    + ", unread " + pending + (open ? "" : ", not open") + (finPending ? ", FIN waiting" : "")
                    + (finSent ? ", FIN sent" : "") + (finReceived ? ", FIN received" : "") + '}';
        }
    }

    private static long bits(long v, int n) {
        if (v < 0 || v >= 1L << n) {
            throw new IllegalStateException("model value " + v + " out of its " + n + " bits");
        }
        return v;
    }

    /** Both sides and the messages in flight each way (5 bits each: type, credits; the head in the low bits). */
    private static final class State {
        final Side[] side = new Side[2];
        final long[] wire = new long[2];
        final int[] inFlight = new int[2];
        /**
         * The credits the RETURN in flight each way gives back (1 to 4; 1 or 2 in windows up to 6), 0 if none: each side
         * returns once, so one at most is in flight each way.
         */
        final int[] returnedInFlight = new int[2];
        /** What led here, when the search records its trace; else null. */
        StringBuilder log;

        State copy() {
            State s = new State();
            s.log = log == null ? null : new StringBuilder();
            s.side[0] = side[0].copy();
            s.side[1] = side[1].copy();
            s.wire[0] = wire[0];
            s.wire[1] = wire[1];
            s.inFlight[0] = inFlight[0];
            s.inFlight[1] = inFlight[1];
            s.returnedInFlight[0] = returnedInFlight[0];
            s.returnedInFlight[1] = returnedInFlight[1];
            return s;
        }

        void push(int from, int type, int credits) {
            if (inFlight[from] == 6 || credits > 7) {
                throw new IllegalStateException("more in flight than any window of the model: " + this);
            }
            wire[from] |= (long) (type | credits << 2) << 5 * inFlight[from];
            inFlight[from]++;
        }

        int pop(int from) {
            int m = (int) (wire[from] & 31);
            wire[from] >>>= 5;
            inFlight[from]--;
            return m;
        }

        long key1() {
            // each side's key fills its 31 bits; the returns left go in the two above
            return side[0].key() << 31 | side[1].key() | bits(side[0].returns, 1) << 62 | bits(side[1].returns, 1) << 63;
        }

        long key2() {
            // the returned counts in flight (1..4) go above the wire's 60 bits
            return wire[0] | wire[1] << 30 | bits(Math.max(0, returnedInFlight[0] - 1), 2) << 60
                    | bits(Math.max(0, returnedInFlight[1] - 1), 2) << 62;
        }

        @Override
        public String toString() {
            return "client " + side[0] + " server " + side[1] + " in flight c->s " + wire(0) + " s->c " + wire(1);
        }

        private String wire(int from) {
            StringBuilder b = new StringBuilder("[");
            long w = wire[from];
            for (int i = 0; i < inFlight[from]; i++, w >>>= 5) {
                b.append(i == 0 ? "" : " ").append(TYPE[(int) (w & 3)]).append('+').append((w & 31) >> 2);
            }
            return b.append(']').toString();
        }
    }

    private static final class Checker {
        private final int clientInitial;
        private final int clientWindow;
        private final int serverInitial;
        private final int serverWindow;
        private final int clientRetargets;
        private final int serverRetargets;
        private final boolean fins;
        private final boolean returnCredits;
        /** {@link #NO_KEEPER}, {@link #SERVER_KEEPS} or {@link #SERVER_KEEPS_CLIENT_KNOWS}. */
        private final int keeper;
        private StateSet seen;
        private String violation;
        long visited;
        long completed;
        /** Visited states in which a side has forgiven credits. */
        long forgivingStates;
        /** Surplus returns sent, in all. */
        long returnsSent;

        /**
         * @param clientInitial the credits the client starts the server with; {@code clientWindow} its limit
         * @param clientRetargets the target changes the client may make; {@code serverRetargets} the server's
         */
        Checker(int clientInitial, int clientWindow, int clientRetargets, int serverInitial, int serverWindow,
                int serverRetargets, boolean fins, boolean returnCredits, int keeper) {
            this.keeper = keeper;
            this.clientInitial = clientInitial;
            this.clientWindow = clientWindow;
            this.serverInitial = serverInitial;
            this.serverWindow = serverWindow;
            this.clientRetargets = clientRetargets;
            this.serverRetargets = serverRetargets;
            this.fins = fins;
            this.returnCredits = returnCredits;
        }

        private String windows() {
            return "client's window " + clientInitial + "/" + clientWindow + ", server's " + serverInitial + "/"
                    + serverWindow + " (initial/limit)" + (keeper == NO_KEEPER ? "" : keeper == SERVER_KEEPS
                    ? ", the server keeps the client going (a client of before: its floor " + CreditWindow.FLOOR + ')'
                    : ", the server keeps the client going, floors " + CreditWindow.KEPT_FLOOR);
        }

        /**
         * Explores everything reachable; returns the first problem with its trace, or null. The search runs without
         * recording what happened, and once more with it if it found a problem (the search is deterministic).
         */
        String run() {
            String problem = search(false);
            return problem == null ? null : search(true);
        }

        private String search(boolean trace) {
            seen = new StateSet();
            violation = null;
            visited = 0;
            completed = 0;
            State init = new State();
            init.log = trace ? new StringBuilder() : null;
            int returns = clientRetargets + serverRetargets > 0 ? 1 : 0; // pooled credits negotiated
            init.side[0] = newSide(clientInitial, clientWindow, serverInitial, serverWindow, clientRetargets, returns);
            init.side[1] = newSide(serverInitial, serverWindow, clientInitial, clientWindow, serverRetargets, returns);
            if (keeper != NO_KEEPER) {
                init.side[1].w.keepPeerGoing(true);
            }
            if (keeper == SERVER_KEEPS_CLIENT_KNOWS) {
                init.side[0].w.keepPeerGoing(false);
            }
            init.side[0].open = true;
            if (init.log != null) {
                init.log.append("client greets");
            }
            send(init, 0, CREDIT);
            List<State> path = new ArrayList<>();
            List<List<State>> todo = new ArrayList<>();
            path.add(init);
            seen.put(init.key1(), init.key2(), StateSet.ON_PATH);
            todo.add(successors(init));
            if (violation != null) {
                return violation + "\n" + trace(path, init);
            }
            visited = 1;
            while (!path.isEmpty()) {
                List<State> next = todo.get(todo.size() - 1);
                if (next.isEmpty()) {
                    State done = path.remove(path.size() - 1);
                    todo.remove(todo.size() - 1);
                    seen.put(done.key1(), done.key2(), StateSet.DONE);
                    continue;
                }
                State s = next.remove(next.size() - 1);
                int mark = seen.get(s.key1(), s.key2());
                if (mark == StateSet.ON_PATH) {
                    return "endless exchange of CREDIT messages, " + windows() + ":\n" + trace(path, s);
                }
                if (mark == StateSet.DONE) {
                    continue;
                }
                visited++;
                if (s.side[0].w.forgiven() + s.side[1].w.forgiven() > 0) {
                    forgivingStates++;
                }
                List<State> succ = successors(s);
                if (violation != null) {
                    return violation + "\n" + trace(path, s);
                }
                if (succ.isEmpty()) {
                    if (s.side[0].wantsToSend() || s.side[1].wantsToSend()) {
                        return "deadlock, " + windows() + ":\n" + trace(path, s);
                    }
                    completed++;
                }
                path.add(s);
                todo.add(succ);
                seen.put(s.key1(), s.key2(), StateSet.ON_PATH);
            }
            return null;
        }

        private static String trace(List<State> path, State last) {
            StringBuilder b = new StringBuilder();
            for (State s : path) {
                b.append("  ").append(s.log).append("\n      -> ").append(s).append('\n');
            }
            return b.append("  ").append(last.log).append("\n      -> ").append(last).toString();
        }

        private static Side newSide(int ownInitial, int ownLimit, int peerInitial, int peerLimit, int retargets,
                int returns) {
            Side s = new Side();
            s.w = new CreditWindow(ownInitial, ownLimit);
            assertNull(s.w.peerReady(peerInitial, peerLimit));
            s.retargets = retargets;
            s.returns = returns;
            s.toWrite = MESSAGES;
            return s;
        }

        private List<State> successors(State s) {
            List<State> out = new ArrayList<>();
            for (int i = 0; i < 2; i++) {
                Side me = s.side[i];
                if (!me.shut && me.toWrite > 0) {
                    State n = s.copy();
                    n.side[i].toWrite--;
                    n.side[i].queued++;
                    if (n.log != null) {
                        n.log.append(SIDE[i]).append(" writes a message");
                    }
                    if (n.side[i].open) {
                        flush(n, i);
                        maybePoke(n, i);
                    }
                    out.add(n);
                    n = s.copy();
                    n.side[i].toWrite = 0;
                    if (n.log != null) {
                        n.log.append(SIDE[i]).append(" writes nothing more");
                    }
                    out.add(n);
                }
                if (fins && !me.shut) {
                    State n = s.copy();
                    Side m = n.side[i];
                    m.toWrite = 0;
                    m.shut = true;
                    if (n.log != null) {
                        n.log.append(SIDE[i]).append(" shuts its output down");
                    }
                    if (m.open) {
                        flush(n, i);
                    }
                    sendFin(n, i);
                    maybePoke(n, i);
                    out.add(n);
                }
                for (int t = me.w.floor(); me.retargets > 0 && t <= me.w.limit(); t++) {
                    if (t == me.w.target()) {
                        continue;
                    }
                    // the pool lends this side more receives (growth) or takes them back (shrink); the connection then
                    // asks rule 2's question, as after any change of what it owes
                    State n = s.copy();
                    n.side[i].retargets--;
                    n.side[i].w.setTarget(t);
                    if (n.log != null) {
                        n.log.append(SIDE[i]).append("'s target becomes ").append(t);
                    }
                    maybeReturnCredits(n, i);
                    out.add(n);
                }
                // RdmaConnection.tick: the sender gives back what it holds beyond creditsToKeep() (and the CREDIT's
                // credit); a side of before the floor came down kept POOLED_INITIAL - 1; any keep from the floor's - 1
                for (int keep = me.w.floor() - 1; keep <= CreditWindow.POOLED_INITIAL - 1; keep++) {
                    if (me.returns > 0 && me.open && !me.finReceived && me.w.sendCredits() > keep + 1) {
                        State n = s.copy();
                        Side m = n.side[i];
                        m.returns--;
                        assertTrue(m.w.returnSurplus(keep));
                        if (n.log != null) {
                            n.log.append(SIDE[i]).append(" returns its surplus beyond ").append(keep);
                        }
                        send(n, i, RETURN);
                        returnsSent++;
                        out.add(n);
                    }
                }
                if (i == 1 && !me.open) {
                    // RDMA CM's ESTABLISHED on InfiniBand and RoCE: openSendSide, then onBatchComplete
                    State n = s.copy();
                    n.side[i].open = true;
                    if (n.log != null) {
                        n.log.append("server's ESTABLISHED");
                    }
                    batchEnd(n, i, out);
                }
                for (int r = 1; r <= me.pending; r++) {
                    State n = s.copy();
                    if (n.log != null) {
                        n.log.append(SIDE[i]).append(" reads");
                    }
                    read(n, i, r);
                    out.add(n);
                }
                int o = 1 - i;
                for (int k = 1; k <= s.inFlight[o]; k++) {
                    State n = s.copy();
                    if (n.log != null) {
                        n.log.append(SIDE[i]).append(" receives");
                    }
                    for (int j = 0; j < k; j++) {
                        receive(n, i);
                    }
                    batchEnd(n, i, out);
                }
            }
            return out;
        }

        /** A message from the peer's side arrives at side {@code i} (RdmaConnection.onRecvCompletion). */
        private void receive(State n, int i) {
            Side me = n.side[i];
            int m = n.pop(1 - i);
            int type = m & 3;
            int credits = m >> 2;
            if (n.log != null) {
                n.log.append(' ').append(TYPE[type]).append('+').append(credits);
            }
            String v = me.w.onReceived(credits);
            if (v == null && type == RETURN) {
                v = me.w.onReturned(n.returnedInFlight[1 - i]);
                n.returnedInFlight[1 - i] = 0;
            }
            if (v != null && violation == null) {
                violation = SIDE[i] + "'s window refused an honest peer: " + v;
            }
            me.open = true;
            if (type == DATA) {
                me.pending++;
            } else {
                if (type == FIN) {
                    me.finReceived = true;
                }
                me.w.oweControl();
            }
        }

        /** RdmaConnection.onBatchComplete, with the read loop reading any number of the waiting messages. */
        private void batchEnd(State n, int i, List<State> out) {
            int pending = n.side[i].pending;
            for (int r = 0; r <= pending; r++) {
                State b = n;
                if (r < pending) {
                    b = n.copy();
                    if (b.log != null) {
                        b.log.append(n.log);
                    }
                }
                if (r > 0) {
                    if (b.log != null) {
                        b.log.append(", reads");
                    }
                }
                read(b, i, r);
                Side me = b.side[i];
                if (me.open) {
                    flush(b, i);
                }
                if (me.finPending) {
                    sendFin(b, i);
                }
                maybeReturnCredits(b, i);
                out.add(b);
            }
        }

        /** {@code r} reads, each followed by RdmaConnection.maybeReturnCredits (nextRead). */
        private void read(State n, int i, int r) {
            for (int j = 0; j < r; j++) {
                n.side[i].pending--;
                n.side[i].w.oweData(1);
                maybeReturnCredits(n, i);
            }
        }

        private void flush(State n, int i) {
            Side me = n.side[i];
            while (me.queued > 0 && me.w.canSendData()) {
                me.queued--;
                send(n, i, DATA);
            }
        }

        private void sendFin(State n, int i) {
            Side me = n.side[i];
            if (me.finSent) {
                return;
            }
            if (me.open && me.queued == 0 && me.w.canSendData()) {
                me.finPending = false;
                me.finSent = true;
                send(n, i, FIN);
            } else {
                me.finPending = true;
            }
        }

        /** RdmaConnection.maybeReturnCredits: rule 2's CREDIT, or a keeper's poke (also after the peer's FIN). */
        private void maybeReturnCredits(State n, int i) {
            Side me = n.side[i];
            if (returnCredits && me.open && !me.finReceived && me.w.shouldReturnCredits()) {
                send(n, i, CREDIT);
            } else {
                maybePoke(n, i);
            }
        }

        /** RdmaConnection.maybePoke: a keeper blocked at its last credit spends it on a CREDIT message. */
        private void maybePoke(State n, int i) {
            Side me = n.side[i];
            if (returnCredits && me.open && me.w.shouldPoke(me.wantsToSend())) {
                if (n.log != null) {
                    n.log.append(", ").append(SIDE[i]).append(" pokes");
                }
                send(n, i, CREDIT);
            }
        }

        /** A header (every owed credit along) spends a credit: SendQueue.sendControl and end(). */
        private void send(State n, int i, int type) {
            Side me = n.side[i];
            if (!me.w.canSendControl() && violation == null) {
                violation = SIDE[i] + " sent a " + TYPE[type] + " without a credit";
            }
            int returned = type == CREDIT || type == RETURN ? me.w.takeReturning() : 0;
            if ((returned > 0) != (type == RETURN) || returned > 4 || n.returnedInFlight[i] != 0 && returned > 0) {
                throw new IllegalStateException("the model's RETURN carries 1 to 4 credits, one in flight each way: "
                        + returned + ", " + n);
            }
            if (returned > 0) {
                n.returnedInFlight[i] = returned;
            }
            int credits = me.w.takeOwed();
            if (credits > 0 && me.w.peerOutstanding() > me.w.target() && violation == null) {
                violation = SIDE[i] + " granted its peer " + me.w.peerOutstanding() + " receives, beyond its target: "
                        + me.w;
            }
            if (credits > 0 && me.w.peerOutstanding() + me.pending > me.w.limit() && violation == null) {
                violation = SIDE[i] + " granted its peer " + me.w.peerOutstanding() + " receives with " + me.pending
                        + " of its messages unread, beyond its " + me.w.limit() + " receive slots: " + me.w;
            }
            me.w.spend();
            n.push(i, type, credits);
            if (n.log != null) {
                n.log.append(", ").append(SIDE[i]).append(" sends ").append(TYPE[type]).append('+').append(credits);
            }
        }
    }

    /** Open addressing over the two longs of a state's key; the value says whether it is on the path or done. */
    private static final class StateSet {
        static final int ON_PATH = 1;
        static final int DONE = 2;
        private long[] k1 = new long[1 << 16];
        private long[] k2 = new long[1 << 16];
        private byte[] v = new byte[1 << 16];
        private int size;

        int get(long a, long b) {
            int i = slot(a, b);
            return v[i];
        }

        void put(long a, long b, int value) {
            int i = slot(a, b);
            if (v[i] == 0) {
                if (++size > k1.length / 2) {
                    grow();
                    i = slot(a, b);
                }
                k1[i] = a;
                k2[i] = b;
            }
            v[i] = (byte) value;
        }

        private int slot(long a, long b) {
            int mask = k1.length - 1;
            long h = a * 0x9E3779B97F4A7C15L + b * 0xC2B2AE3D27D4EB4FL;
            int i = (int) (h ^ h >>> 29) & mask;
            while (v[i] != 0 && (k1[i] != a || k2[i] != b)) {
                i = i + 1 & mask;
            }
            return i;
        }

        private void grow() {
            long[] o1 = k1;
            long[] o2 = k2;
            byte[] ov = v;
            k1 = new long[o1.length * 2];
            k2 = new long[o1.length * 2];
            v = new byte[o1.length * 2];
            for (int j = 0; j < o1.length; j++) {
                if (ov[j] != 0) {
                    int i = slot(o1[j], o2[j]);
                    k1[i] = o1[j];
                    k2[i] = o2[j];
                    v[i] = ov[j];
                }
            }
        }
    }
}
