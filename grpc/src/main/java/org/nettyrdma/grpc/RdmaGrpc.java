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
 * {@link RdmaIoHandler} runs them, the registered allocator (gRPC's messages, HTTP/2 frames included, are then
 * written from registered memory, which the transport sends without a copy; grpc-netty sets its own pooled allocator
 * otherwise), receive buffers that take a whole HTTP/2 DATA frame with its header, an HTTP/2 flow-control window
 * and an on-ready threshold that keep a stream's messages flowing while SENDs complete (docs/grpc.md has the
 * measurements behind each value).
 *
 * <pre>{@code
 * EventLoopGroup group = RdmaGrpc.newEventLoopGroup(2, new RdmaIoHandlerConfig());
 * Server server = RdmaGrpc.configure(NettyServerBuilder.forAddress(address), group).addService(service).build();
 * ManagedChannel channel = RdmaGrpc.configure(NettyChannelBuilder.forAddress(address), group).usePlaintext().build();
 * }</pre>
 *
 * The caller owns the event loop group: gRPC does not shut down groups it was given, so shut it down after the
 * servers and channels that use it have terminated.
 */
public final class RdmaGrpc {
    /**
     * HTTP/2 flow-control window of each stream and connection, both ways: 4 MiB (gRPC's default is 1 MiB, with
     * BDP-based growth on the client). Over RDMA the round trip that returns window updates is short, but each update
     * is a message of its own; a larger window lets a stream of large messages go on while updates travel.
     */
    public static final int FLOW_CONTROL_WINDOW = 4 << 20;
    /**
     * Bytes per receive buffer (the largest SEND the peer makes): an HTTP/2 DATA frame of gRPC's 16 KiB maximum
     * frame size, its 9-byte frame header and the transport's 4-byte header, rounded up to the allocator's size class
     * above. With the transport's default of 16 KiB every full DATA frame took two SENDs.
     */
    public static final int RECEIVE_BUFFER_SIZE = 32 << 10;
    /**
     * Bytes a call may have queued and still be ready for more (gRPC's default is 32 KiB), set on every call by
     * interceptors ({@link OnReadyThreshold}); a server's handler can still set its own
     * ({@code ServerCallStreamObserver.setOnReadyThreshold}), a client's call too ({@code CallOptions}).
     */
    public static final int ON_READY_THRESHOLD = 1 << 20;
    /** Receive buffers per connection: the peer's credits; with {@link #RECEIVE_BUFFER_SIZE}, 1 MiB per connection. */
    public static final int RECEIVE_BUFFER_COUNT = 32;

    private RdmaGrpc() {
    }

    /**
     * A group of {@code threads} RDMA event loops (daemon threads named {@code netty-rdma-grpc-*}) with
     * {@code config}: what {@link #configure} gives the builders.
     */
    public static EventLoopGroup newEventLoopGroup(int threads, RdmaIoHandlerConfig config) {
        return new MultiThreadIoEventLoopGroup(threads, new DefaultThreadFactory("netty-rdma-grpc", true),
                RdmaIoHandler.newFactory(config));
    }

    /**
     * A server on RDMA: {@link RdmaServerSocketChannel}, {@code group} for accepting and for the connections, the
     * registered allocator, the receive buffers, the flow-control window and the on-ready threshold above (an
     * interceptor: it overrides a threshold that interceptors added later set; a handler's own still wins). Returns
     * {@code builder}.
     */
    public static NettyServerBuilder configure(NettyServerBuilder builder, EventLoopGroup group) {
        Objects.requireNonNull(group, "group");
        return builder.channelType(RdmaServerSocketChannel.class)
                .bossEventLoopGroup(group)
                .workerEventLoopGroup(group)
                .withOption(ChannelOption.ALLOCATOR, RdmaByteBufAllocator.DEFAULT)
                .withChildOption(ChannelOption.ALLOCATOR, RdmaByteBufAllocator.DEFAULT)
                .withChildOption(RdmaChannelOption.RECEIVE_BUFFER_SIZE, RECEIVE_BUFFER_SIZE)
                .withChildOption(RdmaChannelOption.RECEIVE_BUFFER_COUNT, RECEIVE_BUFFER_COUNT)
                .flowControlWindow(FLOW_CONTROL_WINDOW)
                .intercept(OnReadyThreshold.server(ON_READY_THRESHOLD));
    }

    /**
     * A channel on RDMA: {@link RdmaSocketChannel} on {@code group}, the registered allocator, the receive buffers, the
     * flow-control window and the on-ready threshold above (an interceptor). Returns {@code builder}; plaintext or
     * TLS is still the caller's choice.
     */
    public static NettyChannelBuilder configure(NettyChannelBuilder builder, EventLoopGroup group) {
        Objects.requireNonNull(group, "group");
        return builder.channelType(RdmaSocketChannel.class)
                .eventLoopGroup(group)
                .withOption(ChannelOption.ALLOCATOR, RdmaByteBufAllocator.DEFAULT)
                .withOption(RdmaChannelOption.RECEIVE_BUFFER_SIZE, RECEIVE_BUFFER_SIZE)
                .withOption(RdmaChannelOption.RECEIVE_BUFFER_COUNT, RECEIVE_BUFFER_COUNT)
                .flowControlWindow(FLOW_CONTROL_WINDOW)
                .intercept(OnReadyThreshold.client(ON_READY_THRESHOLD));
    }
}
