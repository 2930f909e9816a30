package org.nettyrdma.channel;

import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.WriteBufferWaterMark;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.parallel.Execution;
import org.junit.jupiter.api.parallel.ExecutionMode;
import org.junit.jupiter.api.parallel.Isolated;
import org.nettyrdma.channel.RdmaTestSupport.ExceptionRecorder;
import org.nettyrdma.channel.RdmaTestSupport.Pattern;
import org.nettyrdma.channel.RdmaTestSupport.StreamReader;
import org.nettyrdma.channel.RdmaTestSupport.StreamWriter;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Byte-exact delivery of large streams: random-sized writes of every kind of buffer, with back-pressure, checked byte
 * by byte against their place in the stream and by CRC32C on both ends, and by the exact count. 1 GiB one way and
 * 64 MiB echoed, times {@link RdmaTestSupport#scaledBytes the scale}.
 */
@Isolated("transport-level checks: global allocator counts, throughput, time bounds")
@Execution(ExecutionMode.SAME_THREAD)
class RdmaTransportStreamTest {
    private static final long ONE_GIB = 1L << 30;
    private static final long SIXTY_FOUR_MIB = 64L << 20;
    private static final int MAX_WRITE = 256 << 10;

    private EventLoopGroup serverGroup;
    private EventLoopGroup clientGroup;

    @BeforeEach
    void setUp() {
        serverGroup = RdmaTestSupport.newGroup(1, "stream-server");
        clientGroup = RdmaTestSupport.newGroup(1, "stream-client");
    }

    @AfterEach
    void tearDown() throws InterruptedException {
        RdmaTestSupport.shutdown(clientGroup, serverGroup);
    }

    @Test
    @Timeout(value = 180, unit = TimeUnit.SECONDS)
    void oneGibibyteClientToServerIsDeliveredByteExact() throws Exception {
        long total = RdmaTestSupport.scaledBytes(ONE_GIB, 1);
        Pattern pattern = Pattern.standard();
        StreamReader reader = new StreamReader(total, pattern);
        ExceptionRecorder serverErrors = new ExceptionRecorder();
        AtomicReference<RdmaSocketChannel> child = new AtomicReference<>();
        Channel server = RdmaTestSupport.serverBootstrap(serverGroup, serverGroup)
                .childHandler(new ChannelInitializer<Channel>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        child.set((RdmaSocketChannel) ch);
                        ch.pipeline().addLast(reader, serverErrors);
                    }
                }).bind(RdmaTestSupport.anyPort()).sync().channel();
        StreamWriter writer = new StreamWriter(total, pattern, RdmaTestSupport.mixedPlan(MAX_WRITE), 42);
        long start = System.nanoTime();
        RdmaSocketChannel client = (RdmaSocketChannel) RdmaTestSupport.clientBootstrap(clientGroup)
                .option(ChannelOption.WRITE_BUFFER_WATER_MARK, new WriteBufferWaterMark(512 << 10, 1 << 20))
                .handler(writer)
                .connect(server.localAddress()).sync().channel();
        Supplier<String> state = () -> writer.state() + ", " + reader.state() + ", client " + client.counters()
                + ", pendingWriteBytes=" + RdmaTestSupport.pendingWriteBytes(client)
                + ", server child " + (child.get() == null ? null : child.get().counters())
                + ", serverErrors=" + serverErrors.exceptions;
        try {
            RdmaTestSupport.await(writer.done, 150_000, "all writes succeeded", state);
            long received = RdmaTestSupport.await(reader.done, 150_000, "all bytes received", state);
            double seconds = (System.nanoTime() - start) / 1e9;
            System.out.printf("[RdmaTransportStreamTest] %d MiB client->server in %.2f s: %.1f MiB/s, %d writes, "
                            + "%d reads; client %s%n", total >> 20, seconds, total / seconds / (1 << 20),
                    writer.writes, reader.reads, client.counters());

            assertEquals(total, writer.written, "bytes written");
            assertEquals(total, received, "bytes received");
            assertEquals(writer.crc.getValue(), reader.crc.getValue(), "CRC32C of the stream, sender vs receiver");
            assertEquals(total, client.counters().bytesSent(), "client counters().bytesSent()");
            assertEquals(total, child.get().counters().bytesReceived(), "server child counters().bytesReceived()");
            assertTrue(writer.exceptions.isEmpty(), () -> "client exceptions: " + writer.exceptions);
            assertTrue(reader.exceptions.isEmpty() && serverErrors.exceptions.isEmpty(),
                    () -> "server exceptions: " + reader.exceptions + serverErrors.exceptions);
        } finally {
            client.close().sync();
            server.close().sync();
        }
        // nothing after the last byte
        RdmaTestSupport.awaitCondition("server child closed", () -> !child.get().isOpen(), 15_000, state);
        assertEquals(total, reader.received, "bytes received by the time the connection closed");
        assertTrue(reader.exceptions.isEmpty(), () -> "server exceptions: " + reader.exceptions);
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void sixtyFourMebibytesEchoBothWaysByteExact() throws Exception {
        long echoBytes = RdmaTestSupport.scaledBytes(SIXTY_FOUR_MIB, 1);
        Pattern pattern = Pattern.standard();
        ExceptionRecorder serverErrors = new ExceptionRecorder();
        AtomicReference<RdmaSocketChannel> child = new AtomicReference<>();
        Channel server = RdmaTestSupport.serverBootstrap(serverGroup, serverGroup)
                .childOption(ChannelOption.WRITE_BUFFER_WATER_MARK, new WriteBufferWaterMark(256 << 10, 512 << 10))
                .childHandler(new ChannelInitializer<Channel>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        child.set((RdmaSocketChannel) ch);
                        ch.pipeline().addLast(new BackPressuredEcho(), serverErrors);
                    }
                }).bind(RdmaTestSupport.anyPort()).sync().channel();
        StreamWriter writer = new StreamWriter(echoBytes, pattern, RdmaTestSupport.mixedPlan(MAX_WRITE), 7);
        StreamReader reader = new StreamReader(echoBytes, pattern);
        long start = System.nanoTime();
        RdmaSocketChannel client = (RdmaSocketChannel) RdmaTestSupport.clientBootstrap(clientGroup)
                .option(ChannelOption.WRITE_BUFFER_WATER_MARK, new WriteBufferWaterMark(256 << 10, 512 << 10))
                .handler(new ChannelInitializer<Channel>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        ch.pipeline().addLast(writer, reader);
                    }
                })
                .connect(server.localAddress()).sync().channel();
        Supplier<String> state = () -> writer.state() + ", " + reader.state() + ", client " + client.counters()
                + ", client pendingWriteBytes=" + RdmaTestSupport.pendingWriteBytes(client)
                + ", server child " + (child.get() == null ? null
                : child.get().counters() + ", child pendingWriteBytes=" + RdmaTestSupport.pendingWriteBytes(child.get())
                + ", child autoRead=" + child.get().config().isAutoRead())
                + ", serverErrors=" + serverErrors.exceptions;
        try {
            RdmaTestSupport.await(writer.done, 100_000, "all writes succeeded", state);
            long echoed = RdmaTestSupport.await(reader.done, 100_000, "all bytes echoed back", state);
            double seconds = (System.nanoTime() - start) / 1e9;
            System.out.printf("[RdmaTransportStreamTest] %d MiB echo in %.2f s: %.1f MiB/s each way; client %s, "
                    + "server child %s%n", echoBytes >> 20, seconds, echoBytes / seconds / (1 << 20),
                    client.counters(), child.get().counters());

            assertEquals(echoBytes, echoed, "bytes echoed back");
            assertEquals(writer.crc.getValue(), reader.crc.getValue(), "CRC32C, sent vs echoed back");
            assertEquals(echoBytes, client.counters().bytesSent(), "client bytesSent");
            assertEquals(echoBytes, client.counters().bytesReceived(), "client bytesReceived");
            assertEquals(echoBytes, child.get().counters().bytesSent(), "server child bytesSent");
            assertEquals(echoBytes, child.get().counters().bytesReceived(), "server child bytesReceived");
            assertTrue(writer.exceptions.isEmpty() && reader.exceptions.isEmpty(),
                    () -> "client exceptions: " + writer.exceptions + reader.exceptions);
            assertTrue(serverErrors.exceptions.isEmpty(), () -> "server exceptions: " + serverErrors.exceptions);
        } finally {
            client.close().sync();
            server.close().sync();
        }
    }

    /**
     * Echoes what it reads (the received buffers themselves), and stops reading while its channel is not writable,
     * so that neither side buffers more than its water marks.
     */
    static final class BackPressuredEcho extends ChannelInboundHandlerAdapter {
        final CompletableFuture<Void> failed = new CompletableFuture<>();

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ctx.write(msg).addListener(f -> {
                if (!f.isSuccess()) {
                    failed.completeExceptionally(f.cause());
                }
            });
        }

        @Override
        public void channelReadComplete(ChannelHandlerContext ctx) {
            ctx.flush();
            if (!ctx.channel().isWritable()) {
                ctx.channel().config().setAutoRead(false);
            }
        }

        @Override
        public void channelWritabilityChanged(ChannelHandlerContext ctx) throws Exception {
            if (ctx.channel().isWritable()) {
                ctx.channel().config().setAutoRead(true);
            } else {
                ctx.flush();
            }
            super.channelWritabilityChanged(ctx);
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            ctx.fireExceptionCaught(cause);
        }
    }
}
