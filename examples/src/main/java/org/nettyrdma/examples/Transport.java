package org.nettyrdma.examples;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.IoHandler;
import io.netty.channel.IoHandlerFactory;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.epoll.EpollSocketChannel;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.ServerSocketChannel;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import org.nettyrdma.channel.Rdma;
import org.nettyrdma.channel.RdmaIoHandler;
import org.nettyrdma.channel.RdmaIoHandlerConfig;
import org.nettyrdma.channel.RdmaServerSocketChannel;
import org.nettyrdma.channel.RdmaSocketChannel;

import java.net.InetAddress;
import java.net.UnknownHostException;

/**
 * What differs between transports — the event loops' {@link IoHandlerFactory} and the two channel classes — so that
 * the examples run the same bootstraps and handlers over RDMA, NIO or epoll.
 */
public final class Transport {
    private final String name;
    private final IoHandlerFactory factory;
    private final Class<? extends ServerSocketChannel> serverChannelClass;
    private final Class<? extends SocketChannel> channelClass;
    private volatile String rdmaProvider;

    private Transport(String name, IoHandlerFactory factory, Class<? extends ServerSocketChannel> serverChannelClass,
                      Class<? extends SocketChannel> channelClass) {
        this.name = name;
        this.factory = factory;
        this.serverChannelClass = serverChannelClass;
        this.channelClass = channelClass;
    }

    /** RDMA on {@code provider}: {@link RdmaIoHandlerConfig#PROVIDER_NATIVE}, {@code _EMULATED} or {@code _AUTO}. */
    public static Transport rdma(String provider) {
        return new Transport("rdma", RdmaIoHandler.newFactory(new RdmaIoHandlerConfig().setProvider(provider)),
                RdmaServerSocketChannel.class, RdmaSocketChannel.class);
    }

    /**
     * RDMA as the command line asks: {@code --emulated} for the in-process provider (server and client in one JVM),
     * else the native one. Exits with the reason when native RDMA is unavailable.
     */
    public static Transport rdma(boolean emulated) {
        if (!emulated && !Rdma.isAvailable()) {
            System.err.println("native RDMA is unavailable: " + Rdma.unavailabilityCause().getMessage());
            System.err.println("(--emulated runs on the in-process emulated provider: server and client in one JVM)");
            System.exit(2);
        }
        return rdma(emulated ? RdmaIoHandlerConfig.PROVIDER_EMULATED : RdmaIoHandlerConfig.PROVIDER_NATIVE);
    }

    /**
     * Whether a server and a client in this JVM can meet over native RDMA on {@code host}: native RDMA is available,
     * and {@code host} is not a loopback address (RDMA CM routes no loopback over a real device: ENODEV). Otherwise
     * they meet on 127.0.0.1 over the emulated provider, whose device owns loopback.
     */
    public static boolean nativeRdmaOn(String host) {
        try {
            return Rdma.isAvailable() && !InetAddress.getByName(host).isLoopbackAddress();
        } catch (UnknownHostException e) {
            return false;
        }
    }

    public static Transport nio() {
        return new Transport("nio", NioIoHandler.newFactory(), NioServerSocketChannel.class, NioSocketChannel.class);
    }

    /** Netty's epoll transport; only where {@code io.netty.channel.epoll.Epoll.isAvailable()}. */
    public static Transport epoll() {
        return new Transport("epoll", EpollIoHandler.newFactory(), EpollServerSocketChannel.class,
                EpollSocketChannel.class);
    }

    public EventLoopGroup newGroup(int threads) {
        if (channelClass != RdmaSocketChannel.class) {
            return new MultiThreadIoEventLoopGroup(threads, factory);
        }
        return new MultiThreadIoEventLoopGroup(threads, executor -> {
            // remembers the provider the handlers picked (PROVIDER_AUTO): a group does not expose its IoHandlers
            IoHandler handler = factory.newHandler(executor);
            rdmaProvider = ((RdmaIoHandler) handler).providerName();
            return handler;
        });
    }

    /** A server bootstrap on {@code group} (acceptor and connections) with this transport's server channel. */
    public ServerBootstrap serverBootstrap(EventLoopGroup group) {
        return new ServerBootstrap().group(group).channel(serverChannelClass);
    }

    public Bootstrap bootstrap(EventLoopGroup group) {
        return new Bootstrap().group(group).channel(channelClass);
    }

    /** "rdma (emulated)", "rdma (jni)", "nio", "epoll"; RDMA's provider is known once a group was made. */
    public String name() {
        String provider = rdmaProvider;
        return provider == null ? name : name + " (" + provider + ')';
    }

    @Override
    public String toString() {
        return name();
    }
}
