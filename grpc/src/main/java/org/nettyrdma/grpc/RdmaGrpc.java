package org.nettyrdma.grpc;

import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.util.concurrent.DefaultThreadFactory;
import org.nettyrdma.channel.RdmaByteBufAllocator;
import org.nettyrdma.channel.RdmaChannelOption;
import org.nettyrdma.channel.RdmaIoHandler;
import org.nettyrdma.channel.RdmaIoHandlerConfig;
import org.nettyrdma.channel.RdmaServerSocketChannel;
import org.nettyrdma.channel.RdmaSocketChannel;

import java.util.Objects;

/**
 * Configures grpc-netty's builders for the RDMA transport: the RDMA channel classes, event loops whose
 * {@link RdmaIoHandler} runs them, the registered allocator (gRPC's messages and HTTP/2 frame headers are then
 * written into registered memory, and the transport sends gRPC's messages from it without a copy; grpc-netty sets its
 * own pooled allocator otherwise), receive buffers that take a whole HTTP/2 DATA frame with its header, and an on-ready
 * threshold of {@link #ON_READY_THRESHOLD} on every call. gRPC's own flow-control window (1 MiB, tuned by the client
 * to the measured bandwidth-delay product) is left as it is: a larger one measured no better (docs/grpc.md has the
 * measurements behind each choice).
 *
 * <pre>{@code
 * EventLoopGroup group = RdmaGrpc.newEventLoopGroup(2); // or (2, RdmaGrpc.newIoHandlerConfig().setProvider(...))
 * Server server = RdmaGrpc.configure(NettyServerBuilder.forAddress(address), group).addService(service).build();
 * ManagedChannel channel = RdmaGrpc.configure(NettyChannelBuilder.forAddress(address), group).usePlaintext().build();
 * }</pre>
 *
 * The caller owns the event loop group: gRPC does not shut down groups it was given, so shut it down after the
 * servers and channels that use it have terminated.
 */
public final class RdmaGrpc {
    /**
     * Bytes per receive buffer (the largest SEND the peer makes): an HTTP/2 DATA frame of gRPC's 16 KiB maximum
     * frame size, its 9-byte frame header and the transport's 4-byte header, rounded up to the allocator's size class
     * above. With the transport's default of 16 KiB every full DATA frame took two SENDs.
     */
    public static final int RECEIVE_BUFFER_SIZE = 32 << 10;
    /** Receive buffers per connection: the peer's credits; with {@link #RECEIVE_BUFFER_SIZE}, 1 MiB per connection. */
    public static final int RECEIVE_BUFFER_COUNT = 32;
    /**
     * The on-ready threshold of every call (gRPC's default: 32 KiB): gRPC counts a message as queued until the
     * channel's write of it completes. Over TCP that is when the socket took the bytes; over RDMA a message sent from
     * registered memory without a copy completes when its SENDs did, and bytes waiting for the peer's credits are not
     * sent yet. With 32 KiB a stream of 64 KiB messages had one message in flight; with 256 KiB it has four (a quarter
     * of the peer's receive buffers), while a message of 256 KiB or more still goes one at a time (1 MiB measured
     * worse for 1 MiB messages: docs/grpc.md). A handler or a call can still set its own ({@link OnReadyThresholds}).
     */
    public static final int ON_READY_THRESHOLD = 256 << 10;

    private RdmaGrpc() {
    }

    /** The system property that, when set, decides the busy-poll back-off instead of {@link #newIoHandlerConfig}. */
    static final String BUSY_POLL_BACK_OFF_PROPERTY = "org.nettyrdma.busyPollBackOff";

    /**
     * The event-loop configuration for gRPC: {@link RdmaIoHandlerConfig}'s defaults (its system properties included)
     * with the busy-poll back-off on, unless {@code -Dorg.nettyrdma.busyPollBackOff} says otherwise. Every hand-off
     * of a gRPC call goes through a thread that is not an event loop (gRPC's executor on the server, the caller on
     * the client), so a loop's reply rarely comes within its spin: spinning before every wait only took CPU from
     * those threads (docs/grpc.md "Busy-polling for gRPC"); a loop that keeps finding work while it spins (a stream)
     * keeps spinning.
     */
    public static RdmaIoHandlerConfig newIoHandlerConfig() {
        RdmaIoHandlerConfig config = new RdmaIoHandlerConfig();
        if (System.getProperty(BUSY_POLL_BACK_OFF_PROPERTY) == null) {
            config.setBusyPollBackOff(true);
        }
        return config;
    }

    /** {@code threads} RDMA event loops configured by {@link #newIoHandlerConfig()}. */
    public static EventLoopGroup newEventLoopGroup(int threads) {
        return newEventLoopGroup(threads, newIoHandlerConfig());
    }

    /**
     * A group of {@code threads} RDMA event loops (daemon threads named {@code netty-rdma-grpc-*}) with
     * {@code config}: what {@link #configure} gives the builders. Start from {@link #newIoHandlerConfig()}.
     */
    public static EventLoopGroup newEventLoopGroup(int threads, RdmaIoHandlerConfig config) {
        return new MultiThreadIoEventLoopGroup(threads, new DefaultThreadFactory("netty-rdma-grpc", true),
                RdmaIoHandler.newFactory(config));
    }

    /**
     * A server on RDMA: {@link RdmaServerSocketChannel}, {@code group} for accepting and for the connections, the
     * registered allocator, the receive buffers and the on-ready threshold above. Returns {@code builder}.
     */
    public static NettyServerBuilder configure(NettyServerBuilder builder, EventLoopGroup group) {
        return configure(builder, group, ON_READY_THRESHOLD);
    }

    /** {@link #configure(NettyServerBuilder, EventLoopGroup)} with {@code onReadyThreshold} as the threshold. */
    public static NettyServerBuilder configure(NettyServerBuilder builder, EventLoopGroup group, int onReadyThreshold) {
        Objects.requireNonNull(group, "group");
        return builder.intercept(OnReadyThresholds.server(onReadyThreshold))
                .channelType(RdmaServerSocketChannel.class)
                .bossEventLoopGroup(group)
                .workerEventLoopGroup(group)
                .withOption(ChannelOption.ALLOCATOR, RdmaByteBufAllocator.DEFAULT)
                .withChildOption(ChannelOption.ALLOCATOR, RdmaByteBufAllocator.DEFAULT)
                .withChildOption(RdmaChannelOption.RECEIVE_BUFFER_SIZE, RECEIVE_BUFFER_SIZE)
                .withChildOption(RdmaChannelOption.RECEIVE_BUFFER_COUNT, RECEIVE_BUFFER_COUNT);
    }

    /**
     * A channel on RDMA: {@link RdmaSocketChannel} on {@code group}, the registered allocator, the receive buffers and
     * the on-ready threshold above. Returns {@code builder}; plaintext or TLS is still the caller's choice.
     */
    public static NettyChannelBuilder configure(NettyChannelBuilder builder, EventLoopGroup group) {
        return configure(builder, group, ON_READY_THRESHOLD);
    }

    /** {@link #configure(NettyChannelBuilder, EventLoopGroup)} with {@code onReadyThreshold} as the threshold. */
    public static NettyChannelBuilder configure(NettyChannelBuilder builder, EventLoopGroup group,
                                                int onReadyThreshold) {
        Objects.requireNonNull(group, "group");
        return builder.intercept(OnReadyThresholds.client(onReadyThreshold))
                .channelType(RdmaSocketChannel.class)
                .eventLoopGroup(group)
                .withOption(ChannelOption.ALLOCATOR, RdmaByteBufAllocator.DEFAULT)
                .withOption(RdmaChannelOption.RECEIVE_BUFFER_SIZE, RECEIVE_BUFFER_SIZE)
                .withOption(RdmaChannelOption.RECEIVE_BUFFER_COUNT, RECEIVE_BUFFER_COUNT);
    }
}
