package org.nettyrdma.benchmarks.perf;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.IoHandler;
import io.netty.channel.IoHandlerFactory;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.ServerChannel;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.epoll.EpollSocketChannel;
import io.netty.channel.local.LocalAddress;
import io.netty.channel.local.LocalChannel;
import io.netty.channel.local.LocalIoHandler;
import io.netty.channel.local.LocalServerChannel;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import org.nettyrdma.channel.Rdma;
import org.nettyrdma.channel.RdmaChannelOption;
import org.nettyrdma.channel.RdmaIoHandler;
import org.nettyrdma.channel.RdmaIoHandlerConfig;
import org.nettyrdma.channel.RdmaServerSocketChannel;
import org.nettyrdma.channel.RdmaSocketChannel;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.net.UnknownHostException;
import java.util.Locale;

/**
 * What differs between the transports the tool compares: the event loops' {@link IoHandlerFactory}, the two channel
 * classes and the kind of address. Everything else (bootstraps, handlers, options) is the same for all.
 */
final class PerfTransport {
    static final String RDMA = "rdma";
    static final String EPOLL = "epoll";
    static final String NIO = "nio";
    static final String LOCAL = "local";

    private final String name;
    private final IoHandlerFactory factory;
    private final Class<? extends ServerChannel> serverChannelClass;
    private final Class<? extends Channel> channelClass;
    private volatile String rdmaProvider;

    private PerfTransport(String name, IoHandlerFactory factory, Class<? extends ServerChannel> serverChannelClass,
                          Class<? extends Channel> channelClass) {
        this.name = name;
        this.factory = factory;
        this.serverChannelClass = serverChannelClass;
        this.channelClass = channelClass;
    }

    /**
     * The transport called {@code name}; for RDMA on {@code provider} (already resolved: native or emulated).
     *
     * @throws IllegalStateException with the reason when the transport can't run here
     */
    static PerfTransport of(String name, String provider) {
        switch (name) {
            case RDMA:
                return new PerfTransport(RDMA, RdmaIoHandler.newFactory(new RdmaIoHandlerConfig().setProvider(provider)),
                        RdmaServerSocketChannel.class, RdmaSocketChannel.class);
            case EPOLL:
                if (!Epoll.isAvailable()) {
                    throw new IllegalStateException("epoll unavailable: " + Epoll.unavailabilityCause());
                }
                return new PerfTransport(EPOLL, EpollIoHandler.newFactory(), EpollServerSocketChannel.class,
                        EpollSocketChannel.class);
            case NIO:
                return new PerfTransport(NIO, NioIoHandler.newFactory(), NioServerSocketChannel.class,
                        NioSocketChannel.class);
            case LOCAL:
                return new PerfTransport(LOCAL, LocalIoHandler.newFactory(), LocalServerChannel.class,
                        LocalChannel.class);
            default:
                throw new IllegalArgumentException("unknown transport " + name + " (expected rdma, epoll, nio, local)");
        }
    }

    /**
     * The provider that {@code auto} means on {@code host}: native where native RDMA is available and {@code host} is
     * not a loopback address (RDMA CM routes no loopback over a real device), emulated otherwise.
     */
    static String resolveProvider(String provider, String host) {
        if (!RdmaIoHandlerConfig.PROVIDER_AUTO.equals(provider)) {
            return provider;
        }
        try {
            return Rdma.isAvailable() && !InetAddress.getByName(host).isLoopbackAddress()
                    ? RdmaIoHandlerConfig.PROVIDER_NATIVE : RdmaIoHandlerConfig.PROVIDER_EMULATED;
        } catch (UnknownHostException e) {
            return RdmaIoHandlerConfig.PROVIDER_EMULATED;
        }
    }

    EventLoopGroup newGroup(int threads) {
        if (!RDMA.equals(name)) {
            return new MultiThreadIoEventLoopGroup(threads, factory);
        }
        return new MultiThreadIoEventLoopGroup(threads, executor -> {
            // remembers the provider the handlers run on: a group does not expose its IoHandlers
            IoHandler handler = factory.newHandler(executor);
            rdmaProvider = ((RdmaIoHandler) handler).providerName();
            return handler;
        });
    }

    Class<? extends ServerChannel> serverChannelClass() {
        return serverChannelClass;
    }

    Class<? extends Channel> channelClass() {
        return channelClass;
    }

    /** Where a server of this transport listens: {@code host:port}, or any local address for {@code local}. */
    SocketAddress bindAddress(String host, int port) {
        return LOCAL.equals(name) ? LocalAddress.ANY : new InetSocketAddress(host, port);
    }

    boolean inProcessOnly(String provider) {
        return LOCAL.equals(name) || RDMA.equals(name) && RdmaIoHandlerConfig.PROVIDER_EMULATED.equals(provider);
    }

    /** {@code server} with the child options {@code o} sets for this transport: rdma's receive buffer size. */
    ServerBootstrap childOptions(ServerBootstrap server, PerfOptions o) {
        return RDMA.equals(name) && o.rdmaBufferSize > 0
                ? server.childOption(RdmaChannelOption.RECEIVE_BUFFER_SIZE, o.rdmaBufferSize) : server;
    }

    /** {@code client} with the options {@code o} sets for this transport: rdma's receive buffer size. */
    Bootstrap options(Bootstrap client, PerfOptions o) {
        return RDMA.equals(name) && o.rdmaBufferSize > 0
                ? client.option(RdmaChannelOption.RECEIVE_BUFFER_SIZE, o.rdmaBufferSize) : client;
    }

    String name() {
        return name;
    }

    /** "rdma (emulated)", "rdma (jni)", "epoll"...; RDMA's provider is known once a group was made. */
    String label() {
        String provider = rdmaProvider;
        return provider == null ? name : name + " (" + provider.toLowerCase(Locale.ROOT) + ')';
    }

    @Override
    public String toString() {
        return label();
    }
}
