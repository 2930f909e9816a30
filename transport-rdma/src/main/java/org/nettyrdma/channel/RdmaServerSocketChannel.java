package org.nettyrdma.channel;

import io.netty.channel.ChannelMetadata;
import io.netty.channel.ChannelOutboundBuffer;
import io.netty.channel.ChannelPipeline;
import io.netty.channel.ChannelPromise;
import io.netty.channel.RecvByteBufAllocator;
import io.netty.channel.socket.ServerSocketChannel;
import io.netty.util.internal.logging.InternalLogger;
import io.netty.util.internal.logging.InternalLoggerFactory;
import org.nettyrdma.channel.RdmaProtocol.Handshake;
import org.nettyrdma.channel.RdmaProtocol.RdmaProtocolException;
import org.nettyrdma.verbs.CmEvent;
import org.nettyrdma.verbs.CmEventType;
import org.nettyrdma.verbs.CmId;
import org.nettyrdma.verbs.CompletionArray;
import org.nettyrdma.verbs.Errno;
import org.nettyrdma.verbs.VerbsException;

import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.util.ArrayDeque;
import java.util.concurrent.TimeUnit;

/**
 * A listening RDMA CM id: the drop-in for a {@link ServerSocketChannel}. Each connection request becomes an
 * {@link RdmaSocketChannel} read by the pipeline (the {@code ServerBootstrap} registers it on a child loop, where it
 * sets up its queue pair and accepts). Peers that don't speak the protocol are rejected with the reason.
 */
public final class RdmaServerSocketChannel extends AbstractRdmaChannel implements ServerSocketChannel {
    private static final InternalLogger logger = InternalLoggerFactory.getInstance(RdmaServerSocketChannel.class);

    private static final ChannelMetadata METADATA = new ChannelMetadata(false, 16);
    /** Binds again on a fresh CM id after a port in use, at most this many times (iWARP, port 0; see doBind). */
    static final int LISTEN_PORT_IN_USE_RETRIES = 3;
    /**
     * How long a connection handed to the pipeline may stay unregistered before it is refused: ServerBootstrap's
     * acceptor registers it at once, unless the child handler could not be added (a handler instance that is not
     * {@code @Sharable} given to every child) — then nobody ever would, and the peer would wait for its CM's time-out.
     */
    static final long UNREGISTERED_CHILD_MILLIS = 1000;

    private final RdmaServerSocketChannelConfig config = new RdmaServerSocketChannelConfig(this);
    private volatile boolean open = true;
    private volatile boolean active;
    private final ArrayDeque<RdmaSocketChannel> pending = new ArrayDeque<>();
    /** Children the pipeline read without registering them, until {@link #UNREGISTERED_CHILD_MILLIS} decides. */
    private final ArrayDeque<RdmaSocketChannel> unregistered = new ArrayDeque<>();

    public RdmaServerSocketChannel() {
        super(null, null);
    }

    @Override
    public RdmaServerSocketChannelConfig config() {
        return config;
    }

    @Override
    public boolean isOpen() {
        return open;
    }

    @Override
    public boolean isActive() {
        return active;
    }

    @Override
    public InetSocketAddress localAddress() {
        return (InetSocketAddress) super.localAddress();
    }

    @Override
    public InetSocketAddress remoteAddress() {
        return null;
    }

    @Override
    public ChannelMetadata metadata() {
        return METADATA;
    }

    @Override
    protected SocketAddress remoteAddress0() {
        return null;
    }

    @Override
    Class<? extends RdmaIoHandle> ioHandleClass() {
        return RdmaServerUnsafe.class;
    }

    @Override
    protected AbstractUnsafe newUnsafe() {
        return new RdmaServerUnsafe();
    }

    @Override
    protected void doBind(SocketAddress localAddress) throws Exception {
        InetSocketAddress asked = (InetSocketAddress) localAddress;
        for (int retries = 0; ; retries++) {
            id.bind(asked);
            try {
                id.listen(config.getBacklog());
                break;
            } catch (VerbsException e) {
                // iWARP listens on a TCP port as well: the port RDMA CM picked for port 0 may be held by a TCP socket
                // (soft-iWARP, seen in CI; elsewhere RDMA CM picks a free port). A fresh id picks another. A port the
                // application chose stays its error.
                if (e.errno() != Errno.EADDRINUSE || asked.getPort() != 0 || retries == LISTEN_PORT_IN_USE_RETRIES) {
                    throw e;
                }
                logger.debug("{}: the port picked for {} is in use by a TCP socket; binding again", this, asked);
                replaceId();
            }
        }
        local = id.localAddress();
        active = true;
    }

    @Override
    protected void doClose() throws Exception {
        open = false;
        active = false;
        RdmaSocketChannel child;
        while ((child = pending.poll()) != null) {
            child.unsafe().closeForcibly();
        }
        while ((child = unregistered.poll()) != null) {
            if (!registrationStarted(child)) {
                child.unsafe().closeForcibly(); // its check may never run: the loop may be shutting down
            }
        }
        releaseIdAndRegistration();
    }

    @Override
    protected void doDisconnect() {
        throw new UnsupportedOperationException("a server channel does not disconnect");
    }

    @Override
    protected void doWrite(ChannelOutboundBuffer in) {
        throw new UnsupportedOperationException("a server channel does not write");
    }

    @Override
    protected Object filterOutboundMessage(Object msg) {
        throw new UnsupportedOperationException("a server channel does not write");
    }

    /** Connections that waited while the channel was deregistered, if a read was asked for (or auto-read). */
    @Override
    void registeredAgain() {
        RdmaServerUnsafe u = (RdmaServerUnsafe) unsafe();
        if (!pending.isEmpty() && (u.readPending || config.isAutoRead())) {
            u.readLoop();
        }
    }

    @Override
    protected void doBeginRead() {
        RdmaServerUnsafe u = (RdmaServerUnsafe) unsafe();
        u.readPending = true;
        if (!pending.isEmpty()) {
            eventLoop().execute(u::readLoop);
        }
    }

    final class RdmaServerUnsafe extends AbstractUnsafe implements RdmaIoHandle {
        boolean readPending;

        @Override
        public void connect(SocketAddress remoteAddress, SocketAddress localAddress, ChannelPromise promise) {
            promise.setFailure(new UnsupportedOperationException("a server channel does not connect"));
        }

        @Override
        public boolean inEventLoop() {
            return eventLoop().inEventLoop();
        }

        @Override
        public void execute(Runnable task) {
            eventLoop().execute(task);
        }

        @Override
        public void onCompletion(CompletionArray completions, int index) {
            // a listener has no queue pair
        }

        @Override
        public void onBatchComplete() {
        }

        @Override
        public void fail(Throwable cause) {
            if (isOpen()) {
                pipeline().fireExceptionCaught(cause);
                close(voidPromise());
            }
        }

        @Override
        public void onCmEvent(CmEvent event) {
            if (event.type() != CmEventType.CONNECT_REQUEST) {
                return;
            }
            CmId incoming = event.id();
            if (!isActive()) {
                closeQuietly(incoming);
                return;
            }
            Handshake peer;
            try {
                peer = Handshake.parse(event.privateData(), event.privateDataLength());
            } catch (RdmaProtocolException e) {
                reject(incoming, e.reason, e.getMessage());
                return;
            }
            if (pending.size() >= config.getBacklog()) {
                reject(incoming, RdmaProtocol.REJECT_NO_RESOURCES, "backlog of " + config.getBacklog() + " is full");
                return;
            }
            RdmaSocketChannel child = new RdmaSocketChannel(RdmaServerSocketChannel.this, incoming, peer);
            incoming.context(child.unsafe());
            pending.add(child);
            if (readPending || config.isAutoRead()) {
                readLoop();
            }
        }

        private void reject(CmId incoming, int reason, String message) {
            logger.debug("rejecting a connection from {}: {}", incoming.remoteAddress(), message);
            try {
                incoming.reject(RdmaProtocol.reject(reason, message));
            } catch (VerbsException e) {
                logger.debug("reject failed", e);
            }
            closeQuietly(incoming);
        }

        private void closeQuietly(CmId incoming) {
            try {
                incoming.close();
            } catch (VerbsException e) {
                logger.debug("closing an incoming id failed", e);
            }
        }

        void readLoop() {
            if (pending.isEmpty() || !isOpen() || !isRegistered()) {
                return; // (deregistered: the connections wait until the channel is registered again)
            }
            ChannelPipeline pipeline = pipeline();
            RecvByteBufAllocator.Handle allocHandle = recvBufAllocHandle();
            allocHandle.reset(config);
            boolean read = false;
            RdmaSocketChannel child;
            while ((readPending || config.isAutoRead()) && (child = pending.poll()) != null) {
                readPending = false;
                read = true;
                allocHandle.incMessagesRead(1);
                pipeline.fireChannelRead(child);
                if (!registrationStarted(child)) {
                    RdmaSocketChannel taken = child;
                    unregistered.add(taken);
                    eventLoop().schedule(() -> refuseUnregistered(taken), UNREGISTERED_CHILD_MILLIS,
                            TimeUnit.MILLISECONDS);
                }
                if (!allocHandle.continueReading()) {
                    break;
                }
            }
            if (read) {
                allocHandle.readComplete();
                pipeline.fireChannelReadComplete();
            }
            if (!pending.isEmpty() && (readPending || config.isAutoRead())) {
                eventLoop().execute(this::readLoop);
            }
        }

        /** The pipeline took {@code child} and never registered it: the peer is refused, the child's id goes. */
        private void refuseUnregistered(RdmaSocketChannel child) {
            if (unregistered.remove(child) && child.isOpen() && !registrationStarted(child)) {
                logger.warn("{}: the pipeline took the connection from {} but did not register it within {} ms (did "
                        + "adding the child handler fail? a handler instance given to every child must be @Sharable): "
                        + "the connection is refused", RdmaServerSocketChannel.this, child.remoteAddress(),
                        UNREGISTERED_CHILD_MILLIS);
                child.unsafe().closeForcibly();
            }
        }

        @Override
        public void close() {
            if (isOpen()) {
                close(voidPromise());
            }
        }
    }

    /** Whether {@code ch} was given to an event loop (its registration may still be under way). */
    private static boolean registrationStarted(RdmaSocketChannel ch) {
        try {
            ch.eventLoop();
            return true;
        } catch (IllegalStateException notRegistered) {
            return false;
        }
    }
}
