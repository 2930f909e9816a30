package org.nettyrdma.verbs;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Deque;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * A connection through one device to itself, for {@link VerbsConformanceSuite}: a listener bound to the device's
 * address, a server end and a client end (each with its own protection domain, completion channel, CQs and RDMA CM
 * event channel), and the helpers the tests share: register memory, write work requests into one shared
 * {@link WorkRequestList}, post them, and wait — always with a deadline — for completions and CM events.
 *
 * <p>{@link #close()} destroys the CM ids first (which destroys their QPs), then everything else in reverse order of
 * creation, then the provider.
 */
final class Loopback {
    /** How long anything that should happen may take before a test fails. */
    static final long TIMEOUT_NANOS = TimeUnit.SECONDS.toNanos(10);
    /** How long a test watches for something that must not happen. */
    static final long QUIET_NANOS = TimeUnit.MILLISECONDS.toNanos(100);
    static final int RESOLVE_TIMEOUT_MS = 2000;
    private static final long WAIT_SLICE_NANOS = TimeUnit.MILLISECONDS.toNanos(20);
    private static final long POLL_PAUSE_NANOS = TimeUnit.MICROSECONDS.toNanos(20);

    final VerbsProvider provider;
    final InetAddress address;
    final Events serverEvents;
    final Events clientEvents;
    final CmId listener;
    final Device device;
    final End server;
    final End client;
    /** Shared by every post of the test: a post copies the descriptors, so the slots can be rewritten at once. */
    final WorkRequestList wrs = new WorkRequestList(128, 8);
    private final CompletionArray completions = new CompletionArray(64);
    private final Deque<AutoCloseable> ids = new ArrayDeque<>();
    private final Deque<AutoCloseable> resources = new ArrayDeque<>();
    private Options options;
    /** The private data of the last CONNECT_REQUEST, as delivered. */
    byte[] connectRequestData;
    /** The private data that came with ESTABLISHED on the client, as delivered. */
    byte[] establishedData;

    Loopback(VerbsProvider provider, InetAddress address) throws Exception {
        this.provider = provider;
        this.address = address;
        try {
            serverEvents = newEvents();
            clientEvents = newEvents();
            listener = newId(serverEvents, "listener");
            listener.bind(new InetSocketAddress(address, 0));
            listener.listen(16);
            device = listener.device();
            assertNotNull(device, "a CM id bound to " + address + " has no device");
            server = new End("server", serverEvents);
            client = new End("client", clientEvents);
        } catch (Throwable t) {
            try {
                close();
            } catch (Throwable suppressed) {
                t.addSuppressed(suppressed);
            }
            throw t;
        }
    }

    Options options() {
        return new Options();
    }

    InetSocketAddress listenAddress() {
        return listener.localAddress();
    }

    // ---- ownership ----

    /** Closes {@code resource} at {@link #close()}, after the CM ids, in reverse order of creation. */
    <T extends AutoCloseable> T own(T resource) {
        resources.push(resource);
        return resource;
    }

    CmId newId(Events events, Object context) throws VerbsException {
        CmId id = provider.createId(events.channel, context);
        ids.push(id);
        return id;
    }

    /** Closes an id now instead of at {@link #close()}. */
    void closeId(CmId id) throws VerbsException {
        ids.remove(id);
        id.close();
    }

    Events newEvents() throws VerbsException {
        CmEventChannel channel = own(provider.createEventChannel());
        EventWaiter waiter = newWaiter();
        waiter.add(channel);
        return new Events(channel, waiter);
    }

    EventWaiter newWaiter() throws VerbsException {
        return own(provider.createWaiter());
    }

    MemoryRegion register(ProtectionDomain pd, int size, int access) throws VerbsException {
        return own(pd.registerMemory(ByteBuffer.allocateDirect(size), access));
    }

    // ---- connection set-up, step by step ----

    /** Creates both ends' CQs and the client's id, and resolves its address and route to {@code destination}. */
    void resolveClient(Options o, InetSocketAddress destination) throws VerbsException {
        options = o;
        server.createCqs(o);
        client.createCqs(o);
        client.id = newId(clientEvents, "client");
        resolve(client.id, destination);
    }

    /** {@link #resolveClient} to the listener, then the client's QP (in INIT). */
    QueuePair prepareClient(Options o) throws VerbsException {
        resolveClient(o, listenAddress());
        return client.createQp(o);
    }

    void resolve(CmId id, InetSocketAddress destination) throws VerbsException {
        id.resolveAddress(null, destination, RESOLVE_TIMEOUT_MS);
        clientEvents.await(CmEventType.ADDR_RESOLVED);
        id.resolveRoute(RESOLVE_TIMEOUT_MS);
        clientEvents.await(CmEventType.ROUTE_RESOLVED);
    }

    ConnectionParameters parameters(byte[] privateData) {
        int reads = Math.max(1, Math.min(16, device.attributes().maxQpRdAtom()));
        return new ConnectionParameters(privateData, reads, reads, options.retryCount, options.rnrRetryCount);
    }

    /** Waits for the CONNECT_REQUEST of the client's connect; the incoming id is closed at {@link #close()}. */
    CmEvent awaitConnectRequest() {
        CmEvent event = serverEvents.await(CmEventType.CONNECT_REQUEST);
        ids.push(event.id());
        connectRequestData = Arrays.copyOf(event.privateData(), event.privateDataLength());
        return event;
    }

    void connect(Options o) throws Exception {
        connect(o, qp -> { });
    }

    /**
     * Connects the client (preparing it with {@code o} first unless {@link #prepareClient} ran, whose options then
     * apply) and accepts on the server, running {@code beforeAccept} on the server's new QP; returns when both sides
     * are ESTABLISHED.
     */
    void connect(Options o, QpStep beforeAccept) throws Exception {
        if (client.id == null) {
            prepareClient(o);
        }
        client.id.connect(parameters(options.connectData));
        accept(awaitConnectRequest().id(), beforeAccept);
    }

    /**
     * A second connection to the listener, after {@link #connect}: a client end of its own (its own protection domain)
     * and a server end whose QP is in {@code serverPd} ({@link End#pd} of {@link #server} for two connections of one
     * protection domain, as the transport has them; another for connections apart). Same options.
     */
    End[] connectAnother(ProtectionDomain serverPd) throws Exception {
        End c = new End("client2", clientEvents, own(device.allocPd()));
        End s = new End("server2", serverEvents, serverPd);
        c.createCqs(options);
        s.createCqs(options);
        c.id = newId(clientEvents, "client2");
        resolve(c.id, listenAddress());
        c.createQp(options);
        c.id.connect(parameters(options.connectData));
        s.id = awaitConnectRequest().id();
        s.createQp(options);
        s.id.accept(parameters(options.acceptData));
        assertSame(c.id, clientEvents.await(CmEventType.ESTABLISHED).id(), "ESTABLISHED names the second client");
        assertSame(s.id, serverEvents.await(CmEventType.ESTABLISHED).id(), "ESTABLISHED names the second server");
        return new End[] {c, s};
    }

    void accept(CmId incoming, QpStep beforeAccept) throws Exception {
        server.id = incoming;
        beforeAccept.run(server.createQp(options));
        incoming.accept(parameters(options.acceptData));
        // the client's first: on IB and RoCE librdmacm sends the RTU, which gives the server its ESTABLISHED, from
        // within the client's rdma_get_cm_event of the accept's reply
        CmEvent established = clientEvents.await(CmEventType.ESTABLISHED);
        assertSame(client.id, established.id(), "ESTABLISHED names the connecting id");
        establishedData = Arrays.copyOf(established.privateData(), established.privateDataLength());
        assertSame(incoming, serverEvents.await(CmEventType.ESTABLISHED).id(), "ESTABLISHED names the accepted id");
    }

    interface QpStep {
        void run(QueuePair qp) throws Exception;
    }

    // ---- work requests ----

    /** Writes send work request {@code i} with one SGE over {@code mr} (none if {@code mr} is null). */
    WorkRequestList wr(int i, long wrId, int opcode, int flags, MemoryRegion mr, int offset, int length) {
        wrs.setSend(i, wrId, opcode, flags);
        if (mr != null) {
            wrs.addSge(i, mr.address() + offset, length, mr.lkey());
        }
        return wrs;
    }

    /** Writes receive work request {@code i} with one SGE over {@code mr} (none if {@code mr} is null). */
    WorkRequestList recvWr(int i, long wrId, MemoryRegion mr, int offset, int length) {
        wrs.setRecv(i, wrId);
        if (mr != null) {
            wrs.addSge(i, mr.address() + offset, length, mr.lkey());
        }
        return wrs;
    }

    void assertPosted(int rc) {
        assertEquals(0, rc, () -> "post failed: " + Errno.describe(rc) + " at work request " + wrs.badIndex());
    }

    // ---- completions ----

    /** Polls {@code cq} until {@code n} completions arrived (taking no more), failing after {@link #TIMEOUT_NANOS}. */
    List<Wc> awaitCompletions(CompletionQueue cq, int n) {
        List<Wc> got = new ArrayList<>(n);
        long deadline = System.nanoTime() + TIMEOUT_NANOS;
        while (got.size() < n) {
            int rc = cq.poll(completions, Math.min(n - got.size(), completions.capacity()));
            if (rc < 0) {
                fail("ibv_poll_cq returned " + Errno.describe(rc) + " after " + got);
            }
            for (int i = 0; i < rc; i++) {
                got.add(Wc.of(completions, i));
            }
            if (rc == 0) {
                if (System.nanoTime() - deadline > 0) {
                    fail(n + " completions expected within " + TimeUnit.NANOSECONDS.toSeconds(TIMEOUT_NANOS)
                            + " s, got " + got.size() + ": " + got);
                }
                LockSupport.parkNanos(POLL_PAUSE_NANOS);
            }
        }
        return got;
    }

    /** Every completion that {@code cq} yields within {@code nanos}, failing on a poll error. */
    List<Wc> pollFor(CompletionQueue cq, long nanos) {
        List<Wc> got = new ArrayList<>();
        long deadline = System.nanoTime() + nanos;
        do {
            int rc = cq.poll(completions, completions.capacity());
            if (rc < 0) {
                fail("ibv_poll_cq returned " + Errno.describe(rc) + " after " + got);
            }
            for (int i = 0; i < rc; i++) {
                got.add(Wc.of(completions, i));
            }
            LockSupport.parkNanos(POLL_PAUSE_NANOS * 50);
        } while (System.nanoTime() - deadline < 0);
        return got;
    }

    /** One poll for at most one completion: the return code of {@code ibv_poll_cq}. */
    int pollOnce(CompletionQueue cq) {
        return cq.poll(completions, 1);
    }

    /** Watches the queues for {@link #QUIET_NANOS} and fails if any of them yields a completion or an error. */
    void assertNoCompletion(CompletionQueue... cqs) {
        long deadline = System.nanoTime() + QUIET_NANOS;
        do {
            for (CompletionQueue cq : cqs) {
                int rc = cq.poll(completions, 1);
                if (rc != 0) {
                    fail("no completion expected, got " + (rc < 0 ? Errno.describe(rc) : Wc.of(completions, 0)));
                }
            }
            LockSupport.parkNanos(POLL_PAUSE_NANOS * 50);
        } while (System.nanoTime() - deadline < 0);
    }

    /** Polls the completion channel until an event arrives, failing after {@link #TIMEOUT_NANOS}. */
    static CompletionQueue awaitCqEvent(CompletionChannel channel) {
        long deadline = System.nanoTime() + TIMEOUT_NANOS;
        CompletionQueue cq;
        while ((cq = channel.getEvent()) == null) {
            if (System.nanoTime() - deadline > 0) {
                fail("no completion channel event within " + TimeUnit.NANOSECONDS.toSeconds(TIMEOUT_NANOS) + " s");
            }
            LockSupport.parkNanos(POLL_PAUSE_NANOS);
        }
        return cq;
    }

    /** Watches the completion channel for {@link #QUIET_NANOS} and fails if it reports a queue. */
    static void assertNoCqEvent(CompletionChannel channel) {
        long deadline = System.nanoTime() + QUIET_NANOS;
        do {
            CompletionQueue cq = channel.getEvent();
            if (cq != null) {
                fail("no completion channel event expected, got one for " + cq);
            }
            LockSupport.parkNanos(POLL_PAUSE_NANOS * 50);
        } while (System.nanoTime() - deadline < 0);
    }

    // ---- queue pair state ----

    /**
     * Polls {@code qp.state()} until it is {@code state}, failing after {@link #TIMEOUT_NANOS}. Meanwhile it takes the
     * events of both CM channels into their queues, where {@link Events#await} finds them later: a provider may learn
     * a state only from an event (siw's {@code ibv_query_qp} does not report the state, so the JNI provider knows of an
     * iWARP connection's end from DISCONNECTED).
     */
    void awaitState(QueuePair qp, QueuePair.QpState state, String what) {
        long deadline = System.nanoTime() + TIMEOUT_NANOS;
        for (;;) {
            serverEvents.pump();
            clientEvents.pump();
            if (qp.state() == state) {
                return;
            }
            if (System.nanoTime() - deadline > 0) {
                fail(what + ": QP in " + qp.state() + ", " + state + " expected within "
                        + TimeUnit.NANOSECONDS.toSeconds(TIMEOUT_NANOS) + " s");
            }
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(1));
        }
    }

    // ---- memory contents ----

    /** {@code length} bytes that differ from those of any other {@code seed}. */
    static byte[] pattern(int length, int seed) {
        byte[] b = new byte[length];
        for (int i = 0; i < length; i++) {
            b[i] = (byte) (seed * 31 + i * 7 + 1);
        }
        return b;
    }

    static byte[] ascii(String s) {
        return s.getBytes(StandardCharsets.US_ASCII);
    }

    static void write(MemoryRegion mr, int offset, byte[] data) {
        mr.buffer().put(offset, data);
    }

    static byte[] read(MemoryRegion mr, int offset, int length) {
        byte[] b = new byte[length];
        mr.buffer().get(offset, b);
        return b;
    }

    // ---- teardown ----

    void close() throws Exception {
        Exception failure = null;
        // memory windows first: a window still bound holds its QP in the kernel, and rxe0 then took ~50 s to destroy
        // the QP (seen 2026-12-01)
        Deque<AutoCloseable> windows = new ArrayDeque<>();
        resources.removeIf(r -> r instanceof MemoryWindow && windows.add(r));
        for (Deque<AutoCloseable> group : List.of(windows, ids, resources)) {
            while (!group.isEmpty()) {
                try {
                    group.pop().close();
                } catch (Exception e) {
                    if (failure == null) {
                        failure = e;
                    } else {
                        failure.addSuppressed(e);
                    }
                }
            }
        }
        provider.close();
        if (failure != null) {
            throw failure;
        }
    }

    /** One side of the connection. */
    final class End {
        final String name;
        final Events events;
        final ProtectionDomain pd;
        final CompletionChannel channel;
        CompletionQueue sendCq;
        CompletionQueue recvCq;
        CmId id;

        End(String name, Events events) throws VerbsException {
            this(name, events, own(device.allocPd()));
        }

        End(String name, Events events, ProtectionDomain pd) throws VerbsException {
            this.name = name;
            this.events = events;
            this.pd = pd;
            this.channel = own(device.createCompletionChannel());
        }

        void createCqs(Options o) throws VerbsException {
            sendCq = own(device.createCq(o.cqe, channel));
            recvCq = o.sharedCq ? sendCq : own(device.createCq(o.cqe, channel));
        }

        /** The QP of this end; a server end's takes its receives from {@link Options#serverSrq} if there is one. */
        QueuePair createQp(Options o) throws VerbsException {
            return id.createQp(pd, o.qpAttributes(sendCq, recvCq, events == serverEvents ? o.serverSrq : null));
        }

        QueuePair qp() {
            return id.qp();
        }

        MemoryRegion register(int size, int access) throws VerbsException {
            return Loopback.this.register(pd, size, access);
        }

        /** Posts work requests 0 .. count - 1 of {@link #wrs} to the send queue; the return code. */
        int postSend(int count) {
            return qp().postSend(wrs, 0, count);
        }

        int postRecv(int count) {
            return qp().postRecv(wrs, 0, count);
        }

        /** Posts one signalled SEND of {@code mr}'s bytes {@code offset .. offset + length - 1}. */
        void send(long wrId, MemoryRegion mr, int offset, int length) {
            wr(0, wrId, WrOpcode.SEND, SendFlags.SIGNALED, mr, offset, length);
            assertPosted(postSend(1));
        }

        void recv(long wrId, MemoryRegion mr, int offset, int length) {
            recvWr(0, wrId, mr, offset, length);
            assertPosted(postRecv(1));
        }

        List<Wc> sendCompletions(int n) {
            return awaitCompletions(sendCq, n);
        }

        List<Wc> recvCompletions(int n) {
            return awaitCompletions(recvCq, n);
        }

        Wc sendCompletion() {
            return sendCompletions(1).get(0);
        }

        Wc recvCompletion() {
            return recvCompletions(1).get(0);
        }

        @Override
        public String toString() {
            return name;
        }
    }

    /**
     * A CM event channel with its own waiter and reused event, and a queue of events taken from the channel by
     * {@link #pump()} before a test asked for them.
     */
    static final class Events {
        final CmEventChannel channel;
        final EventWaiter waiter;
        private final CmEvent event = new CmEvent();
        private final Deque<CmEvent> taken = new ArrayDeque<>();

        Events(CmEventChannel channel, EventWaiter waiter) {
            this.channel = channel;
            this.waiter = waiter;
        }

        /** Takes whatever events the channel has now into the queue (each a copy), without waiting. */
        void pump() {
            try {
                while (channel.poll(event)) {
                    CmEvent copy = new CmEvent();
                    copy.set(event.type(), event.id(), event.listenId(), event.status(), event.privateData(),
                            event.privateDataLength());
                    taken.add(copy);
                }
            } catch (VerbsException e) {
                throw new AssertionError(e.getMessage(), e);
            }
        }

        /** The next event (reused by the next call), or null after {@code timeoutNanos}. */
        CmEvent next(long timeoutNanos) {
            CmEvent early = taken.poll();
            if (early != null) {
                return early;
            }
            long deadline = System.nanoTime() + timeoutNanos;
            try {
                while (!channel.poll(event)) {
                    long left = deadline - System.nanoTime();
                    if (left <= 0) {
                        return null;
                    }
                    // readiness is a hint: wait in slices and poll again
                    waiter.await(Math.min(left, WAIT_SLICE_NANOS));
                }
            } catch (VerbsException e) {
                throw new AssertionError(e.getMessage(), e);
            }
            return event;
        }

        /** The next event, which must be of one of {@code expected} and come within {@link #TIMEOUT_NANOS}. */
        CmEvent await(CmEventType... expected) {
            return await(TIMEOUT_NANOS, expected);
        }

        CmEvent await(long timeoutNanos, CmEventType... expected) {
            CmEvent e = next(timeoutNanos);
            String wanted = expected.length == 1 ? expected[0].toString() : Arrays.toString(expected);
            if (e == null) {
                fail("no " + wanted + " event within " + TimeUnit.NANOSECONDS.toMillis(timeoutNanos) + " ms");
            }
            if (!Arrays.asList(expected).contains(e.type())) {
                fail(wanted + " expected, got " + e);
            }
            return e;
        }

        /** Watches the channel for {@link #QUIET_NANOS} and fails on an event of {@code type} (others are skipped). */
        void assertNo(CmEventType type) {
            long deadline = System.nanoTime() + QUIET_NANOS;
            for (long left = QUIET_NANOS; left > 0; left = deadline - System.nanoTime()) {
                CmEvent e = next(left);
                if (e != null && e.type() == type) {
                    fail("no " + type + " expected, got " + e);
                }
            }
        }
    }

    /** What the test varies about the connection; fluent. */
    static final class Options {
        int cqe = 256;
        boolean sharedCq;
        int maxSendWr = 64;
        int maxRecvWr = 64;
        int maxSendSge = 4;
        int maxRecvSge = 4;
        int maxInlineData;
        boolean signalAll;
        int retryCount = 3;
        int rnrRetryCount = ConnectionParameters.RNR_RETRY_INFINITE;
        byte[] connectData = ascii("conformance connect");
        byte[] acceptData = ascii("conformance accept");
        /** The shared receive queue of the server ends' QPs, or null (a receive queue each). */
        SharedReceiveQueue serverSrq;

        Options serverSrq(SharedReceiveQueue srq) {
            serverSrq = srq;
            return this;
        }

        Options cqe(int n) {
            cqe = n;
            return this;
        }

        Options maxSendWr(int n) {
            maxSendWr = n;
            return this;
        }

        Options maxRecvWr(int n) {
            maxRecvWr = n;
            return this;
        }

        Options maxSendSge(int n) {
            maxSendSge = n;
            return this;
        }

        Options maxRecvSge(int n) {
            maxRecvSge = n;
            return this;
        }

        Options maxInlineData(int n) {
            maxInlineData = n;
            return this;
        }

        Options signalAll(boolean b) {
            signalAll = b;
            return this;
        }

        Options rnrRetryCount(int n) {
            rnrRetryCount = n;
            return this;
        }

        Options connectData(byte[] b) {
            connectData = b;
            return this;
        }

        Options acceptData(byte[] b) {
            acceptData = b;
            return this;
        }

        /** With a shared receive queue, the QP asks for no receive queue of its own (0 receives, 0 SGEs). */
        QpInitAttributes qpAttributes(CompletionQueue sendCq, CompletionQueue recvCq, SharedReceiveQueue srq) {
            return new QpInitAttributes(sendCq, recvCq, maxSendWr, srq == null ? maxRecvWr : 0, maxSendSge,
                    srq == null ? maxRecvSge : 0, maxInlineData, signalAll, srq);
        }
    }

    /** A copy of one work completion. */
    record Wc(long wrId, int status, int opcode, int byteLen, int imm, int qpNum, int flags) {
        static Wc of(CompletionArray a, int i) {
            return new Wc(a.wrId(i), a.status(i), a.opcode(i), a.byteLen(i), a.immData(i), a.qpNum(i), a.wcFlags(i));
        }

        boolean withImm() {
            return (flags & WcOpcode.FLAG_WITH_IMM) != 0;
        }

        boolean withInv() {
            return (flags & WcOpcode.FLAG_WITH_INV) != 0;
        }

        @Override
        public String toString() {
            return "wc{wr_id=" + wrId + ", " + WcStatus.name(status) + ", opcode=" + opcode + ", byte_len=" + byteLen
                    + ", imm=0x" + Integer.toHexString(imm) + ", qp_num=0x" + Integer.toHexString(qpNum)
                    + ", flags=" + flags + '}';
        }
    }
}
