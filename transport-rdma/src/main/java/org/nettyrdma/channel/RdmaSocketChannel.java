package org.nettyrdma.channel;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.channel.AbstractChannel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelMetadata;
import io.netty.channel.ChannelOutboundBuffer;
import io.netty.channel.ChannelPipeline;
import io.netty.channel.ChannelPromise;
import io.netty.channel.ConnectTimeoutException;
import io.netty.channel.EventLoop;
import io.netty.channel.IoEventLoop;
import io.netty.channel.IoRegistration;
import io.netty.channel.RecvByteBufAllocator;
import io.netty.channel.socket.ChannelInputShutdownEvent;
import io.netty.channel.socket.ChannelInputShutdownReadComplete;
import io.netty.channel.socket.SocketChannel;
import io.netty.util.concurrent.Future;
import io.netty.util.internal.logging.InternalLogger;
import io.netty.util.internal.logging.InternalLoggerFactory;
import org.nettyrdma.channel.RdmaProtocol.Handshake;
import org.nettyrdma.channel.RdmaProtocol.RdmaProtocolException;
import org.nettyrdma.verbs.CmEvent;
import org.nettyrdma.verbs.CmId;
import org.nettyrdma.verbs.CompletionArray;
import org.nettyrdma.verbs.ConnectionParameters;
import org.nettyrdma.verbs.DeviceAttributes;
import org.nettyrdma.verbs.Errno;
import org.nettyrdma.verbs.MemoryRegion;
import org.nettyrdma.verbs.QpInitAttributes;
import org.nettyrdma.verbs.QueuePair;
import org.nettyrdma.verbs.SendFlags;
import org.nettyrdma.verbs.VerbsException;
import org.nettyrdma.verbs.WcStatus;
import org.nettyrdma.verbs.WorkRequestList;
import org.nettyrdma.verbs.WrOpcode;

import java.io.IOException;
import java.net.ConnectException;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.AlreadyConnectedException;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.ConnectionPendingException;
import java.nio.channels.NotYetConnectedException;
import java.nio.channels.UnresolvedAddressException;
import java.util.concurrent.TimeUnit;

/**
 * A stream channel over an RDMA reliable connection: the drop-in for a {@link SocketChannel} of Netty's NIO or epoll
 * transports. Bytes written are delivered once and in order (fragmented and coalesced like TCP), with receiver credits
 * as flow control, half-close, orderly and abortive close; see docs/protocol.md.
 *
 * <p>A write's future completes when the peer's adapter has placed its bytes in the peer's receive buffer (the send's
 * work completion). Buffers from {@link RdmaByteBufAllocator} are sent with no copy; others are copied once into
 * registered staging memory ({@link #counters()} counts both).
 */
public final class RdmaSocketChannel extends AbstractChannel implements SocketChannel {
    private static final InternalLogger logger = InternalLoggerFactory.getInstance(RdmaSocketChannel.class);
    private static final ChannelMetadata METADATA = new ChannelMetadata(false, 16);
    private static final long RECV_BIT = 1L << 31;
    private static final int RESOLVE_TIMEOUT_MS = 2000;
    private static final int MAX_SEND_SGE = 4;
    private static final int MAX_INLINE = 256;
    private static final int RNR_RETRY = 3;
    /** How long an accepted channel waits for the connecting side's greeting before it sends anyway. */
    private static final long GREETING_WAIT_MILLIS = 250;
    /** Failures to accept connections may come from every peer: one WARN per 10 s. */
    private static final WarnLimiter ACCEPT_FAILURES = new WarnLimiter(10, TimeUnit.SECONDS);

    private static final int OPEN = 0;
    private static final int CONNECTING = 1;
    private static final int ACTIVE = 2;
    private static final int CLOSED = 3;

    private final RdmaSocketChannelConfig config;
    private final RdmaCounters counters = new RdmaCounters();
    private volatile int state = OPEN;
    private volatile InetSocketAddress local;
    private volatile InetSocketAddress remote;
    private volatile boolean inputShutdown;
    private volatile boolean outputShutdown;

    // all below: event loop only
    private RdmaIoHandler handler;
    private RdmaIoHandler.Registration registration;
    private IoRegistration ioRegistration;
    private CmId id;
    private Handshake peer;
    private ChannelPromise connectPromise;
    private Future<?> connectTimeout;
    private InetSocketAddress requestedRemote;
    private Connection conn;

    /** A client channel; connect it with a {@link io.netty.bootstrap.Bootstrap}. */
    public RdmaSocketChannel() {
        super(null);
        config = new RdmaSocketChannelConfig(this);
    }

    /** An accepted channel: its id got CONNECT_REQUEST with {@code peer}'s handshake. */
    RdmaSocketChannel(RdmaServerSocketChannel parent, CmId id, Handshake peer) {
        super(parent);
        config = new RdmaSocketChannelConfig(this);
        this.id = id;
        this.peer = peer;
        this.local = id.localAddress();
        this.remote = id.remoteAddress();
        this.state = CONNECTING;
    }

    @Override
    public RdmaServerSocketChannel parent() {
        return (RdmaServerSocketChannel) super.parent();
    }

    @Override
    public RdmaSocketChannelConfig config() {
        return config;
    }

    /** This channel's traffic: bytes, messages, work requests, copies and credit stalls. */
    public RdmaCounters counters() {
        return counters;
    }

    @Override
    public ChannelMetadata metadata() {
        return METADATA;
    }

    @Override
    public boolean isOpen() {
        return state != CLOSED;
    }

    @Override
    public boolean isActive() {
        return state == ACTIVE;
    }

    @Override
    public InetSocketAddress localAddress() {
        return (InetSocketAddress) super.localAddress();
    }

    @Override
    public InetSocketAddress remoteAddress() {
        return (InetSocketAddress) super.remoteAddress();
    }

    @Override
    protected SocketAddress localAddress0() {
        return local;
    }

    @Override
    protected SocketAddress remoteAddress0() {
        return remote;
    }

    @Override
    public boolean isInputShutdown() {
        return inputShutdown || !isActive();
    }

    @Override
    public boolean isOutputShutdown() {
        return outputShutdown || !isActive();
    }

    @Override
    public boolean isShutdown() {
        return isInputShutdown() && isOutputShutdown();
    }

    @Override
    public ChannelFuture shutdownOutput() {
        return shutdownOutput(newPromise());
    }

    @Override
    public ChannelFuture shutdownOutput(ChannelPromise promise) {
        EventLoop loop = eventLoop();
        if (loop.inEventLoop()) {
            ((AbstractUnsafe) unsafe()).shutdownOutput(promise);
        } else {
            loop.execute(() -> ((AbstractUnsafe) unsafe()).shutdownOutput(promise));
        }
        return promise;
    }

    @Override
    public ChannelFuture shutdownInput() {
        return shutdownInput(newPromise());
    }

    @Override
    public ChannelFuture shutdownInput(ChannelPromise promise) {
        EventLoop loop = eventLoop();
        if (loop.inEventLoop()) {
            shutdownInput0(promise);
        } else {
            loop.execute(() -> shutdownInput0(promise));
        }
        return promise;
    }

    private void shutdownInput0(ChannelPromise promise) {
        if (!isOpen()) {
            promise.setFailure(new ClosedChannelException());
        } else if (!isActive()) {
            promise.setFailure(new NotYetConnectedException());
        } else {
            inputShutdown = true;
            if (conn != null) {
                conn.discardPendingReads();
            }
            promise.setSuccess();
        }
    }

    @Override
    public ChannelFuture shutdown() {
        return shutdown(newPromise());
    }

    @Override
    public ChannelFuture shutdown(ChannelPromise promise) {
        ChannelFuture out = shutdownOutput();
        out.addListener(f -> shutdownInput(promise));
        return promise;
    }

    @Override
    protected boolean isCompatible(EventLoop loop) {
        return loop instanceof IoEventLoop && ((IoEventLoop) loop).isCompatible(RdmaSocketUnsafe.class);
    }

    @Override
    protected AbstractUnsafe newUnsafe() {
        return new RdmaSocketUnsafe();
    }

    @Override
    protected void doRegister(ChannelPromise promise) {
        RdmaIoHandler.register(eventLoop(), (RdmaSocketUnsafe) unsafe(), registration != null, promise, (io, r) -> {
            ioRegistration = io;
            registration = r;
            handler = r.handler();
            if (id == null) {
                id = handler.resources().provider().createId(handler.cmChannel(), unsafe());
            } else {
                id.migrate(handler.cmChannel());
                id.context(unsafe());
            }
            if (parent() != null && conn == null && isOpen()) {
                // accepted: connect before the pipeline learns it is registered, so that it is active then, as
                // an accepted TCP channel is
                ((RdmaSocketUnsafe) unsafe()).accept();
            }
        });
    }

    @Override
    protected void doBind(SocketAddress localAddress) throws Exception {
        if (id == null) {
            throw new NotYetConnectedException();
        }
        id.bind((InetSocketAddress) localAddress);
        local = id.localAddress();
    }

    @Override
    protected void doDisconnect() throws Exception {
        doClose();
    }

    @Override
    protected void doClose() throws Exception {
        int was = state;
        state = CLOSED;
        RdmaSocketUnsafe u = (RdmaSocketUnsafe) unsafe();
        if (connectTimeout != null) {
            connectTimeout.cancel(false);
            connectTimeout = null;
        }
        ChannelPromise p = connectPromise;
        if (p != null) {
            connectPromise = null;
            p.tryFailure(new ClosedChannelException());
        }
        if (registration == null) {
            // never registered (e.g. closed forcibly before the acceptor registered it): refuse the connection
            if (id != null && parent() != null) {
                try {
                    id.reject(RdmaProtocol.reject(RdmaProtocol.REJECT_REFUSED, "closed before it was accepted"));
                } catch (VerbsException e) {
                    logger.debug("reject failed", e);
                }
            }
            u.destroy();
            return;
        }
        if (conn != null && was == ACTIVE && config.getSoLinger() != 0 && !conn.failed && !conn.peerGone) {
            conn.closeGracefully();
        } else {
            u.abort();
        }
    }

    @Override
    protected void doDeregister() {
        // the registration lives until the connection's last completion (RdmaSocketUnsafe.destroy)
    }

    @Override
    protected void doBeginRead() {
        RdmaSocketUnsafe u = (RdmaSocketUnsafe) unsafe();
        u.readPending = true;
        if (conn != null && conn.hasPendingReads()) {
            u.scheduleRead();
        }
    }

    @Override
    protected Object filterOutboundMessage(Object msg) {
        if (msg instanceof ByteBuf) {
            return msg;
        }
        throw new UnsupportedOperationException("unsupported message type: " + msg.getClass().getName()
                + " (RDMA channels write ByteBufs)");
    }

    @Override
    protected void doWrite(ChannelOutboundBuffer in) throws Exception {
        if (conn == null) {
            throw new NotYetConnectedException();
        }
        conn.write(in);
    }

    @Override
    protected void doShutdownOutput() throws Exception {
        if (!isActive()) {
            throw new NotYetConnectedException();
        }
        outputShutdown = true;
        if (conn != null) {
            conn.sendFin();
        }
    }

    private long wrId(int slot, boolean recv) {
        return (long) registration.id << 32 | (recv ? RECV_BIT : 0) | slot;
    }

    final class RdmaSocketUnsafe extends AbstractUnsafe implements RdmaIoHandle {
        boolean readPending;
        private boolean readScheduled;
        private final Runnable readTask = () -> {
            readScheduled = false;
            readLoop();
        };

        @Override
        public boolean inEventLoop() {
            // an accepted channel that no loop took yet is handled where its events arrive (its listener's loop)
            return !isRegistered() || eventLoop().inEventLoop();
        }

        @Override
        public void execute(Runnable task) {
            eventLoop().execute(task);
        }

        @Override
        public void connect(SocketAddress remoteAddress, SocketAddress localAddress, ChannelPromise promise) {
            if (!ensureOpen(promise)) {
                return;
            }
            if (connectPromise != null) {
                promise.tryFailure(new ConnectionPendingException());
                return;
            }
            if (state == ACTIVE || conn != null) {
                promise.tryFailure(new AlreadyConnectedException());
                return;
            }
            InetSocketAddress r = (InetSocketAddress) remoteAddress;
            if (r.isUnresolved()) {
                promise.tryFailure(new UnresolvedAddressException());
                return;
            }
            try {
                if (localAddress != null) {
                    doBind(localAddress);
                }
                requestedRemote = r;
                connectPromise = promise;
                state = CONNECTING;
                id.resolveAddress((InetSocketAddress) localAddress, r, RESOLVE_TIMEOUT_MS);
            } catch (Throwable t) {
                connectPromise = null;
                state = isOpen() ? OPEN : CLOSED;
                promise.tryFailure(annotateConnectException(asConnectException(t), r));
                closeIfClosed();
                return;
            }
            int timeoutMillis = config.getConnectTimeoutMillis();
            if (timeoutMillis > 0) {
                connectTimeout = eventLoop().schedule(() -> {
                    ChannelPromise p = connectPromise;
                    if (p != null && !p.isDone()) {
                        failConnect(new ConnectTimeoutException("connection timed out after " + timeoutMillis
                                + " ms: " + r));
                    }
                }, timeoutMillis, TimeUnit.MILLISECONDS);
            }
            promise.addListener(f -> {
                if (f.isCancelled()) {
                    if (connectTimeout != null) {
                        connectTimeout.cancel(false);
                    }
                    connectPromise = null;
                    close(voidPromise());
                }
            });
        }

        private Throwable asConnectException(Throwable t) {
            if (t instanceof VerbsException) {
                ConnectException e = new ConnectException(t.getMessage());
                e.initCause(t);
                return e;
            }
            return t;
        }

        private void failConnect(Throwable cause) {
            ChannelPromise p = connectPromise;
            connectPromise = null;
            if (connectTimeout != null) {
                connectTimeout.cancel(false);
                connectTimeout = null;
            }
            if (p != null) {
                p.tryFailure(cause instanceof ConnectTimeoutException ? cause
                        : annotateConnectException(cause, requestedRemote));
            }
            close(voidPromise());
        }

        /**
         * An accepted channel, now registered on its own loop: set up the connection and accept it. The QP is ready to
         * send once {@code rdma_accept} returns, so the channel is active from here (ESTABLISHED only confirms it).
         */
        void accept() {
            try {
                conn = new Connection(peer);
                id.accept(conn.parameters());
                state = ACTIVE;
                return;
            } catch (Throwable t) {
                if (ACCEPT_FAILURES.tryWarn()) {
                    logger.warn("{}: cannot accept a connection from {}: {} (further failures within 10 s are logged "
                            + "at DEBUG)", parent(), remote, t.toString());
                }
                logger.debug("accepting a connection from {} failed", remote, t);
            }
            // the peer learns nothing about this side's state
            try {
                id.reject(RdmaProtocol.reject(RdmaProtocol.REJECT_NO_RESOURCES,
                        "the server could not set up the connection"));
            } catch (VerbsException e) {
                logger.debug("reject failed", e);
            }
            if (conn != null) {
                conn.destroy(); // the id was never connected: nothing to disconnect
                conn = null;
            }
            eventLoop().execute(() -> close(voidPromise())); // once registered: the pipeline sees no activity
        }

        @Override
        public void onCmEvent(CmEvent event) {
            switch (event.type()) {
                case ADDR_RESOLVED:
                    onAddressResolved();
                    break;
                case ROUTE_RESOLVED:
                    onRouteResolved();
                    break;
                case ESTABLISHED:
                    onEstablished(event);
                    break;
                case REJECTED: {
                    String reason = RdmaProtocol.rejectMessage(event.privateData(), event.privateDataLength());
                    failConnect(new ConnectException(reason != null
                            ? "connection rejected by the peer: " + reason : "Connection refused"));
                    break;
                }
                case UNREACHABLE:
                    failConnect(new ConnectException("no answer from the peer (RDMA CM status "
                            + event.status() + (event.status() < 0 ? ", " + Errno.describe(event.status()) : "")
                            + ')'));
                    break;
                case ADDR_ERROR:
                case ROUTE_ERROR:
                case CONNECT_ERROR:
                    failConnect(new ConnectException("RDMA CM " + event.type() + ": no RDMA route to "
                            + requestedRemote + " (status " + event.status()
                            + (event.status() < 0 ? ", " + Errno.describe(event.status()) : "") + ')'));
                    break;
                case DISCONNECTED:
                    onDisconnected();
                    break;
                case DEVICE_REMOVAL:
                    fail(new IOException("the RDMA device was removed"));
                    break;
                default:
                    break;
            }
        }

        private void onAddressResolved() {
            if (connectPromise == null) {
                return;
            }
            try {
                id.resolveRoute(RESOLVE_TIMEOUT_MS);
            } catch (Throwable t) {
                failConnect(asConnectException(t));
            }
        }

        private void onRouteResolved() {
            if (connectPromise == null) {
                return;
            }
            try {
                conn = new Connection(null);
                id.connect(conn.parameters());
            } catch (Throwable t) {
                failConnect(asConnectException(t));
            }
        }

        private void onEstablished(CmEvent event) {
            if (parent() != null) {
                return; // an accepted channel is active since its accept
            }
            ChannelPromise p = connectPromise;
            if (conn == null || state != CONNECTING || p == null) {
                return; // the connect ended before (closed, failed or timed out)
            }
            try {
                conn.peerReady(Handshake.parse(event.privateData(), event.privateDataLength()));
            } catch (Throwable t) {
                failConnect(t instanceof RdmaProtocolException ? new ConnectException(t.getMessage()) : t);
                return;
            }
            connectPromise = null;
            if (connectTimeout != null) {
                connectTimeout.cancel(false);
                connectTimeout = null;
            }
            local = id.localAddress();
            remote = id.remoteAddress();
            state = ACTIVE;
            conn.greet();
            // as epoll does: channelActive even if a listener of the promise closes the channel (inactive follows)
            boolean promiseSet = p.trySuccess();
            pipeline().fireChannelActive();
            if (!promiseSet) {
                close(voidPromise());
            } else {
                onBatchComplete(); // data that beat ESTABLISHED
            }
        }

        private void onDisconnected() {
            if (conn == null) {
                destroy();
                return;
            }
            conn.peerGone = true;
            if (conn.closing || !isOpen()) {
                destroy();
                return;
            }
            if (state == CONNECTING) {
                failConnect(new ConnectException("the peer disconnected during connection set-up"));
                return;
            }
            if (!conn.finReceived) {
                conn.failed = true;
                pipeline().fireExceptionCaught(new IOException("Connection reset by peer"));
                close(voidPromise());
            } else if (!conn.hasPendingReads()) {
                close(voidPromise());
            }
            // else: the read loop delivers what is left, then closes
        }

        /** A send failed: like a socket write error, the pending writes fail with it and the channel closes. */
        void writeFailed(IOException cause) {
            conn.failed = true;
            if (isOpen()) {
                handleWriteError(cause);
            } else {
                destroy();
            }
        }

        /** A failure of the connection: the channel reports it and closes (never the loop). */
        void fail(Throwable cause) {
            if (conn != null) {
                conn.failed = true;
            }
            if (isOpen()) {
                pipeline().fireExceptionCaught(cause);
                close(voidPromise());
            } else {
                destroy();
            }
        }

        @Override
        public void onCompletion(CompletionArray wc, int index) {
            if (conn != null) {
                long wrId = wc.wrId(index);
                int slot = (int) (wrId & (RECV_BIT - 1));
                if ((wrId & RECV_BIT) != 0) {
                    conn.onRecvCompletion(slot, wc.status(index), wc.byteLen(index));
                } else {
                    conn.onSendCompletion(slot, wc.status(index));
                }
            }
        }

        @Override
        public void onBatchComplete() {
            if (conn != null) {
                conn.onBatchComplete();
            }
        }

        void scheduleRead() {
            if (!readScheduled) {
                readScheduled = true;
                eventLoop().execute(readTask);
            }
        }

        /** Delivers buffered data to the pipeline the way a socket read loop does (RecvByteBufAllocator rules). */
        void readLoop() {
            if (conn == null || !isActive() && !(conn.finReceived && isOpen())) {
                return;
            }
            if (!readPending && !config.isAutoRead()) {
                return;
            }
            ChannelPipeline pipeline = pipeline();
            RecvByteBufAllocator.Handle allocHandle = recvBufAllocHandle();
            allocHandle.reset(config);
            boolean read = false;
            while (conn.hasPendingData() && !inputShutdown && isOpen()) {
                ByteBuf buf = conn.nextRead(allocHandle);
                if (buf == null) {
                    break; // the connection failed (a receive could not be posted again): the channel is closing
                }
                readPending = false;
                read = true;
                pipeline.fireChannelRead(buf);
                if (!allocHandle.continueReading()) {
                    break;
                }
            }
            if (read) {
                allocHandle.readComplete();
                pipeline.fireChannelReadComplete();
            }
            if (conn != null && conn.finAtHead()) {
                conn.onFinReached();
            } else if (conn != null && conn.hasPendingData() && (readPending || config.isAutoRead())) {
                scheduleRead();
            }
        }

        /** Overridden only to be callable from {@link Connection} (posts what the pipeline flushed). */
        @Override
        protected void flush0() {
            super.flush0();
        }

        @Override
        protected void close(ChannelPromise promise, Throwable cause, ClosedChannelException closeCause) {
            if (conn != null && conn.removing) {
                // a write future's listener closes while a completion removes bytes: close right after it
                eventLoop().execute(() -> close(promise, cause, closeCause));
                return;
            }
            if (conn != null && !conn.failed && !conn.peerGone && config.getSoLinger() != 0) {
                conn.settleInFlight();
                if (isActive()) {
                    conn.lingerFlushed(outboundBuffer());
                }
            }
            super.close(promise, cause, closeCause);
        }

        /** Abortive close: disconnect now, without FIN; the peer sees a reset. */
        void abort() {
            if (conn != null && !conn.destroyed && id != null && !conn.peerGone) {
                try {
                    conn.closing = true;
                    id.disconnect();
                    return; // DISCONNECTED destroys
                } catch (VerbsException e) {
                    logger.debug("rdma_disconnect failed", e);
                }
            }
            destroy();
        }

        /** Releases every verbs resource of the channel; from here no completion can name it. */
        void destroy() {
            if (conn != null) {
                conn.destroy();
            }
            if (id != null) {
                try {
                    id.close();
                } catch (VerbsException e) {
                    logger.debug("rdma_destroy_id failed", e);
                }
                id = null;
            }
            if (registration != null) {
                ioRegistration.cancel(); // through the loop's wrapper, which counts registrations
            }
        }

        @Override
        public void close() {
            // the event loop shuts down: tear down at once
            if (isOpen()) {
                close(voidPromise());
            }
            if (conn != null) {
                conn.failed = true;
            }
            destroy();
        }
    }

    /**
     * The verbs side of one connection: the QP, its registered receive buffers and send staging memory, and the
     * credits both ways. Event loop only.
     */
    private final class Connection {
        private final RdmaIoHandler.DeviceQueues queues;
        private final QueuePair qp;
        private final int recvSize;
        private final int recvCount;
        private final ReceiveQueue recv;
        private final int sqDepth;
        private final int maxSge;
        private final int maxInline;
        private final int reservedCqEntries;
        private final SendBuilder builder = new SendBuilder();

        // set when the peer's handshake is known
        private int stageSize;
        private RegisteredRegion stagingRegion;
        private MemoryRegion stagingMr;
        private ByteBuffer stagingView;
        private WorkRequestList sendWrs;
        private long[] sendRemoveBytes;
        private int sendCredits;
        /** The peer's receive buffers: it never has more credits to give. */
        private int peerRecvCount;

        private int sqInUse;
        private int sqNext;
        private long unsettledBytes;
        private int owedData;
        private int owedCtrl;
        private long grantedToPeer;
        private long receivedFromPeer;

        /** Whether sends may be posted: at once when connecting, after the peer's first message when accepted. */
        boolean sendOpen;
        /** What an orderly close still sends: flushed writes not posted when the channel closed. */
        private CloseLinger linger;
        private Future<?> greetingWait;
        boolean removing;
        boolean flushAfterRemove;
        boolean finSent;
        boolean finPending;
        boolean finReceived;
        boolean closing;
        boolean failed;
        boolean peerGone;
        /** A credit message could not be posted: the connection is going down, no more credit messages. */
        boolean creditsBroken;
        boolean destroyed;
        private Future<?> closeTimeout;

        Connection(Handshake knownPeer) throws IOException {
            queues = handler.deviceQueues(id.device());
            DeviceAttributes limits = id.device().attributes();
            recvSize = config.getRdmaReceiveBufferSize();
            recvCount = config.getRdmaReceiveBufferCount();
            // the send queue follows this side's configuration, never the peer's handshake (RdmaProtocol.Handshake)
            sqDepth = Math.min(limits.maxQpWr(), recvCount + 4);
            maxSge = Math.min(limits.maxSge(), MAX_SEND_SGE);
            maxInline = Math.min(limits.maxInlineData(), MAX_INLINE);
            reservedCqEntries = sqDepth + recvCount;
            queues.reserve(reservedCqEntries);
            QueuePair createdQp = null;
            ReceiveQueue receives = null;
            boolean ok = false;
            try {
                createdQp = id.createQp(queues.pd, new QpInitAttributes(queues.cq, queues.cq, sqDepth, recvCount,
                        maxSge, 1, maxInline, false));
                receives = new ReceiveQueue(createdQp, queues.pd, receiveMemory(), recvSize, recvCount,
                        wrId(0, true), new ReceiveQueue.LendLimits(counters, config.getMaxLentReceiveBytes(),
                        handler.counters(), handler.config().getMaxLentReceiveBytes()));
                receives.postAll();
                qp = createdQp;
                recv = receives;
                if (knownPeer != null) {
                    peerReady(knownPeer);
                }
                ok = true;
            } finally {
                if (!ok) {
                    // in reverse order of creation; the receive buffers only once no receive can reference them
                    if (stagingRegion != null) {
                        stagingRegion.close();
                    }
                    if (createdQp != null) {
                        try {
                            createdQp.close();
                        } catch (VerbsException e) {
                            logger.debug("destroying the QP of a failed connection set-up failed", e);
                        }
                    }
                    if (receives != null) {
                        receives.close();
                    }
                    queues.release(reservedCqEntries);
                }
            }
        }

        /** Where receive buffers come from: the channel's allocator if it is a registered one. */
        private RdmaByteBufAllocator receiveMemory() {
            ByteBufAllocator alloc = config.getAllocator();
            return alloc instanceof RdmaByteBufAllocator ? (RdmaByteBufAllocator) alloc : RdmaByteBufAllocator.DEFAULT;
        }

        ConnectionParameters parameters() {
            int rd = Math.min(16, id.device().attributes().maxQpRdAtom());
            return new ConnectionParameters(RdmaProtocol.handshake(recvSize, recvCount), rd, rd, 7, RNR_RETRY);
        }

        void peerReady(Handshake p) throws IOException {
            if (sendWrs != null) {
                return;
            }
            sendCredits += p.receiveBufferCount; // credits may have come with data that beat ESTABLISHED
            peerRecvCount = p.receiveBufferCount;
            if (sendCredits > peerRecvCount) {
                throw protocolViolation("granted " + sendCredits + " credits, more than its " + peerRecvCount
                        + " receive buffers");
            }
            // a SEND is at most the smaller receive buffer of both sides: the peer's handshake never decides what this
            // side allocates (staging is sqDepth sends of this size)
            stageSize = Math.min(p.receiveBufferSize, recvSize);
            stagingRegion = new RegisteredRegion(stageSize * sqDepth);
            stagingMr = stagingRegion.memoryRegion(queues.pd);
            stagingView = stagingRegion.memory().duplicate();
            sendWrs = new WorkRequestList(Math.min(sqDepth, 32), maxSge);
            sendRemoveBytes = new long[sqDepth];
            grantedToPeer = recvCount;
            // the connecting side sends first (its greeting, see greet()); the accepted side waits for it
            sendOpen = parent() == null;
            if (!sendOpen) {
                greetingWait = eventLoop().schedule(this::greetingLate, GREETING_WAIT_MILLIS, TimeUnit.MILLISECONDS);
            }
        }

        /**
         * No greeting {@value #GREETING_WAIT_MILLIS} ms after the accept: send anyway. By then the connecting side's
         * QP is ready; its greeting is late or lost (on soft-iWARP under load, one connection in ~500 never had its
         * greeting delivered to the accepting side).
         */
        private void greetingLate() {
            greetingWait = null;
            if (!sendOpen && !destroyed) {
                logger.debug("{}: no greeting from the peer within {} ms, sending anyway", RdmaSocketChannel.this,
                        GREETING_WAIT_MILLIS);
                openSendSide();
                onBatchComplete();
            }
        }

        private void openSendSide() {
            sendOpen = true;
            if (greetingWait != null) {
                greetingWait.cancel(false);
                greetingWait = null;
            }
        }

        /**
         * The connecting side's first message, right at ESTABLISHED: a CREDIT message (usually of 0 credits). The
         * accepted side sends nothing before a message from the peer has arrived: iWARP (MPA) requires the initiator
         * to send first (soft-iWARP fails the connection on the initiator's side otherwise), and on InfiniBand and
         * RoCE it proves the initiator's QP ready to receive (rxe drops what arrives earlier, resent ~2 s later).
         */
        void greet() {
            postControl(RdmaProtocol.TYPE_CREDIT);
        }

        // ---- receive side ----

        private RdmaProtocolViolationException protocolViolation(String what) {
            return new RdmaProtocolViolationException("protocol violation by " + remote + ": the peer " + what);
        }

        void onRecvCompletion(int slot, int status, int byteLen) {
            if (status != WcStatus.SUCCESS) {
                if (status == WcStatus.WR_FLUSH_ERR) {
                    if (!closing && !peerGone && !failed && state != CONNECTING) {
                        // iWARP flushes the receives as soon as the peer's connection closes, before DISCONNECTED
                        // arrives: the same thing, the data that came before is delivered first. While connecting,
                        // ESTABLISHED (then DISCONNECTED) is still to come: the peer accepted, sent and closed
                        // before this loop saw the connection set up; those events settle it.
                        ((RdmaSocketUnsafe) unsafe()).onDisconnected();
                    }
                } else {
                    ((RdmaSocketUnsafe) unsafe()).fail(new IOException("receive failed: " + WcStatus.name(status)));
                }
                return;
            }
            counters.completions++;
            receivedFromPeer++;
            if (!sendOpen) {
                openSendSide(); // an accepted channel's gate: the peer has sent, it may send too (see greet())
            }
            ByteBuf message = recv.buffer(slot);
            String violation = RdmaProtocol.checkHeader(message, byteLen);
            int type = violation == null ? RdmaProtocol.headerType(message) : 0;
            int credits = violation == null ? RdmaProtocol.headerCredits(message) : 0;
            if (violation == null && sendWrs != null && sendCredits + credits > peerRecvCount) {
                violation = "granted " + (sendCredits + credits) + " credits, more than its " + peerRecvCount
                        + " receive buffers";
            }
            if (violation != null) {
                ((RdmaSocketUnsafe) unsafe()).fail(protocolViolation(violation));
                return;
            }
            sendCredits += credits;
            switch (type) {
                case RdmaProtocol.TYPE_DATA:
                    counters.messagesReceived++;
                    counters.bytesReceived += byteLen - RdmaProtocol.HEADER_LENGTH;
                    handler.counters().messagesReceived++;
                    handler.counters().bytesReceived += byteLen - RdmaProtocol.HEADER_LENGTH;
                    if (!isOpen()) {
                        owedData++; // closing: dropped, but the peer gets the credit back (its FIN may need it)
                        repostQuietly(slot);
                    } else if (inputShutdown || finReceived) {
                        owedCtrl++;
                        repostQuietly(slot);
                    } else {
                        recv.enqueue(slot, RdmaProtocol.HEADER_LENGTH, byteLen);
                    }
                    break;
                case RdmaProtocol.TYPE_FIN:
                    finReceived = true;
                    owedCtrl++;
                    repostQuietly(slot);
                    recv.enqueueFin();
                    break;
                default: // CREDIT
                    owedCtrl++;
                    repostQuietly(slot);
                    break;
            }
            handler.touch((RdmaSocketUnsafe) unsafe());
        }

        private void repostQuietly(int slot) {
            try {
                recv.repost(slot);
            } catch (VerbsException e) {
                ((RdmaSocketUnsafe) unsafe()).fail(e);
            }
        }

        boolean hasPendingReads() {
            return recv.hasPending();
        }

        boolean hasPendingData() {
            return recv.hasPendingData();
        }

        boolean finAtHead() {
            return recv.finAtHead();
        }

        /** The next buffer for the pipeline (see {@link ReceiveQueue#nextRead}); null if the channel failed. */
        ByteBuf nextRead(RecvByteBufAllocator.Handle allocHandle) {
            ByteBuf buf;
            try {
                buf = recv.nextRead(allocHandle, config.getAllocator());
            } catch (VerbsException e) {
                ((RdmaSocketUnsafe) unsafe()).fail(e);
                return null;
            }
            owedData += recv.takeReposted();
            maybeReturnCredits();
            return buf;
        }

        /** The FIN is next: every byte before it was delivered. */
        void onFinReached() {
            recv.takeFin();
            RdmaSocketUnsafe u = (RdmaSocketUnsafe) unsafe();
            if (!config.isAllowHalfClosure()) {
                u.close(u.voidPromise());
                return;
            }
            inputShutdown = true;
            pipeline().fireUserEventTriggered(ChannelInputShutdownEvent.INSTANCE);
            pipeline().fireUserEventTriggered(ChannelInputShutdownReadComplete.INSTANCE);
            if (peerGone || outputShutdown) {
                u.close(u.voidPromise());
            }
        }

        void discardPendingReads() {
            try {
                recv.discardPending();
            } catch (VerbsException e) {
                ((RdmaSocketUnsafe) unsafe()).fail(e);
                return;
            }
            owedData += recv.takeReposted();
            maybeReturnCredits();
        }

        void onBatchComplete() {
            if (state == CONNECTING) {
                return; // data that beat ESTABLISHED waits for it (onEstablished comes back here)
            }
            RdmaSocketUnsafe u = (RdmaSocketUnsafe) unsafe();
            if (recv.hasPending() && (u.readPending || config.isAutoRead()) && isOpen()) {
                u.readLoop();
            } else if (finAtHead() && isOpen()) {
                onFinReached(); // nothing buffered before the FIN: tell the pipeline even without a read
            }
            if (destroyed) {
                return;
            }
            if (closing) {
                postLingering();
            }
            if (finPending) {
                sendFin();
            }
            ChannelOutboundBuffer out = u.outboundBuffer();
            if (out != null && !out.isEmpty() && isActive()) {
                u.flush0();
            }
            maybeReturnCredits();
            if (closing) {
                maybeFinishClose();
            }
        }

        // ---- credits ----

        private int takeOwedCredits() {
            int n = Math.min(owedData + owedCtrl, RdmaProtocol.MAX_CREDITS_PER_HEADER);
            int fromData = Math.min(n, owedData);
            owedData -= fromData;
            owedCtrl -= n - fromData;
            grantedToPeer += n;
            return n;
        }

        /**
         * Sends a credit message when enough receive buffers were re-posted, or when the peer may be out of credits;
         * never for control buffers alone (which would ping-pong), and only with a credit to spend.
         */
        void maybeReturnCredits() {
            if (owedData == 0 || !sendOpen || destroyed || peerGone || failed || finReceived || creditsBroken) {
                return; // after its FIN the peer sends nothing more: it needs no credits
            }
            boolean peerStarving = grantedToPeer - receivedFromPeer <= 1;
            if ((owedData >= Math.max(1, recvCount / 4) || peerStarving) && sendCredits >= 1
                    && sqInUse < sqDepth) {
                postControl(RdmaProtocol.TYPE_CREDIT);
            }
        }

        // ---- send side ----

        void write(ChannelOutboundBuffer in) throws Exception {
            if (removing) {
                flushAfterRemove = true;
                return;
            }
            if (!sendOpen || closing) {
                return;
            }
            if (unsettledBytes == 0) {
                in.removeBytes(0); // drops empty buffers at the head
            }
            do {
                builder.start(unsettledBytes);
                in.forEachFlushedMessage(builder);
                builder.finish();
                post(builder.count);
            } while (builder.listFull);
            if (builder.creditStall) {
                counters.creditStalls++;
                handler.counters().creditStalls++;
            }
        }

        private void post(int count) throws IOException {
            if (count == 0) {
                return;
            }
            int rc = qp.postSend(sendWrs, 0, count);
            if (rc < 0) {
                throw new VerbsException("ibv_post_send", -rc, "work request " + sendWrs.badIndex() + " of " + count);
            }
            counters.workRequestsPosted += count;
            handler.counters().workRequestsPosted += count;
        }

        /** Builds SENDs from the flushed messages after the bytes already posted. Reused; allocates nothing. */
        private final class SendBuilder implements ChannelOutboundBuffer.MessageProcessor {
            long skip;
            int count;
            boolean listFull;
            boolean creditStall;
            private boolean building;
            private int slot;
            private int payload;
            private int copied;
            private int sges;

            void start(long alreadyPosted) {
                skip = alreadyPosted;
                count = 0;
                listFull = false;
                creditStall = false;
                building = false;
            }

            @Override
            public boolean processMessage(Object msg) {
                ByteBuf buf = (ByteBuf) msg;
                int index = buf.readerIndex();
                int readable = buf.readableBytes();
                if (skip >= readable) {
                    skip -= readable;
                    return true;
                }
                index += (int) skip;
                readable -= (int) skip;
                skip = 0;
                while (readable > 0) {
                    if (!building && !begin()) {
                        return false;
                    }
                    int room = stageSize - RdmaProtocol.HEADER_LENGTH - payload;
                    if (room == 0) {
                        end();
                        continue;
                    }
                    int n = Math.min(room, readable);
                    // the buffer's size decides (what was written into it), not the fragment's: the tail of a large
                    // registered buffer goes out directly too
                    RdmaByteBuf registered = buf.writerIndex() >= config.getZeroCopyThreshold() && sges < maxSge
                            ? RdmaByteBuf.unwrap(buf) : null;
                    MemoryRegion mr = registered != null ? memoryRegion(registered) : null;
                    if (mr != null) {
                        sendWrs.addSge(count, mr.address() + registered.regionOffset() + index, n, mr.lkey());
                        sges++;
                        counters.zeroCopyBytes += n;
                    } else if (sges == 1) {
                        int at = slot * stageSize + RdmaProtocol.HEADER_LENGTH + copied;
                        stagingView.limit(at + n).position(at);
                        buf.getBytes(index, stagingView);
                        stagingView.clear();
                        copied += n;
                        counters.copies++;
                        counters.copiedBytes += n;
                        handler.counters().copies++;
                        handler.counters().copiedBytes += n;
                    } else {
                        end();
                        continue;
                    }
                    payload += n;
                    index += n;
                    readable -= n;
                }
                return true;
            }

            /** The buffer's registration in this connection's protection domain, or null to copy instead. */
            private MemoryRegion memoryRegion(RdmaByteBuf registered) {
                try {
                    return registered.region().memoryRegion(queues.pd);
                } catch (VerbsException e) {
                    logger.debug("cannot register a buffer's region here; copying it", e);
                    return null;
                }
            }

            private boolean begin() {
                if (count == sendWrs.capacity()) {
                    listFull = true;
                    return false;
                }
                if (sendCredits < 2 || sqInUse == sqDepth) {
                    creditStall = sendCredits < 2;
                    return false;
                }
                slot = sqNext;
                payload = 0;
                copied = 0;
                sges = 1;
                sendWrs.setSend(count, wrId(slot, false), WrOpcode.SEND, SendFlags.SIGNALED)
                        .addSge(count, stagingMr.address() + (long) slot * stageSize, RdmaProtocol.HEADER_LENGTH,
                                stagingMr.lkey());
                building = true;
                return true;
            }

            private void end() {
                int base = slot * stageSize;
                RdmaProtocol.putHeader(stagingView, base, RdmaProtocol.TYPE_DATA, takeOwedCredits());
                sendWrs.setSge(count, 0, stagingMr.address() + base, RdmaProtocol.HEADER_LENGTH + copied,
                        stagingMr.lkey());
                if (sges == 1 && RdmaProtocol.HEADER_LENGTH + copied <= maxInline) {
                    sendWrs.sendFlags(count, SendFlags.SIGNALED | SendFlags.INLINE);
                }
                sendRemoveBytes[slot] = payload;
                unsettledBytes += payload;
                sendCredits--;
                sqInUse++;
                sqNext = sqNext + 1 == sqDepth ? 0 : sqNext + 1;
                count++;
                building = false;
                counters.messagesSent++;
                counters.bytesSent += payload;
                handler.counters().messagesSent++;
                handler.counters().bytesSent += payload;
            }

            void finish() {
                if (building) {
                    end();
                }
            }
        }

        /** A header-only message (FIN, CREDIT), posted at once. */
        private void postControl(int type) {
            int slot = sqNext;
            int base = slot * stageSize;
            RdmaProtocol.putHeader(stagingView, base, type, takeOwedCredits());
            sendWrs.setSend(0, wrId(slot, false), WrOpcode.SEND, SendFlags.SIGNALED | SendFlags.INLINE)
                    .addSge(0, stagingMr.address() + base, RdmaProtocol.HEADER_LENGTH, stagingMr.lkey());
            try {
                post(1);
            } catch (IOException e) {
                if (type == RdmaProtocol.TYPE_CREDIT && isOpen()) {
                    // the QP left RTS: the peer is closing (iWARP tears the connection down right after its FIN,
                    // which may still be in the receive queue behind data). Its FIN or DISCONNECTED says how it
                    // ended; until then what arrived is delivered, and no credits are owed any more.
                    logger.debug("{}: credit message not posted, the connection is going down",
                            RdmaSocketChannel.this, e);
                    creditsBroken = true;
                } else {
                    ((RdmaSocketUnsafe) unsafe()).fail(e);
                }
                return;
            }
            sendRemoveBytes[slot] = 0;
            sendCredits--;
            sqInUse++;
            sqNext = sqNext + 1 == sqDepth ? 0 : sqNext + 1;
        }

        /** FIN after everything posted; it waits for a credit beyond the one kept for credit messages. */
        void sendFin() {
            if (finSent || sendWrs == null || destroyed || peerGone) {
                return;
            }
            boolean lingerPosted = linger == null || linger.bytes() == unsettledBytes;
            if (sendOpen && sendCredits >= 2 && sqInUse < sqDepth && lingerPosted) {
                finPending = false;
                finSent = true;
                postControl(RdmaProtocol.TYPE_FIN);
            } else {
                finPending = true;
            }
        }

        void onSendCompletion(int slot, int status) {
            sqInUse--;
            counters.completions++;
            if (status != WcStatus.SUCCESS) {
                if (sendRemoveBytes[slot] == 0 && finReceived) {
                    // a CREDIT or FIN the peer no longer takes after its own FIN: it closed. What it sent before
                    // is delivered first, as on DISCONNECTED
                    ((RdmaSocketUnsafe) unsafe()).onDisconnected();
                } else if (status != WcStatus.WR_FLUSH_ERR || (!closing && !peerGone && !failed)) {
                    ((RdmaSocketUnsafe) unsafe()).writeFailed(new IOException("send failed: " + WcStatus.name(status)
                            + (status == WcStatus.RETRY_EXC_ERR ? " (the peer does not answer: gone or unreachable)"
                            : "")));
                }
                return;
            }
            long n = sendRemoveBytes[slot];
            RdmaSocketUnsafe u = (RdmaSocketUnsafe) unsafe();
            if (n > 0) {
                ChannelOutboundBuffer out = u.outboundBuffer();
                if (out != null) {
                    // removing completes write futures, whose listeners may write, flush or close: those wait until
                    // the bytes of this send are gone, or the bytes still in flight would be counted wrong
                    removing = true;
                    try {
                        out.removeBytes(n);
                    } finally {
                        removing = false;
                    }
                } else if (linger != null) {
                    linger.remove(n); // the channel closed: these were bytes its close took along
                }
                unsettledBytes -= n;
                if (flushAfterRemove) {
                    flushAfterRemove = false;
                    u.flush0();
                }
            }
            handler.touch(u);
        }

        /** Close: what is posted is taken as written (its futures succeed); the rest Netty fails. */
        void settleInFlight() {
            ChannelOutboundBuffer out = ((RdmaSocketUnsafe) unsafe()).outboundBuffer();
            if (out != null && unsettledBytes > 0) {
                out.removeBytes(unsettledBytes);
            }
            unsettledBytes = 0;
            if (sendRemoveBytes != null) {
                java.util.Arrays.fill(sendRemoveBytes, 0);
            }
        }

        /**
         * Close: flushed writes not posted yet are copied to the connection, up to {@code SO_SNDBUF} bytes of whole
         * writes (their futures succeed); the orderly close sends them before its FIN. Netty fails the rest.
         */
        void lingerFlushed(ChannelOutboundBuffer out) {
            if (out == null || finSent) {
                return;
            }
            if (linger == null) {
                linger = new CloseLinger();
            }
            try {
                linger.take(out, config.getSendBufferSize(), config.getAllocator());
            } catch (Exception e) {
                logger.debug("{}: taking the flushed writes along at close failed", RdmaSocketChannel.this, e);
            }
        }

        /** Closing: posts what the close took along ({@link #lingerFlushed}) as far as credits allow. */
        private void postLingering() {
            if (linger == null || !sendOpen || linger.bytes() == unsettledBytes) {
                return;
            }
            try {
                do {
                    builder.start(unsettledBytes);
                    linger.forEach(builder);
                    builder.finish();
                    post(builder.count);
                } while (builder.listFull);
            } catch (Exception e) {
                logger.debug("{}: sending the last writes failed; the close turns abortive", RdmaSocketChannel.this,
                        e);
                ((RdmaSocketUnsafe) unsafe()).abort();
            }
        }

        void closeGracefully() {
            closing = true;
            postLingering();
            sendFin();
            int timeoutMillis = config.getCloseTimeoutMillis();
            closeTimeout = eventLoop().schedule(() -> {
                if (!destroyed) {
                    ((RdmaSocketUnsafe) unsafe()).abort();
                }
            }, timeoutMillis, TimeUnit.MILLISECONDS);
            maybeFinishClose();
        }

        /** FIN sent and every send completed: disconnect (the peer has all our data). */
        void maybeFinishClose() {
            if (finSent && sqInUse == 0 && !destroyed) {
                ((RdmaSocketUnsafe) unsafe()).abort();
            }
        }

        void destroy() {
            if (destroyed) {
                return;
            }
            destroyed = true;
            if (closeTimeout != null) {
                closeTimeout.cancel(false);
            }
            try {
                qp.close();
            } catch (VerbsException e) {
                logger.debug("destroying the QP failed", e);
            }
            queues.release(reservedCqEntries);
            recv.close(); // the QP is gone: no receive references these buffers; lent ones are the application's
            if (linger != null) {
                linger.release();
            }
            if (stagingRegion != null) {
                stagingRegion.close();
            }
        }
    }
}
