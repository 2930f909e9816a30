package org.nettyrdma.channel;

import io.netty.bootstrap.Bootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.util.concurrent.Future;
import io.netty.util.concurrent.Promise;
import io.netty.util.internal.logging.InternalLogger;
import io.netty.util.internal.logging.InternalLoggerFactory;

import java.net.ConnectException;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Connects over RDMA where it can and over TCP where it cannot, for applications in clusters where only some hosts
 * have RDMA (the way SMC-R falls back to TCP). Give it two fully configured {@link Bootstrap}s — one of
 * {@link RdmaSocketChannel}s on RDMA event loops, one of epoll or NIO socket channels — with the same handler: the
 * pipeline runs unchanged on whichever connects.
 *
 * <p>{@link #connect} tries RDMA first: where this host has no RDMA (the RDMA bootstrap is null, see
 * {@link #TcpFallback(Bootstrap, Bootstrap)}), or the RDMA connect fails for any reason (the peer has no RDMA
 * listener: "Connection refused"; no RDMA route to it; no answer within the RDMA bootstrap's
 * {@code CONNECT_TIMEOUT_MILLIS}; a local resource limit), it logs why and connects over TCP. Each connect tries
 * RDMA again: set a short {@code CONNECT_TIMEOUT_MILLIS} on the RDMA bootstrap where peers may silently drop RDMA
 * (a host whose NIC has no RDMA answers a RoCE connect with nothing).
 *
 * <p>The server side needs no helper: bind an RDMA {@code ServerBootstrap} (where {@link Rdma#isAvailable()}) and a
 * TCP one with the same child handler. On iWARP the RDMA port is a TCP port of the same host, so the two listeners
 * need different ports; on InfiniBand and RoCE the RDMA CM port space is separate and the same number works.
 * Thread-safe.
 */
public final class TcpFallback {
    private static final InternalLogger logger = InternalLoggerFactory.getInstance(TcpFallback.class);

    private final Bootstrap rdma;
    private final Bootstrap tcp;
    private final WarnLimiter infoLimiter = new WarnLimiter(10, TimeUnit.SECONDS);
    private final AtomicLong rdmaConnects = new AtomicLong();
    private final AtomicLong tcpConnects = new AtomicLong();
    private final String unavailable;
    private volatile String lastFallbackReason;

    /**
     * @param rdma the RDMA bootstrap (group of {@link RdmaIoHandler} loops, {@link RdmaSocketChannel}), or null where
     *             this host has no RDMA (create RDMA loops only where {@link Rdma#isAvailable()}): every connect then
     *             goes over TCP, and the reason logged is {@link Rdma#unavailabilityCause()}
     * @param tcp  the TCP bootstrap (epoll or NIO loops and socket channel), never null
     */
    public TcpFallback(Bootstrap rdma, Bootstrap tcp) {
        this.rdma = rdma;
        this.tcp = Objects.requireNonNull(tcp, "tcp");
        if (rdma == null) {
            Throwable cause = Rdma.unavailabilityCause();
            unavailable = cause != null ? "RDMA is unavailable on this host: " + cause.getMessage()
                    : "no RDMA bootstrap was given";
            logger.info("connections go over TCP: {}", unavailable);
        } else {
            unavailable = null;
        }
    }

    /** As {@link #connect(SocketAddress, SocketAddress)}, with TCP on {@code tcpPort} of the same host. */
    public Future<Channel> connect(InetSocketAddress rdmaAddress, int tcpPort) {
        InetSocketAddress tcpAddress = rdmaAddress.isUnresolved()
                ? InetSocketAddress.createUnresolved(rdmaAddress.getHostString(), tcpPort)
                : new InetSocketAddress(rdmaAddress.getAddress(), tcpPort);
        return connect(rdmaAddress, tcpAddress);
    }

    /**
     * Connects to {@code rdmaAddress} over RDMA, or, if that fails, to {@code tcpAddress} over TCP. The future
     * succeeds with the connected channel (an {@link RdmaSocketChannel} or the TCP bootstrap's channel); it fails
     * with a {@link ConnectException} naming both attempts when neither connects (the TCP failure its cause, the
     * RDMA one suppressed). Cancelling it cancels the attempt under way; a channel that connects after all is closed.
     */
    public Future<Channel> connect(SocketAddress rdmaAddress, SocketAddress tcpAddress) {
        Objects.requireNonNull(rdmaAddress, "rdmaAddress");
        Objects.requireNonNull(tcpAddress, "tcpAddress");
        Promise<Channel> promise = tcp.config().group().next().newPromise();
        if (rdma == null) {
            connectTcp(promise, rdmaAddress, tcpAddress, unavailable, null);
            return promise;
        }
        ChannelFuture attempt = rdma.connect(rdmaAddress);
        cancelWith(promise, attempt);
        attempt.addListener((ChannelFuture f) -> {
            if (f.isSuccess()) {
                rdmaConnects.incrementAndGet();
                deliver(promise, f.channel());
            } else if (!promise.isDone()) {
                connectTcp(promise, rdmaAddress, tcpAddress, "RDMA connect to " + rdmaAddress + " failed: "
                        + f.cause(), f.cause());
            }
        });
        return promise;
    }

    private void connectTcp(Promise<Channel> promise, SocketAddress rdmaAddress, SocketAddress tcpAddress,
                            String reason, Throwable rdmaCause) {
        lastFallbackReason = reason;
        if (infoLimiter.tryWarn()) {
            logger.info("{}; connecting over TCP to {}", reason, tcpAddress);
        } else {
            logger.debug("{}; connecting over TCP to {}", reason, tcpAddress);
        }
        ChannelFuture attempt = tcp.connect(tcpAddress);
        cancelWith(promise, attempt);
        attempt.addListener((ChannelFuture f) -> {
            if (f.isSuccess()) {
                tcpConnects.incrementAndGet();
                deliver(promise, f.channel());
                return;
            }
            ConnectException failure = new ConnectException("cannot connect to " + rdmaAddress + " over RDMA ("
                    + (rdmaCause != null ? rdmaCause.getMessage() : unavailable) + ") nor to " + tcpAddress
                    + " over TCP (" + f.cause().getMessage() + ")");
            failure.initCause(f.cause());
            if (rdmaCause != null) {
                failure.addSuppressed(rdmaCause);
            }
            promise.tryFailure(failure);
        });
    }

    /** Completes {@code promise} with {@code channel}, or closes the channel if the promise was cancelled. */
    private static void deliver(Promise<Channel> promise, Channel channel) {
        if (!promise.trySuccess(channel)) {
            channel.close();
        }
    }

    private static void cancelWith(Promise<Channel> promise, ChannelFuture attempt) {
        promise.addListener(p -> {
            if (p.isCancelled()) {
                attempt.cancel(false);
            }
        });
    }

    /** Connects that went over RDMA. */
    public long rdmaConnects() {
        return rdmaConnects.get();
    }

    /** Connects that went over TCP (fell back). */
    public long tcpConnects() {
        return tcpConnects.get();
    }

    /** Why the last connect that fell back did: RDMA unavailable here, or the RDMA connect's failure; or null. */
    public String lastFallbackReason() {
        return lastFallbackReason;
    }
}
