package org.nettyrdma.channel;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.AdaptiveRecvByteBufAllocator;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.FixedRecvByteBufAllocator;
import io.netty.channel.RecvByteBufAllocator;
import io.netty.channel.WriteBufferWaterMark;
import io.netty.util.internal.SystemPropertyUtil;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.parallel.Execution;
import org.junit.jupiter.api.parallel.ExecutionMode;
import org.junit.jupiter.api.parallel.Isolated;
import org.nettyrdma.channel.RdmaTestSupport.ExceptionRecorder;
import org.nettyrdma.channel.RdmaTestSupport.Kind;
import org.nettyrdma.channel.RdmaTestSupport.Pattern;
import org.nettyrdma.channel.RdmaTestSupport.StreamReader;

import java.util.List;
import java.util.Queue;
import java.util.Random;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;
import java.util.zip.CRC32C;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * End-to-end back-pressure: a server that does not read grants no credits, so the client sends no more than the
 * server's receive buffers hold, its outbound buffer fills, it turns unwritable, and no memory grows anywhere. When the
 * server reads again, everything arrives intact and the client turns writable again.
 */
@Isolated("transport-level checks: global allocator counts, throughput, time bounds")
@Execution(ExecutionMode.SAME_THREAD)
class RdmaTransportBackpressureTest {
    private static final int RECV_COUNT = 8;
    private static final int RECV_SIZE = 4096;
    private static final int WRITE_SIZE = 4096;
    private static final int EXTRA_WRITES = 16;
    /** What ChannelOutboundBuffer adds to each entry's size in its pending-bytes count. */
    private static final int ENTRY_OVERHEAD =
            SystemPropertyUtil.getInt("io.netty.transport.outboundBufferEntrySizeOverhead", 96);

    private EventLoopGroup serverGroup;
    private EventLoopGroup clientGroup;

    @BeforeEach
    void setUp() {
        serverGroup = RdmaTestSupport.newGroup(1, "bp-server");
        clientGroup = RdmaTestSupport.newGroup(1, "bp-client");
    }

    @AfterEach
    void tearDown() throws InterruptedException {
        RdmaTestSupport.shutdown(clientGroup, serverGroup);
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void nonReadingServerStopsTheWriterAndNothingGrows() throws Exception {
        Pattern pattern = Pattern.standard();
        StreamReader reader = new StreamReader(Long.MAX_VALUE, pattern);
        ExceptionRecorder serverErrors = new ExceptionRecorder();
        AtomicReference<RdmaSocketChannel> childRef = new AtomicReference<>();
        Channel server = RdmaTestSupport.serverBootstrap(serverGroup, serverGroup)
                .childOption(ChannelOption.AUTO_READ, false)
                .childOption(RdmaChannelOption.RECEIVE_BUFFER_COUNT, RECV_COUNT)
                .childOption(RdmaChannelOption.RECEIVE_BUFFER_SIZE, RECV_SIZE)
                .childHandler(new ChannelInitializer<Channel>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        childRef.set((RdmaSocketChannel) ch);
                        ch.pipeline().addLast(reader, serverErrors);
                    }
                }).bind(RdmaTestSupport.anyPort()).sync().channel();

        WritabilityRecorder writability = new WritabilityRecorder();
        RdmaSocketChannel client = (RdmaSocketChannel) RdmaTestSupport.clientBootstrap(clientGroup)
                .option(ChannelOption.WRITE_BUFFER_WATER_MARK, new WriteBufferWaterMark(64 << 10, 128 << 10))
                .handler(writability)
                .connect(server.localAddress()).sync().channel();
        RdmaTestSupport.awaitCondition("server child active",
                () -> childRef.get() != null && childRef.get().isActive(), 10_000, () -> "child " + childRef.get());
        RdmaSocketChannel child = childRef.get();
        RdmaCounters cc = client.counters();
        RdmaCounters sc = child.counters();
        long baselineBuffers = RdmaByteBufAllocator.DEFAULT.buffersInUse();

        CRC32C crc = new CRC32C();
        Random random = new Random(1);
        AtomicLong written = new AtomicLong();
        AtomicInteger writes = new AtomicInteger();
        AtomicInteger succeeded = new AtomicInteger();
        Queue<Throwable> writeFailures = new ConcurrentLinkedQueue<>();
        ChannelFutureListener listener = f -> {
            if (f.isSuccess()) {
                succeeded.incrementAndGet();
            } else {
                writeFailures.add(f.cause());
            }
        };
        Supplier<String> state = () -> "written=" + written + " in " + writes + " writes, succeeded=" + succeeded
                + ", client " + cc + ", client writable=" + client.isWritable() + ", client pendingWriteBytes="
                + RdmaTestSupport.pendingWriteBytes(client) + ", server child " + sc + ", " + reader.state()
                + ", writability events=" + writability.events + ", buffersInUse="
                + RdmaByteBufAllocator.DEFAULT.buffersInUse() + " (baseline " + baselineBuffers + ")"
                + ", writeFailures=" + writeFailures + ", client exceptions=" + writability.exceptions
                + ", server exceptions=" + serverErrors.exceptions + reader.exceptions + ", client "
                + creditsOf(client) + ", server child " + creditsOf(child);

        // 1. the client writes (and flushes) as long as the channel is writable
        int firstPhaseWrites = RdmaTestSupport.onLoop(client, () -> {
            int n = 0;
            while (client.isWritable()) {
                ByteBuf b = RdmaTestSupport.newBuffer(Kind.REGISTERED, pattern, written.get(), WRITE_SIZE, random);
                RdmaTestSupport.crc(crc, b);
                written.addAndGet(WRITE_SIZE);
                writes.incrementAndGet();
                client.writeAndFlush(b).addListener(listener);
                n++;
                if (n > 10_000) {
                    throw new AssertionError("the client never turned unwritable after " + n + " writes; " + state.get());
                }
            }
            return n;
        });
        assertFalse(client.isWritable(), "client writable after filling its outbound buffer");
        assertTrue(firstPhaseWrites * (long) WRITE_SIZE > (long) RECV_COUNT * RECV_SIZE,
                () -> "only " + firstPhaseWrites + " writes before unwritable, fewer than the credits take: "
                        + state.get());

        // what was posted is acknowledged by the server's adapter; nothing more moves once the client has no data credit
        // left and, with pooled credits, the server's first message (the credits it grants beyond the connection's
        // private data come with it: phase 1 may run before)
        RdmaTestSupport.awaitCondition("the sends the credits allowed completed",
                () -> outOfCredits(client) // (first: the counts read after it are at least as new)
                        && sc.bytesReceived() == cc.bytesSent() && succeeded.get() == cc.bytesSent() / WRITE_SIZE,
                10_000, state);
        long sentAtStall = cc.bytesSent();
        long messagesAtStall = cc.messagesSent();
        assertTrue(sentAtStall > 0, () -> "nothing was sent at all: " + state.get());
        assertTrue(sentAtStall < (long) RECV_COUNT * RECV_SIZE,
                () -> "client posted " + sentAtStall + " bytes, beyond the server's " + RECV_COUNT + " x " + RECV_SIZE
                        + " bytes of receive buffers (credits): " + state.get());
        assertTrue(messagesAtStall <= RECV_COUNT,
                () -> "client posted " + messagesAtStall + " messages to " + RECV_COUNT + " receive buffers: "
                        + state.get());
        assertTrue(cc.creditStalls() > 0, () -> "no credit stall counted: " + state.get());
        assertEquals(0, reader.reads, "the server read with autoRead off");
        assertTrue(sc.messagesReceived() <= RECV_COUNT, state.get());
        long pendingBuffers = writes.get() - sentAtStall / WRITE_SIZE;
        // Netty counts whole entries (a partly sent buffer stays whole) plus a fixed overhead per entry
        assertEquals(pendingBuffers * (WRITE_SIZE + ENTRY_OVERHEAD), RdmaTestSupport.pendingWriteBytes(client),
                () -> "outbound buffer is not exactly the " + pendingBuffers + " writes not yet sent: " + state.get());
        long inUse = RdmaByteBufAllocator.DEFAULT.buffersInUse() - baselineBuffers;
        assertTrue(inUse <= pendingBuffers, () -> "registered buffers in use grew to " + inUse + " while the client's "
                + "outbound buffer holds " + pendingBuffers + ": " + state.get());

        // 2. an application that ignores writability: its writes wait in the outbound buffer, nothing else moves
        long stallsBefore = cc.creditStalls();
        long pendingBefore = RdmaTestSupport.pendingWriteBytes(client);
        RdmaTestSupport.onLoop(client, () -> {
            for (int i = 0; i < EXTRA_WRITES; i++) {
                ByteBuf b = RdmaTestSupport.newBuffer(Kind.REGISTERED, pattern, written.get(), WRITE_SIZE, random);
                RdmaTestSupport.crc(crc, b);
                written.addAndGet(WRITE_SIZE);
                writes.incrementAndGet();
                client.writeAndFlush(b).addListener(listener);
            }
            return null;
        });
        for (int i = 0; i < 3; i++) { // let both loops run whatever the writes could have caused
            RdmaTestSupport.onLoop(child, () -> null);
            RdmaTestSupport.onLoop(client, () -> client.flush());
        }
        assertEquals(sentAtStall, cc.bytesSent(), () -> "bytes posted without credits: " + state.get());
        assertEquals(messagesAtStall, cc.messagesSent(), () -> "messages posted without credits: " + state.get());
        assertEquals(sentAtStall, sc.bytesReceived(), () -> "server received more without reading: " + state.get());
        assertTrue(cc.creditStalls() > stallsBefore, () -> "flushes without credits not counted: " + state.get());
        assertEquals(pendingBefore + (long) EXTRA_WRITES * (WRITE_SIZE + ENTRY_OVERHEAD),
                RdmaTestSupport.pendingWriteBytes(client),
                () -> "outbound buffer is not exactly what the client wrote and was not sent: " + state.get());
        long pendingBuffers2 = writes.get() - sentAtStall / WRITE_SIZE;
        long inUse2 = RdmaByteBufAllocator.DEFAULT.buffersInUse() - baselineBuffers;
        assertTrue(inUse2 <= pendingBuffers2, () -> "registered buffers in use grew to " + inUse2
                + " while the client's outbound buffer holds " + pendingBuffers2 + ": " + state.get());
        assertEquals(0, reader.reads, "the server read with autoRead off");
        assertTrue(writeFailures.isEmpty(), state.get());

        // 3. the server reads again: everything arrives intact, the client turns writable
        long total = written.get();
        RdmaTestSupport.onLoop(child, () -> {
            reader.expect(total);
            return null;
        });
        child.config().setAutoRead(true);
        long received = RdmaTestSupport.await(reader.done, 20_000, "everything received after autoRead=true", state);
        assertEquals(total, received);
        assertEquals(crc.getValue(), reader.crc.getValue(), "CRC32C, written vs received");
        RdmaTestSupport.awaitCondition("all writes succeeded", () -> succeeded.get() == writes.get(), 10_000, state);
        RdmaTestSupport.awaitCondition("client writable again", client::isWritable, 10_000, state);
        assertEquals("[false, true]", writability.events.toString(),
                "channelWritabilityChanged events seen by the client (isWritable at each)");
        assertEquals(total, cc.bytesSent(), "client bytesSent");
        assertEquals(total, sc.bytesReceived(), "server child bytesReceived");
        assertEquals(0, RdmaTestSupport.pendingWriteBytes(client), "client outbound buffer after everything was sent");
        // the child may keep a few released receive buffers to post again (ReceiveQueue's spares), nothing more
        RdmaTestSupport.awaitCondition("registered buffers released", () -> RdmaByteBufAllocator.DEFAULT.buffersInUse()
                <= baselineBuffers + QueuePairReceives.MAX_SPARES, 10_000, state);
        assertTrue(writeFailures.isEmpty(), state.get());
        assertTrue(writability.exceptions.isEmpty(), state.get());
        assertTrue(serverErrors.exceptions.isEmpty() && reader.exceptions.isEmpty(), state.get());

        client.close().sync();
        server.close().sync();
    }

    /**
     * With auto-read off a {@code read()} gives the pipeline one buffer, and a socket's fills it with all that arrived,
     * up to the allocator's guess: so does this channel's, lending the messages that arrived (16 KiB receives, 16,380
     * bytes of payload each) in one composite while they fit whole. Four full messages and one of 26 bytes wait: at a
     * fixed guess of 64 KiB the first read gives the four (65,520 bytes; the fifth would pass the guess), the second
     * the 26. Before, each read gave one receive buffer: a proxy that reads once per write completed made four times
     * the round trips of a socket's.
     */
    @Test
    @Timeout(value = 30, unit = TimeUnit.SECONDS)
    void aReadWithAutoReadOffGivesWhatArrivedUpToTheGuessInOneBuffer() throws Exception {
        int payload = MESSAGE - RdmaProtocol.HEADER_LENGTH;
        List<Integer> reads = readOneAtATime(new FixedRecvByteBufAllocator(4 * MESSAGE), 4 * payload + 26);
        assertEquals(List.of(4 * payload, 26), reads, "bytes of each read");
    }

    /**
     * The same with Netty's default allocator ({@code AdaptiveRecvByteBufAllocator}, up to 64 KiB): its guess grows
     * when a read fills the buffer, and a read that stopped before a whole message that did not fit counts as full (a
     * socket's read would have filled it), so the reads grow to four messages as a socket's grow to 64 KiB. Without
     * that the guess stayed at 32 KiB, two messages a read (a review's measurement).
     */
    @Test
    @Timeout(value = 30, unit = TimeUnit.SECONDS)
    void aReadWithAutoReadOffGrowsTheDefaultAllocatorsGuessAsASocketsReadsDo() throws Exception {
        int payload = MESSAGE - RdmaProtocol.HEADER_LENGTH;
        List<Integer> reads = readOneAtATime(new AdaptiveRecvByteBufAllocator(), 12 * payload);
        assertTrue(reads.contains(4 * payload), () -> "no read of four messages: " + reads);
        assertTrue(reads.stream().allMatch(n -> n <= 65536), () -> "a read beyond the allocator's maximum: " + reads);
    }

    private static final int MESSAGE = 16 << 10;

    /**
     * {@code total} bytes written at once to a child (auto-read off, {@code allocator}, 16 KiB receives of its own: all
     * of it within its credits), then read with one {@code read()} at a time once all arrived: the bytes of each read,
     * after checking that every byte came in order.
     */
    private List<Integer> readOneAtATime(RecvByteBufAllocator allocator, int total) throws Exception {
        EventLoopGroup group = RdmaTestSupport.newGroup(1, "bp-one-read", null, RdmaTestSupport.ownReceivesConfig());
        try {
            Queue<Integer> reads = new ConcurrentLinkedQueue<>();
            java.io.ByteArrayOutputStream got = new java.io.ByteArrayOutputStream();
            ExceptionRecorder serverErrors = new ExceptionRecorder();
            AtomicReference<RdmaSocketChannel> childRef = new AtomicReference<>();
            Channel server = RdmaTestSupport.serverBootstrap(group, group)
                    .childOption(ChannelOption.AUTO_READ, false)
                    .childOption(RdmaChannelOption.RECEIVE_BUFFER_SIZE, MESSAGE)
                    .childOption(ChannelOption.RCVBUF_ALLOCATOR, allocator)
                    .childHandler(new ChannelInitializer<Channel>() {
                        @Override
                        protected void initChannel(Channel ch) {
                            childRef.set((RdmaSocketChannel) ch);
                            ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                                @Override
                                public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                    ByteBuf buf = (ByteBuf) msg;
                                    byte[] b = new byte[buf.readableBytes()];
                                    buf.readBytes(b);
                                    buf.release();
                                    synchronized (got) {
                                        got.writeBytes(b);
                                    }
                                    reads.add(b.length);
                                }
                            }, serverErrors);
                        }
                    }).bind(RdmaTestSupport.anyPort()).sync().channel();
            Channel client = RdmaTestSupport.clientBootstrap(clientGroup)
                    .option(RdmaChannelOption.RECEIVE_BUFFER_SIZE, MESSAGE)
                    .handler(new ChannelInboundHandlerAdapter())
                    .connect(server.localAddress()).sync().channel();
            byte[] bytes = new byte[total];
            new Random(7).nextBytes(bytes);
            client.writeAndFlush(Unpooled.wrappedBuffer(bytes)).sync();
            RdmaTestSupport.awaitCondition("the child's receives", () -> childRef.get() != null
                    && childRef.get().counters().bytesReceived() == bytes.length, 10_000, () -> "child " + childRef);
            RdmaSocketChannel child = childRef.get();
            while (got.size() < total) {
                int before = reads.size();
                child.read();
                RdmaTestSupport.awaitCondition("read " + (before + 1), () -> reads.size() > before, 10_000,
                        reads::toString);
            }
            synchronized (got) {
                assertArrayEquals(bytes, got.toByteArray(), "the bytes, in order");
            }
            assertTrue(serverErrors.exceptions.isEmpty(), () -> "server exceptions: " + serverErrors.exceptions);
            client.close().sync();
            server.close().sync();
            return List.copyOf(reads);
        } finally {
            RdmaTestSupport.shutdown(group);
        }
    }

    /** Records isWritable() at each channelWritabilityChanged, and exceptions. */
    static final class WritabilityRecorder extends ChannelInboundHandlerAdapter {
        final Queue<Boolean> events = new ConcurrentLinkedQueue<>();
        final Queue<Throwable> exceptions = new ConcurrentLinkedQueue<>();

        @Override
        public void channelWritabilityChanged(ChannelHandlerContext ctx) throws Exception {
            events.add(ctx.channel().isWritable());
            super.channelWritabilityChanged(ctx);
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            io.netty.util.ReferenceCountUtil.release(msg);
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            exceptions.add(cause);
        }
    }

    /**
     * Whether the channel has no data credit left and, with pooled credits, the peer's first message (the accepted side
     * grants the credits beyond the connection's private data in it; without pooled credits it sends nothing).
     */
    private static boolean outOfCredits(RdmaSocketChannel ch) {
        try {
            return RdmaTestSupport.onLoop(ch, () -> {
                CreditWindow w = RdmaTestSupport.credits(ch);
                boolean pooled = RdmaTestSupport.connectionField(ch, "window") != null;
                return !w.canSendData() && (!pooled || w.receivedFromPeer() > 0);
            });
        } catch (Exception e) {
            throw new AssertionError(e);
        }
    }

    /** The channel's credit window as it is on its loop, for a failure's message. */
    private static String creditsOf(RdmaSocketChannel ch) {
        try {
            return RdmaTestSupport.onLoop(ch, () -> String.valueOf(RdmaTestSupport.credits(ch)));
        } catch (Exception e) {
            return e.toString();
        }
    }
}
