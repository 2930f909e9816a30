package org.nettyrdma.tools.doctor;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.util.ReferenceCountUtil;
import io.netty.util.concurrent.Promise;
import org.nettyrdma.channel.RdmaByteBufAllocator;
import org.nettyrdma.channel.RdmaChannelOption;
import org.nettyrdma.channel.RdmaIoHandler;
import org.nettyrdma.channel.RdmaIoHandlerConfig;
import org.nettyrdma.channel.RdmaServerSocketChannel;
import org.nettyrdma.channel.RdmaSocketChannel;

import java.net.InetSocketAddress;
import java.util.concurrent.TimeUnit;

/**
 * What one connection registers with a given receive buffer size and count, measured rather than computed: the
 * transport connects a client to an echo server on the emulated provider (in this JVM, no device), echoes one byte,
 * and reads the client channel's {@code registeredBytes()} counter once its SEND completed (its receive buffers: an
 * idle connection holds no send staging). The size of the pool regions the receive buffers are carved from is read
 * from a fresh {@link RdmaByteBufAllocator}: a process pins whole regions. The send staging a busy connection takes
 * from its event loop's pool is computed: a slot of the message size per SEND in flight, at most as many as its send
 * queue holds ({@code count + 4}).
 *
 * @param perConnectionBytes registered bytes of one idle connection once it is up
 * @param regionBytes        the pool region that holds receive buffers of this size
 * @param stagingBytes       send staging one connection's SENDs in flight hold at most
 */
public record ConnectionMemory(long perConnectionBytes, long regionBytes, long stagingBytes) {
    private static final long TIMEOUT_SECONDS = 20;

    /** Measures it with receive buffers of {@code receiveBufferSize} bytes, {@code receiveBufferCount} of them. */
    public static ConnectionMemory measure(int receiveBufferSize, int receiveBufferCount) throws Exception {
        return new ConnectionMemory(registeredByOneConnection(receiveBufferSize, receiveBufferCount),
                regionOf(receiveBufferSize), (long) (receiveBufferCount + 4) * receiveBufferSize);
    }

    private static long regionOf(int bufferSize) {
        RdmaByteBufAllocator fresh = new RdmaByteBufAllocator();
        ByteBuf buf = fresh.directBuffer(bufferSize, bufferSize);
        try {
            return fresh.regionBytes();
        } finally {
            buf.release();
        }
    }

    private static long registeredByOneConnection(int size, int count) throws Exception {
        // the per-connection model of docs/deployment.md: receives of its own (pooled credits' windows, which follow
        // the traffic, are not estimated: the figure is the most a connection registers)
        RdmaIoHandlerConfig config = new RdmaIoHandlerConfig().setProvider(RdmaIoHandlerConfig.PROVIDER_EMULATED)
                .setBusyPollNanos(0).setSharedReceiveQueue(false);
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory(config));
        try {
            Promise<Channel> accepted = group.next().newPromise();
            Channel server = new ServerBootstrap().group(group).channel(RdmaServerSocketChannel.class)
                    .childOption(RdmaChannelOption.RECEIVE_BUFFER_SIZE, size)
                    .childOption(RdmaChannelOption.RECEIVE_BUFFER_COUNT, count)
                    .childHandler(new ChannelInboundHandlerAdapter() {
                        @Override
                        public void channelActive(ChannelHandlerContext ctx) {
                            accepted.trySuccess(ctx.channel());
                            ctx.fireChannelActive();
                        }

                        @Override
                        public void channelRead(ChannelHandlerContext ctx, Object msg) {
                            ctx.writeAndFlush(msg);
                        }
                    })
                    .bind(new InetSocketAddress("127.0.0.1", 0)).sync().channel();
            try {
                Promise<Void> echoed = group.next().newPromise();
                RdmaSocketChannel client = (RdmaSocketChannel) new Bootstrap().group(group)
                        .channel(RdmaSocketChannel.class)
                        .option(RdmaChannelOption.RECEIVE_BUFFER_SIZE, size)
                        .option(RdmaChannelOption.RECEIVE_BUFFER_COUNT, count)
                        .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, (int) TimeUnit.SECONDS.toMillis(TIMEOUT_SECONDS))
                        .handler(new ChannelInboundHandlerAdapter() {
                            @Override
                            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                ReferenceCountUtil.release(msg);
                                echoed.trySuccess(null);
                            }
                        })
                        .connect(server.localAddress()).sync().channel();
                try {
                    client.writeAndFlush(Unpooled.wrappedBuffer(new byte[] {1}));
                    if (!echoed.await(TIMEOUT_SECONDS, TimeUnit.SECONDS)) {
                        throw new IllegalStateException("no echo within " + TIMEOUT_SECONDS + " s");
                    }
                    // on the loop: after every event of the connection so far. A slot of the send staging is out until
                    // the SEND's completion, which may come after the echo: idle is once it came
                    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(TIMEOUT_SECONDS);
                    long idle = (long) count * size;
                    long bytes;
                    while ((bytes = client.eventLoop().submit(() -> client.counters().registeredBytes()).get()) > idle
                            && System.nanoTime() - deadline < 0) {
                        Thread.sleep(1);
                    }
                    return bytes;
                } finally {
                    client.close().sync();
                    // the accepted side ends too before the loop goes: nothing of the connection outlives the group
                    if (accepted.await(TIMEOUT_SECONDS, TimeUnit.SECONDS)) {
                        accepted.getNow().close();
                        accepted.getNow().closeFuture().await(TIMEOUT_SECONDS, TimeUnit.SECONDS);
                    }
                }
            } finally {
                server.close().sync();
            }
        } finally {
            group.shutdownGracefully(100, 5000, TimeUnit.MILLISECONDS).sync();
        }
    }
}
