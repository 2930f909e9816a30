package org.nettyrdma.shuffle;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.IoHandlerFactory;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.epoll.EpollSocketChannel;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.ServerSocketChannel;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.netty.util.concurrent.DefaultThreadFactory;
import org.nettyrdma.channel.RdmaChannelOption;
import org.nettyrdma.channel.RdmaIoHandler;
import org.nettyrdma.channel.RdmaIoHandlerConfig;
import org.nettyrdma.channel.RdmaServerSocketChannel;
import org.nettyrdma.channel.RdmaSocketChannel;

import java.util.function.Supplier;

/**
 * What differs between the transports Spark's shuffle protocol runs on here: the event loops' {@link IoHandlerFactory}
 * and the two channel classes. Spark's own {@code TransportServer} and {@code TransportClientFactory} pick them from
 * {@code IOMode} (NIO or EPOLL only); {@link BlockServer} and {@link BlockClientFactory} take them from here, so the
 * same Spark pipeline runs over RDMA, epoll or NIO.
 */
public final class ShuffleTransport {
    /**
     * Bytes per receive buffer of the RDMA channels, server and client ({@link RdmaChannelOption#RECEIVE_BUFFER_SIZE}:
     * a SEND carries at most the smaller of the two ends' sizes, so both are set): 64 KiB instead of the transport's 16
     * KiB, {@code -Dorg.nettyrdma.shuffle.receiveBufferSize} to change. Blocks of up to 8 MiB fetched by 8 connections
     * of one service loop waited for credits 16 KiB at a time: the 8-fetcher p99 fell from 31-52 ms to 13-20 ms with
     * 64 KiB (docs/shuffle.md, Benchmark).
     */
    static final int RECEIVE_BUFFER_SIZE = Integer.getInteger("org.nettyrdma.shuffle.receiveBufferSize", 64 << 10);

    private final String name;
    private final Supplier<IoHandlerFactory> factory;
    private final Class<? extends ServerSocketChannel> serverChannelClass;
    private final Class<? extends SocketChannel> channelClass;
    private final boolean splitsMessages;

    private ShuffleTransport(String name, Supplier<IoHandlerFactory> factory,
                             Class<? extends ServerSocketChannel> serverChannelClass,
                             Class<? extends SocketChannel> channelClass, boolean splitsMessages) {
        this.name = name;
        this.factory = factory;
        this.serverChannelClass = serverChannelClass;
        this.channelClass = channelClass;
        this.splitsMessages = splitsMessages;
    }

    /**
     * RDMA with {@code config} (its provider: emulated, native or auto); its pipelines split Spark's
     * {@code MessageWithHeader}s ({@link MessageWithHeaderSplitter}) unless {@code
     * -Dorg.nettyrdma.shuffle.splitMessageWithHeader=false}.
     */
    public static ShuffleTransport rdma(RdmaIoHandlerConfig config) {
        return new ShuffleTransport("rdma (" + config.getProvider() + ")", () -> RdmaIoHandler.newFactory(config),
                RdmaServerSocketChannel.class, RdmaSocketChannel.class, MessageWithHeaderSplitter.enabledByDefault());
    }

    public static ShuffleTransport nio() {
        return new ShuffleTransport("nio", NioIoHandler::newFactory, NioServerSocketChannel.class,
                NioSocketChannel.class, false);
    }

    /** Netty's epoll transport; only where {@link Epoll#isAvailable()}. */
    public static ShuffleTransport epoll() {
        Epoll.ensureAvailability();
        return new ShuffleTransport("epoll", EpollIoHandler::newFactory, EpollServerSocketChannel.class,
                EpollSocketChannel.class, false);
    }

    /**
     * This transport with {@link MessageWithHeaderSplitter} in its pipelines ({@code split}) or not; by default RDMA
     * has it and epoll and NIO do not (they keep Spark's own path).
     */
    public ShuffleTransport splittingMessages(boolean split) {
        return new ShuffleTransport(name, factory, serverChannelClass, channelClass, split);
    }

    /** Whether {@link #completePipeline} adds the {@link MessageWithHeaderSplitter}. */
    public boolean splitsMessages() {
        return splitsMessages;
    }

    /**
     * What this transport puts under the pipeline of Spark's {@code initializePipeline} on {@code channel}: the
     * {@link MessageWithHeaderSplitter} when it {@link #splitsMessages()}. Called right after it, in the channel's
     * initializer.
     */
    public void completePipeline(Channel channel) {
        if (splitsMessages) {
            MessageWithHeaderSplitter.addTo(channel.pipeline());
        }
    }

    /** {@code rdma-emulated}, {@code rdma-native}, {@code epoll} or {@code nio}, as the command lines name them. */
    public static ShuffleTransport byName(String name) {
        switch (name) {
            case "rdma-emulated":
                return rdma(new RdmaIoHandlerConfig().setProvider(RdmaIoHandlerConfig.PROVIDER_EMULATED));
            case "rdma-native":
                return rdma(new RdmaIoHandlerConfig().setProvider(RdmaIoHandlerConfig.PROVIDER_NATIVE));
            case "epoll":
                return epoll();
            case "nio":
                return nio();
            default:
                throw new IllegalArgumentException("transport " + name
                        + " (expected rdma-emulated, rdma-native, epoll or nio)");
        }
    }

    public boolean isRdma() {
        return channelClass == RdmaSocketChannel.class;
    }

    /** Event loops of this transport, daemon threads named {@code name-N}. */
    public EventLoopGroup newGroup(int threads, String threadName) {
        return new MultiThreadIoEventLoopGroup(threads, new DefaultThreadFactory(threadName, true), factory.get());
    }

    public ServerBootstrap serverBootstrap(EventLoopGroup parent, EventLoopGroup children) {
        ServerBootstrap b = new ServerBootstrap().group(parent, children).channel(serverChannelClass);
        return isRdma() ? b.childOption(RdmaChannelOption.RECEIVE_BUFFER_SIZE, RECEIVE_BUFFER_SIZE) : b;
    }

    public Bootstrap bootstrap(EventLoopGroup group) {
        Bootstrap b = new Bootstrap().group(group).channel(channelClass);
        return isRdma() ? b.option(RdmaChannelOption.RECEIVE_BUFFER_SIZE, RECEIVE_BUFFER_SIZE) : b;
    }

    public String name() {
        return name;
    }

    @Override
    public String toString() {
        return name;
    }
}
