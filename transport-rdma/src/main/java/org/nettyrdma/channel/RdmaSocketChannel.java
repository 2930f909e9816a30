package org.nettyrdma.channel;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelMetadata;
import io.netty.channel.ChannelOutboundBuffer;
import io.netty.channel.ChannelPipeline;
import io.netty.channel.ChannelPromise;
import io.netty.channel.ConnectTimeoutException;
import io.netty.channel.EventLoop;
import io.netty.channel.FileRegion;
import io.netty.channel.RecvByteBufAllocator;
import io.netty.channel.socket.SocketChannel;
import io.netty.util.internal.logging.InternalLogger;
import io.netty.util.internal.logging.InternalLoggerFactory;
import org.nettyrdma.channel.RdmaProtocol.Handshake;
import org.nettyrdma.channel.RdmaProtocol.RdmaProtocolException;
import org.nettyrdma.verbs.CmEvent;
import org.nettyrdma.verbs.CmId;
import org.nettyrdma.verbs.CompletionArray;
import org.nettyrdma.verbs.Errno;
import org.nettyrdma.verbs.VerbsException;

import java.io.IOException;
import java.net.ConnectException;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
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
public final class RdmaSocketChannel extends AbstractRdmaChannel implements SocketChannel {
    private static final InternalLogger logger = InternalLoggerFactory.getInstance(RdmaSocketChannel.class);
    private static final ChannelMetadata METADATA = new ChannelMetadata(false, 16);
    private static final int RESOLVE_TIMEOUT_MS = 2000;
    /** Failures to accept connections may come from every peer: one WARN per 10 s. */
    private static final WarnLimiter ACCEPT_FAILURES = new WarnLimiter(10, TimeUnit.SECONDS);

    private static final int OPEN = 0;
    private static final int CONNECTING = 1;
    private static final int ACTIVE = 2;
    private static final int CLOSED = 3;

    private final RdmaSocketChannelConfig config;
    private final RdmaCounters counters = new RdmaCounters();
    private volatile int state = OPEN;
    private volatile InetSocketAddress remote;
    volatile boolean inputShutdown;
    volatile boolean outputShutdown;

    // all below: event loop only
    private Handshake peer;
    /** A client's connect under way. */
    private PendingConnect connecting;
    private RdmaConnection conn;
    /** Our {@link #shutdownOutput()} is under way (it took the flushed writes along), not Netty's after a write error. */
    private boolean shuttingDownOutput;
    /** Whether the connection was ever set up (ESTABLISHED, or accepted): only then is there something to disconnect. */
    private boolean established;

    /** A client channel; connect it with a {@link io.netty.bootstrap.Bootstrap}. */
    public RdmaSocketChannel() {
        super(null, null);
        config = new RdmaSocketChannelConfig(this);
    }

    /** An accepted channel: its id got CONNECT_REQUEST with {@code peer}'s handshake. */
    RdmaSocketChannel(RdmaServerSocketChannel parent, CmId id, Handshake peer) {
        super(parent, id);
        config = new RdmaSocketChannelConfig(this);
        this.peer = peer;
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

    /** Whether both sides offered protocol v2's WRITE ring (event loop only; false before the handshake). */
    boolean writeRingNegotiated() {
        return conn != null && conn.writeRingNegotiated();
    }

    /** For tests: the connection's resources (event loop only; null before the QP exists). */
    ConnectionResources resources() {
        return conn != null ? conn.resources() : null;
    }

    /** For tests: whether the peer has left (its disconnect came) while this channel is still open (event loop only). */
    boolean peerGone() {
        return conn != null && conn.isPeerGone();
    }

    /** What the channel's device can do (event loop only; null before an address is resolved). */
    org.nettyrdma.verbs.DeviceAttributes deviceAttributes() {
        return id == null || id.device() == null ? null : id.device().attributes();
    }

    /**
     * The connection's protocol state in one line (its lifecycle bits, keep-alive, sends in flight, credits, reads
     * pending), for a report of a connection that seems to hang; "no connection" before one was set up. Call it on the
     * channel's event loop.
     */
    public String describeState() {
        if (!eventLoop().inEventLoop()) {
            throw new IllegalStateException("describeState() runs on the channel's event loop");
        }
        return conn == null ? "no connection" : conn.describe();
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

    /**
     * Not writable once {@code close()} was called, also while the close waits for the completions of sends in flight
     * (the channel is still active then, but every write fails): a handler that writes while the channel is writable
     * stops, as it does on a closed socket.
     */
    @Override
    public boolean isWritable() {
        RdmaConnection c = conn;
        return super.isWritable() && (c == null || !c.isCloseRequested());
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
            shutdownOutput0(promise);
        } else {
            loop.execute(() -> shutdownOutput0(promise));
        }
        return promise;
    }

    private void shutdownOutput0(ChannelPromise promise) {
        if (conn != null && conn.isRemoving()) {
            // a write future's listener shuts the output down while a completion or a post removes bytes: right after
            // it (as close()), or the bytes being removed would be taken along and sent twice
            eventLoop().execute(() -> shutdownOutput0(promise));
            return;
        }
        if (isActive() && conn != null && conn.canCloseGracefully()) {
            // over TCP the flushed bytes are in the socket and go out before the FIN: here the connection takes them
            conn.takeFlushed(unsafe().outboundBuffer());
        }
        shuttingDownOutput = true;
        try {
            ((AbstractUnsafe) unsafe()).shutdownOutput(promise);
        } finally {
            shuttingDownOutput = false;
        }
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
                conn.discardPendingReads(false);
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
    Class<? extends RdmaIoHandle> ioHandleClass() {
        return RdmaSocketUnsafe.class;
    }

    @Override
    protected AbstractUnsafe newUnsafe() {
        return new RdmaSocketUnsafe();
    }

    @Override
    void onRegistered() {
        if (parent() != null && conn == null && isOpen()) {
            // accepted: connect before the pipeline learns it is registered, so that it is active then, as an
            // accepted TCP channel is
            ((RdmaSocketUnsafe) unsafe()).accept();
        }
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
        PendingConnect c = connecting;
        if (c != null) {
            connecting = null;
            c.end();
            c.promise.tryFailure(new ClosedChannelException());
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
        if (conn != null && was == ACTIVE && config.getSoLinger() != 0 && !conn.isFailed() && !conn.isPeerGone()) {
            conn.closeGracefully();
        } else {
            u.abort();
        }
    }

    /** What waited while the channel was deregistered: reads asked for (or auto-read), a FIN with nothing before it. */
    @Override
    void registeredAgain() {
        RdmaSocketUnsafe u = (RdmaSocketUnsafe) unsafe();
        if (conn == null || !isOpen() || !isRegistered()) {
            return;
        }
        if (conn.hasPendingReads() && (u.readPending || config.isAutoRead())) {
            u.scheduleRead();
        } else if (conn.finAtHead()) {
            conn.onFinReached();
        }
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
    protected Object filterOutboundMessage(Object msg) throws ClosedChannelException {
        if (conn != null && conn.isCloseRequested()) {
            throw new ClosedChannelException(); // close() was called: it waits for sends in flight, takes no more
        }
        if (msg instanceof ByteBuf || msg instanceof FileRegion) {
            return msg;
        }
        throw new UnsupportedOperationException("unsupported message type: " + msg.getClass().getName()
                + " (RDMA channels write ByteBufs and FileRegions)");
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
        if (conn == null) {
            return;
        }
        if (!shuttingDownOutput && conn.hasUnsettledSends()) {
            // not our shutdownOutput(), which took the flushed writes along: Netty's own, after a write error that was
            // no IOException (or with AUTO_CLOSE off), which releases every flushed buffer next, also those of
            // zero-copy SENDs the device may still read. Their QP goes first: the connection resets, and the channel
            // closes as after any failure
            logger.debug("{}: the output shut down after a write error with sends in flight; resetting", this);
            conn.markFailed();
            RdmaSocketUnsafe u = (RdmaSocketUnsafe) unsafe();
            u.abort();
            eventLoop().execute(() -> u.close(u.voidPromise()));
            return;
        }
        conn.endOutput();
    }

    /** Whether a connect is under way (or an accepted channel waits for its registration). */
    boolean isConnecting() {
        return state == CONNECTING;
    }

    final class RdmaSocketUnsafe extends AbstractUnsafe implements RdmaIoHandle {
        boolean readPending;
        /**
         * The connection's QP and CM id are being destroyed on a teardown thread ({@link #destroy}): completions and
         * events of them are dropped until the registration ends.
         */
        private boolean tearingDown;
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
            if (connecting != null) {
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
            PendingConnect c = new PendingConnect(promise, r, (InetSocketAddress) localAddress);
            try {
                if (localAddress != null) {
                    doBind(localAddress);
                }
                connecting = c;
                state = CONNECTING;
                id.resolveAddress((InetSocketAddress) localAddress, r, RESOLVE_TIMEOUT_MS);
            } catch (Throwable t) {
                connecting = null;
                state = isOpen() ? OPEN : CLOSED;
                promise.tryFailure(annotateConnectException(PendingConnect.asConnectException(t), r));
                closeIfClosed();
                return;
            }
            int timeoutMillis = config.getConnectTimeoutMillis();
            c.scheduleTimeout(eventLoop(), timeoutMillis, () -> {
                if (connecting == c && !c.promise.isDone()) {
                    failConnect(new ConnectTimeoutException("connection timed out after " + timeoutMillis + " ms: "
                            + r));
                }
            });
            promise.addListener(f -> {
                if (f.isCancelled() && connecting == c) {
                    connecting = null;
                    c.end();
                    close(voidPromise());
                }
            });
        }

        private void failConnect(Throwable cause) {
            PendingConnect c = connecting;
            connecting = null;
            if (c != null) {
                c.end();
                c.promise.tryFailure(cause instanceof ConnectTimeoutException ? cause
                        : annotateConnectException(cause, c.remote));
            }
            close(voidPromise());
        }

        /**
         * An accepted channel, now registered on its own loop: set up the connection and accept it. The QP is ready to
         * send once {@code rdma_accept} returns, so the channel is active from here (ESTABLISHED only confirms it).
         */
        void accept() {
            try {
                conn = new RdmaConnection(RdmaSocketChannel.this, id, handler, registration.id, peer);
                id.accept(conn.parameters(id));
                state = ACTIVE;
                established = true;
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
            if (tearingDown) {
                return; // of the id being destroyed (a DISCONNECTED, say): nothing of the connection is left to tell
            }
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
                case CONNECT_ERROR:
                    boolean iwarp = conn != null && conn.resources().iwarp;
                    if (connecting != null && connecting.retryOnFreshId(event, iwarp)) {
                        connectOnFreshId(event);
                        break;
                    }
                    // fall through
                case REJECTED:
                case UNREACHABLE:
                case ADDR_ERROR:
                case ROUTE_ERROR:
                    failConnect(PendingConnect.failure(event, connecting != null ? connecting.remote : remote));
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

        /**
         * iWARP: the local port RDMA CM picked for this connect is held by a TCP socket (one in TIME_WAIT of an earlier
         * connection, or a listener), or the MPA exchange broke ({@link PendingConnect#retryOnFreshId}). The connect
         * starts over on a fresh CM id, which picks another port; the promise and its time-out stay.
         */
        private void connectOnFreshId(CmEvent event) {
            PendingConnect c = connecting;
            logger.debug("{}: connecting to {} failed ({} {}); connecting again from another local port",
                    RdmaSocketChannel.this, c.remote, event.type(), Errno.describe(event.status()));
            try {
                if (conn != null) {
                    conn.destroy(); // never connected: nothing to disconnect
                    conn = null;
                }
                replaceId();
                id.resolveAddress(c.local, c.remote, RESOLVE_TIMEOUT_MS);
            } catch (Throwable t) {
                failConnect(PendingConnect.asConnectException(t));
            }
        }

        private void onAddressResolved() {
            if (connecting == null) {
                return;
            }
            try {
                id.resolveRoute(RESOLVE_TIMEOUT_MS);
            } catch (Throwable t) {
                failConnect(PendingConnect.asConnectException(t));
            }
        }

        private void onRouteResolved() {
            if (connecting == null) {
                return;
            }
            try {
                conn = new RdmaConnection(RdmaSocketChannel.this, id, handler, registration.id, null);
                id.connect(conn.parameters(id));
            } catch (Throwable t) {
                failConnect(PendingConnect.asConnectException(t));
            }
        }

        private void onEstablished(CmEvent event) {
            if (parent() != null) {
                if (conn != null) {
                    conn.peerEstablished(); // active since its accept; now it may send without the greeting
                }
                return;
            }
            PendingConnect c = connecting;
            if (conn == null || state != CONNECTING || c == null) {
                return; // the connect ended before (closed, failed or timed out)
            }
            try {
                conn.peerReady(Handshake.parse(event.privateData(), event.privateDataLength()));
            } catch (Throwable t) {
                failConnect(t instanceof RdmaProtocolException ? new ConnectException(t.getMessage()) : t);
                return;
            }
            connecting = null;
            c.end();
            local = id.localAddress();
            remote = id.remoteAddress();
            state = ACTIVE;
            established = true;
            conn.greet();
            // as epoll does: channelActive even if a listener of the promise closes the channel (inactive follows)
            boolean promiseSet = c.promise.trySuccess();
            pipeline().fireChannelActive();
            if (!promiseSet) {
                close(voidPromise());
            } else {
                onBatchComplete(); // data that beat ESTABLISHED
            }
        }

        void onDisconnected() {
            if (conn == null) {
                destroy();
                return;
            }
            boolean heardFirst = !conn.isPeerGone();
            conn.markPeerGone();
            if (conn.isClosing() || !isOpen()) {
                destroy();
                return;
            }
            if (state == CONNECTING) {
                failConnect(new ConnectException("the peer disconnected during connection set-up"));
                return;
            }
            if (!conn.finReceived()) {
                conn.markFailed(); // a reset: writes fail from now on
            }
            if (heardFirst) {
                disconnectFromGonePeer();
            }
            afterPeerLeft();
        }

        /**
         * The peer left and this channel stays open to deliver what it sent: this side disconnects too, now, as RDMA CM
         * means both sides to. Its QP goes to error, so what is still in flight to the gone peer is flushed
         * ({@code WR_FLUSH_ERR}: those writes fail, and the channel stays open for its reads) instead of retransmitted
         * to nobody until {@code RETRY_EXC_ERR} (IB and RoCE leave the QP in RTS at the peer's disconnect request, and
         * SoftRoCE retries for ever), nothing of this side's stays remotely accessible through it, and on IB/RoCE the
         * peer's disconnect request is answered at once: the peer's DISCONNECTED, and with it the release of its QP and
         * memory, does not wait for this pipeline's reads.
         */
        private void disconnectFromGonePeer() {
            try {
                id.disconnect();
                return;
            } catch (VerbsException e) {
                logger.debug("{}: rdma_disconnect after the peer's disconnect failed", RdmaSocketChannel.this, e);
                if (conn.resources().iwarp) {
                    return; // the stream is down already and its QP in error (siw: the SPI flushed it)
                }
            }
            try {
                conn.resources().qp.moveToError(); // writes in flight wait for their flushes (RdmaConnection.write)
            } catch (VerbsException e) {
                fail(new IOException("the peer left, and neither rdma_disconnect nor moving the queue pair to error "
                        + "worked: the connection ends at once", e));
            }
        }

        /**
         * The peer is gone. What it sent before is delivered first, as a socket delivers the bytes that arrived before a
         * reset (the read loop comes back here once it has read them): then the FIN closes the channel quietly, or the
         * reset is reported and the channel closes. Meanwhile writes fail ({@code RdmaConnection.write}). A message
         * offered by rendezvous and not yet READ can never be read (its bytes are in the gone peer's memory): the
         * channel ends with that.
         */
        void afterPeerLeft() {
            if (!isOpen()) {
                return;
            }
            if (conn.hasPendingData() || conn.finAtHead()) {
                // flushed writes (waiting for credits that will not come, or behind bytes in flight) end now, not when
                // the reads are done: a pipeline that reads only once its write completed would wait for ever
                flush0();
                return;
            }
            if (conn.hasPendingReads()) {
                pipeline().fireExceptionCaught(new IOException("the peer left before the message it offered by "
                        + "rendezvous was read: its bytes are lost"));
            } else if (conn.isFailed()) {
                pipeline().fireExceptionCaught(new IOException("Connection reset by peer"));
            }
            close(voidPromise());
        }

        /** A send failed: like a socket write error, the pending writes fail with it and the channel closes. */
        void writeFailed(IOException cause) {
            conn.markFailed();
            if (isOpen()) {
                handleWriteError(cause);
            } else {
                destroy();
            }
        }

        /**
         * A failure of the connection: the channel reports it and closes (never the loop); before the connect
         * completed, its future fails with the cause (as a refused connect's does) and the pipeline hears nothing.
         */
        @Override
        public void fail(Throwable cause) {
            if (conn != null) {
                conn.markFailed();
            }
            if (connecting != null) {
                failConnect(cause);
            } else if (isOpen()) {
                pipeline().fireExceptionCaught(cause);
                close(voidPromise());
            } else {
                destroy();
            }
        }

        @Override
        public void onCompletion(CompletionArray wc, int index) {
            if (conn != null && !tearingDown) {
                conn.onCompletion(wc.wrId(index), wc.status(index), wc.byteLen(index), wc.opcode(index),
                        wc.immData(index), wc.wcFlags(index));
            }
        }

        @Override
        public void onSharedReceive(CompletionArray wc, int index) {
            if (conn != null && !tearingDown) {
                conn.onSharedReceive(wc.wrId(index), wc.status(index), wc.byteLen(index), wc.opcode(index),
                        wc.immData(index), wc.wcFlags(index));
            } else {
                handler.recycleSharedReceive(wc.wrId(index));
            }
        }

        @Override
        public void onBatchComplete() {
            if (conn != null && !tearingDown) {
                conn.onBatchComplete();
            }
        }

        @Override
        public void tick() {
            if (conn != null) {
                conn.tick();
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
            if (conn == null || !isActive() && !(conn.finReceived() && isOpen())) {
                return;
            }
            if (!readPending && !config.isAutoRead() || conn.isCloseRequested() || !isRegistered()) {
                // (after close() nothing is read, even while the close waits for sends in flight; after deregister()
                // nothing until the channel is registered again, which begins a read)
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
            if (conn != null && conn.finAtHead() && isOpen()) {
                conn.onFinReached();
            } else if (conn != null && conn.hasPendingData() && (readPending || config.isAutoRead())) {
                scheduleRead();
            } else if (conn != null && conn.isPeerGone()) {
                afterPeerLeft();
            }
        }

        /** Overridden only to be callable from {@link RdmaConnection} (posts what the pipeline flushed). */
        @Override
        protected void flush0() {
            super.flush0();
        }

        @Override
        protected void close(ChannelPromise promise, Throwable cause, ClosedChannelException closeCause) {
            if (conn != null && conn.isRemoving()) {
                // a write future's listener closes while a completion removes bytes: close right after it
                eventLoop().execute(() -> close(promise, cause, closeCause));
                return;
            }
            if (isOpen() && isActive() && conn != null && conn.canCloseGracefully() && config.getSoLinger() != 0) {
                // nothing more is read: what arrived is dropped and its credits are owed back (the FIN carries them)
                conn.discardPendingReads(true);
                if (conn.deferCloseWhileSending()) {
                    conn.maybeReturnCredits(); // the FIN is not next yet: the peer may need them to read on
                    // sends in flight still read the writes' buffers: their completions settle those writes (the
                    // futures succeed, the buffers are released), then the close goes on (RdmaConnection)
                    closeFuture().addListener(f -> promise.trySuccess());
                    return;
                }
                conn.takeFlushed(outboundBuffer()); // once: a second close finds the channel closed
            }
            super.close(promise, cause, closeCause);
        }

        /** Abortive close: disconnect now, without FIN; the peer sees a reset. */
        void abort() {
            if (conn != null && !conn.isDestroyed() && id != null && !conn.isPeerGone() && established) {
                try {
                    conn.markClosing();
                    id.disconnect();
                    if (!conn.isFailed() && !conn.hasUnsettledSends()) {
                        return; // DISCONNECTED destroys
                    }
                    // a failed connection's peer may never answer (gone, unreachable: the CM then retries its
                    // disconnect request for a minute on RoCE): the QP, its memory and the id go now, and the peer,
                    // if it is there, has the disconnect request already. So do they with sends in flight: Netty
                    // releases their writes' buffers right after this, and a disconnected QP may still read them
                    // (on iWARP rdma_disconnect only drains it); only a destroyed one surely does not
                } catch (VerbsException e) {
                    logger.debug("rdma_disconnect failed", e);
                }
            }
            destroy();
        }

        /**
         * Releases every verbs resource of the channel; once done, no completion or event can name it. The QP and the
         * CM id are destroyed on a teardown thread ({@link RdmaIoHandler#tearDown}: the kernel may take long); the
         * connection's memory and the registration go on this loop after them, within this call if they were quick.
         */
        void destroy() {
            RdmaConnection c = conn;
            if (c == null || !c.beginDestroy()) {
                if (!tearingDown) {
                    releaseIdAndRegistration(); // no connection, or it is destroyed already: the id (if any) goes now
                }
                return;
            }
            CmId detached = detachId();
            tearingDown = true;
            handler.tearDown(() -> {
                try {
                    return c.resources().closeQp();
                } finally {
                    if (detached != null) {
                        try {
                            detached.close(); // rdma_disconnect if connected, rdma_destroy_id
                        } catch (VerbsException e) {
                            logger.debug("rdma_destroy_id failed", e);
                        }
                    }
                }
            }, qpGone -> {
                c.finishDestroy(qpGone);
                tearingDown = false;
                releaseIdAndRegistration(); // the id went with the teardown: this ends the registration
            });
        }

        @Override
        public void close() {
            // the event loop shuts down: tear down at once (failed first, so the close waits for nothing)
            if (conn != null) {
                conn.markFailed();
            }
            if (isOpen()) {
                close(voidPromise());
            }
            destroy();
        }
    }
}
