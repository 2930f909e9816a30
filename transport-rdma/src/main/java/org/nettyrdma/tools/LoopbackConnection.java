package org.nettyrdma.tools;

import org.nettyrdma.verbs.Access;
import org.nettyrdma.verbs.CmEvent;
import org.nettyrdma.verbs.CmEventChannel;
import org.nettyrdma.verbs.CmEventType;
import org.nettyrdma.verbs.CmId;
import org.nettyrdma.verbs.CompletionQueue;
import org.nettyrdma.verbs.ConnectionParameters;
import org.nettyrdma.verbs.Device;
import org.nettyrdma.verbs.EventWaiter;
import org.nettyrdma.verbs.MemoryRegion;
import org.nettyrdma.verbs.ProtectionDomain;
import org.nettyrdma.verbs.QpInitAttributes;
import org.nettyrdma.verbs.QueuePair;
import org.nettyrdma.verbs.VerbsException;
import org.nettyrdma.verbs.VerbsProvider;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.concurrent.TimeUnit;

/**
 * A client and a server RC queue pair connected over RDMA CM on a loopback address, both driven by the calling thread
 * as one event loop would drive them. Owns every verbs object it creates and closes them in reverse order. For tools
 * that exercise a provider below the transport: the examples' verbs ping-pong and the post/poll benchmark.
 * <p>
 * Not part of the verbs SPI ({@code org.nettyrdma.verbs}) nor of the transport: a client of the SPI, kept in the
 * library only because both the examples and the benchmarks use it and neither module depends on the other.
 */
public final class LoopbackConnection implements AutoCloseable {
    private static final int CM_TIMEOUT_MS = 2000;
    private static final long SETUP_TIMEOUT_NS = TimeUnit.SECONDS.toNanos(10);
    /** No RDMA READs; 7 transport retries; 3 RNR retries (the users of this class never send without credit). */
    private static final ConnectionParameters PARAMETERS = new ConnectionParameters(null, 0, 0, 7, 3);

    /** One end: its CM id, protection domain, send and receive completion queues and queue pair. */
    public static final class Endpoint {
        private final LoopbackConnection owner;
        private CmId id;
        private ProtectionDomain pd;
        private CompletionQueue sendCq;
        private CompletionQueue recvCq;
        private QueuePair qp;
        private boolean established;
        private boolean disconnected;

        private Endpoint(LoopbackConnection owner) {
            this.owner = owner;
        }

        private void createQp() throws VerbsException {
            Device device = id.device();
            int depth = owner.queueDepth;
            pd = owner.own(device.allocPd());
            sendCq = owner.own(device.createCq(depth, null));
            recvCq = owner.own(device.createCq(depth, null));
            qp = owner.own(id.createQp(pd, new QpInitAttributes(sendCq, recvCq, depth, depth, 1, 1, 0, false)));
        }

        /** Registers {@code buffer} for local access on this end; closed with the connection. */
        public MemoryRegion register(ByteBuffer buffer) throws VerbsException {
            return owner.own(pd.registerMemory(buffer, Access.LOCAL_WRITE));
        }

        public CmId id() {
            return id;
        }

        public QueuePair qp() {
            return qp;
        }

        public CompletionQueue sendCq() {
            return sendCq;
        }

        public CompletionQueue recvCq() {
            return recvCq;
        }
    }

    private final Deque<AutoCloseable> resources = new ArrayDeque<>();
    private final CmEvent event = new CmEvent();
    private final Endpoint client = new Endpoint(this);
    private final Endpoint server = new Endpoint(this);
    private final int queueDepth;
    private CmEventChannel channel;
    private EventWaiter waiter;

    private LoopbackConnection(int queueDepth) {
        this.queueDepth = queueDepth;
    }

    /**
     * Connects a client to a listener on {@code address} (port 0: any free port) through {@code provider}.
     *
     * @param queueDepth work requests each queue of each QP holds, and completions each completion queue holds
     */
    public static LoopbackConnection open(VerbsProvider provider, InetAddress address, int queueDepth)
            throws IOException {
        LoopbackConnection connection = new LoopbackConnection(queueDepth);
        try {
            connection.connect(provider, address);
            return connection;
        } catch (IOException | RuntimeException e) {
            connection.release(e);
            throw e;
        }
    }

    public Endpoint client() {
        return client;
    }

    public Endpoint server() {
        return server;
    }

    private <T extends AutoCloseable> T own(T resource) {
        resources.push(resource);
        return resource;
    }

    private void connect(VerbsProvider provider, InetAddress address) throws IOException {
        channel = own(provider.createEventChannel());
        waiter = own(provider.createWaiter());
        waiter.add(channel);
        own(() -> waiter.remove(channel));
        CmId listener = own(provider.createId(channel, "listener"));
        listener.bind(new InetSocketAddress(address, 0));
        listener.listen(1);
        client.id = own(provider.createId(channel, "client"));
        client.id.resolveAddress(null, listener.localAddress(), CM_TIMEOUT_MS);
        awaitEvents(() -> client.established && server.established, "ESTABLISHED");
    }

    private interface Condition {
        boolean met();
    }

    /** Handles CM events of both ends until {@code done} holds. */
    private void awaitEvents(Condition done, String what) throws IOException {
        long deadlineNs = System.nanoTime() + SETUP_TIMEOUT_NS;
        while (!done.met()) {
            if (channel.poll(event)) {
                onEvent(event);
                continue;
            }
            long leftNs = deadlineNs - System.nanoTime();
            if (leftNs <= 0) {
                throw new IOException("no " + what + " within " + TimeUnit.NANOSECONDS.toSeconds(SETUP_TIMEOUT_NS)
                        + " s");
            }
            waiter.await(leftNs);
        }
    }

    private void onEvent(CmEvent e) throws IOException {
        CmEventType type = e.type();
        switch (type) {
            case ADDR_RESOLVED:
                client.id.resolveRoute(CM_TIMEOUT_MS);
                return;
            case ROUTE_RESOLVED:
                client.createQp();
                client.id.connect(PARAMETERS);
                return;
            case CONNECT_REQUEST:
                if (server.id != null) {
                    e.id().reject(null);
                    e.id().close();
                    throw new IOException("a second CONNECT_REQUEST");
                }
                server.id = own(e.id());
                server.createQp();
                server.id.accept(PARAMETERS);
                return;
            case ESTABLISHED:
                endpointOf(e).established = true;
                return;
            case DISCONNECTED: {
                Endpoint end = endpointOf(e);
                end.disconnected = true;
                if (end == server) {
                    // answer the client's disconnect: on InfiniBand and RoCE the client's DISCONNECTED waits for it
                    // (the DREP) or for the CM's time-out
                    try {
                        server.id.disconnect();
                    } catch (VerbsException ignored) {
                        // iWARP and the emulated provider need no answer
                    }
                }
                return;
            }
            default:
                throw new IOException("RDMA CM: unexpected " + e + " for the " + e.id().context());
        }
    }

    private Endpoint endpointOf(CmEvent e) throws IOException {
        if (e.id() == client.id) {
            return client;
        }
        if (e.id() == server.id) {
            return server;
        }
        throw new IOException("RDMA CM: " + e + " for an unknown id");
    }

    /** Disconnects (both ends see DISCONNECTED), then destroys everything in reverse order of creation. */
    @Override
    public void close() throws IOException {
        IOException failure = null;
        try {
            if (client.established && server.established) {
                client.id.disconnect();
                awaitEvents(() -> client.disconnected && server.disconnected, "DISCONNECTED");
            }
        } catch (IOException e) {
            failure = e;
        }
        release(failure);
        if (failure != null) {
            throw failure;
        }
    }

    private void release(Throwable failure) throws IOException {
        IOException closeFailure = null;
        for (AutoCloseable resource; (resource = resources.poll()) != null; ) {
            try {
                resource.close();
            } catch (Exception e) {
                if (failure != null) {
                    failure.addSuppressed(e);
                } else if (closeFailure == null) {
                    closeFailure = e instanceof IOException ? (IOException) e : new IOException(e);
                } else {
                    closeFailure.addSuppressed(e);
                }
            }
        }
        if (closeFailure != null) {
            throw closeFailure;
        }
    }
}
