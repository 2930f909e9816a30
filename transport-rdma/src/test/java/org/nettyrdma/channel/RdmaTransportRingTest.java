package org.nettyrdma.channel;

import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelOption;
import io.netty.channel.WriteBufferWaterMark;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.nettyrdma.channel.RdmaTestSupport.ExceptionRecorder;
import org.nettyrdma.channel.RdmaTestSupport.Kind;
import org.nettyrdma.channel.RdmaTestSupport.Pattern;
import org.nettyrdma.channel.RdmaTestSupport.StreamReader;
import org.nettyrdma.channel.RdmaTestSupport.StreamWriter;
import org.nettyrdma.channel.RdmaTestSupport.WritePlan;
import org.nettyrdma.verbs.DeviceAttributes;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;
import java.util.function.Supplier;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Protocol v2's WRITE ring (docs/protocol.md): negotiated in the handshake only when both sides offer it and the device
 * can confine a ring to one connection (memory windows) and tell what arrived (immediate data); every combination of
 * offers interoperates, byte-checked.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class RdmaTransportRingTest {
    private static final int MAX_WRITE = 256 << 10;

    private EventLoopGroup serverGroup;
    private EventLoopGroup clientGroup;

    @BeforeEach
    void setUp() {
        serverGroup = RdmaTestSupport.newGroup(1, "ring-server");
        clientGroup = RdmaTestSupport.newGroup(1, "ring-client");
    }

    @AfterEach
    void tearDown() throws InterruptedException {
        RdmaTestSupport.shutdown(clientGroup, serverGroup);
    }

    /** v1 and v2 peers in all four combinations: the ring is used only when both offer it, bytes arrive exact. */
    @ParameterizedTest(name = "client offers {0}, server offers {1}")
    @CsvSource({"false,false", "true,false", "false,true", "true,true"})
    void everyCombinationOfOffersInteroperates(boolean clientRing, boolean serverRing) throws Exception {
        long total = RdmaTestSupport.scaledBytes(16L << 20, 1);
        Pattern pattern = Pattern.standard();
        StreamReader reader = new StreamReader(total, pattern);
        ExceptionRecorder serverErrors = new ExceptionRecorder();
        AtomicReference<RdmaSocketChannel> child = new AtomicReference<>();
        Channel server = RdmaTestSupport.serverBootstrap(serverGroup, serverGroup)
                .childOption(RdmaChannelOption.WRITE_RING, serverRing)
                .childHandler(new ChannelInitializer<Channel>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        child.set((RdmaSocketChannel) ch);
                        ch.pipeline().addLast(reader, serverErrors);
                    }
                }).bind(RdmaTestSupport.anyPort()).sync().channel();
        StreamWriter writer = new StreamWriter(total, pattern, RdmaTestSupport.mixedPlan(MAX_WRITE), 11);
        RdmaSocketChannel client = (RdmaSocketChannel) RdmaTestSupport.clientBootstrap(clientGroup)
                .option(RdmaChannelOption.WRITE_RING, clientRing)
                .handler(writer)
                .connect(server.localAddress()).sync().channel();
        Supplier<String> state = () -> writer.state() + ", " + reader.state() + ", client " + client.counters()
                + ", server errors " + serverErrors.exceptions;
        try {
            RdmaTestSupport.await(writer.done, 100_000, "all writes succeeded", state);
            long received = RdmaTestSupport.await(reader.done, 100_000, "all bytes received", state);
            boolean expected = clientRing && serverRing && ringDevice(client);
            assertEquals(expected, RdmaTestSupport.onLoop(client, client::writeRingNegotiated),
                    "client: WRITE ring negotiated");
            assertEquals(expected, RdmaTestSupport.onLoop(child.get(), child.get()::writeRingNegotiated),
                    "server child: WRITE ring negotiated");
            assertEquals(total, received, "bytes received");
            if (expected) {
                // registered buffers of at least ZERO_COPY_THRESHOLD go by the ring (a fifth of the mixed plan's bytes)
                assertTrue(client.counters().ringBytesSent() > total / 20, () -> "few bytes went by the ring: "
                        + state.get());
            } else {
                assertEquals(0, client.counters().ringBytesSent(), "bytes by the ring without one negotiated");
            }
            assertEquals(client.counters().ringBytesSent(), child.get().counters().ringBytesReceived(),
                    "ring bytes sent vs received");
            assertEquals(writer.crc.getValue(), reader.crc.getValue(), "CRC32C of the stream, sender vs receiver");
            assertTrue(writer.exceptions.isEmpty(), () -> "client exceptions: " + writer.exceptions);
            assertTrue(reader.exceptions.isEmpty() && serverErrors.exceptions.isEmpty(),
                    () -> "server exceptions: " + reader.exceptions + serverErrors.exceptions);
        } finally {
            client.close().sync();
            server.close().sync();
        }
    }

    /**
     * 1 MiB writes of registered buffers through a 64 KiB ring: each is split into quarter-ring WRITEs, the ring wraps
     * with PADs hundreds of times, and while it is full the bytes go as SENDs in between, all in order.
     */
    @Test
    void largeMessagesWrapAroundASmallRingInOrder() throws Exception {
        long total = RdmaTestSupport.scaledBytes(64L << 20, 1 << 20);
        Result r = stream(total, RdmaTestSupport.fixedPlan(1 << 20, Kind.REGISTERED), 64 << 10, null);
        if (r.ring) {
            // at least twice the ring's bytes through it: it wrapped (the rest may go as SENDs while it is full)
            assertTrue(r.client.ringBytesSent() > 2L * (64 << 10), () -> "the ring did not wrap: " + r.client);
        }
    }

    /** One 16 KiB registered write in flight at a time (water marks 8/16 KiB), as Netty's conditional-writability test. */
    @Test
    void oneSmallWriteInFlightAtATime() throws Exception {
        long total = RdmaTestSupport.scaledBytes(16L << 20, 1 << 20);
        long start = System.nanoTime();
        stream(total, RdmaTestSupport.fixedPlan(16 << 10, Kind.REGISTERED), 1 << 20,
                null, new WriteBufferWaterMark(8 << 10, 16 << 10));
        System.out.printf("[RdmaTransportRingTest] one 16 KiB write at a time: %d MiB in %d ms%n", total >> 20,
                TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start));
    }

    /** Random sizes from 1 B to 256 KiB of every kind of buffer, echoed back over both sides' rings, byte-checked. */
    @Test
    void mixedSizesEchoBothWays() throws Exception {
        long total = RdmaTestSupport.scaledBytes(32L << 20, 1 << 20);
        Pattern pattern = Pattern.standard();
        ExceptionRecorder serverErrors = new ExceptionRecorder();
        AtomicReference<RdmaSocketChannel> child = new AtomicReference<>();
        Channel server = RdmaTestSupport.serverBootstrap(serverGroup, serverGroup)
                .childOption(RdmaChannelOption.WRITE_RING, true)
                .childOption(ChannelOption.WRITE_BUFFER_WATER_MARK, new WriteBufferWaterMark(256 << 10, 512 << 10))
                .childHandler(new ChannelInitializer<Channel>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        child.set((RdmaSocketChannel) ch);
                        ch.pipeline().addLast(new RdmaTransportStreamTest.BackPressuredEcho(), serverErrors);
                    }
                }).bind(RdmaTestSupport.anyPort()).sync().channel();
        StreamWriter writer = new StreamWriter(total, pattern, RdmaTestSupport.mixedPlan(MAX_WRITE), 5);
        StreamReader reader = new StreamReader(total, pattern);
        RdmaSocketChannel client = (RdmaSocketChannel) RdmaTestSupport.clientBootstrap(clientGroup)
                .option(RdmaChannelOption.WRITE_RING, true)
                .option(ChannelOption.WRITE_BUFFER_WATER_MARK, new WriteBufferWaterMark(256 << 10, 512 << 10))
                .handler(new ChannelInitializer<Channel>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        ch.pipeline().addLast(writer, reader);
                    }
                })
                .connect(server.localAddress()).sync().channel();
        Supplier<String> state = () -> writer.state() + ", " + reader.state() + ", client " + client.counters()
                + ", child " + (child.get() == null ? null : child.get().counters()) + ", " + serverErrors.exceptions;
        try {
            RdmaTestSupport.await(writer.done, 100_000, "all writes succeeded", state);
            assertEquals(total, RdmaTestSupport.await(reader.done, 100_000, "all bytes echoed back", state));
            assertEquals(writer.crc.getValue(), reader.crc.getValue(), "CRC32C, sent vs echoed back");
            if (ringDevice(client)) {
                assertTrue(client.counters().ringBytesSent() > 0, state);
                assertTrue(child.get().counters().ringBytesSent() > 0, state);
            }
            assertEquals(client.counters().ringBytesSent(), child.get().counters().ringBytesReceived(), state);
            assertEquals(child.get().counters().ringBytesSent(), client.counters().ringBytesReceived(), state);
            assertTrue(serverErrors.exceptions.isEmpty() && writer.exceptions.isEmpty(), state);
        } finally {
            client.close().sync();
            server.close().sync();
        }
    }

    /**
     * A slow reader (autoRead off, one {@code read()} a millisecond) that holds every buffer it got until the end: the
     * ring frees as it reads (received bytes are copied out), the writer waits for ring space or sends, every byte
     * arrives in order.
     */
    @Test
    void slowReaderHoldingBuffersGetsEveryByte() throws Exception {
        long total = RdmaTestSupport.scaledBytes(8L << 20, 1 << 20);
        List<ByteBuf> held = new CopyOnWriteArrayList<>();
        Result r = stream(total, RdmaTestSupport.fixedPlan(100_000, Kind.REGISTERED), 64 << 10, ch -> {
            ch.config().setAutoRead(false);
            ch.pipeline().addFirst(new ChannelInboundHandlerAdapter() {
                @Override
                public void channelActive(ChannelHandlerContext ctx) {
                    ctx.executor().scheduleAtFixedRate(ctx::read, 1, 1, TimeUnit.MILLISECONDS);
                    ctx.fireChannelActive();
                }

                @Override
                public void channelRead(ChannelHandlerContext ctx, Object msg) {
                    held.add(((ByteBuf) msg).retain());
                    ctx.fireChannelRead(msg);
                }
            });
        });
        try {
            assertTrue(held.size() > 1, "buffers held");
        } finally {
            held.forEach(ByteBuf::release);
        }
        if (r.ring) {
            assertTrue(r.client.ringBytesSent() > 0, () -> "nothing by the ring: " + r.client);
        }
    }

    /**
     * The writer closes in the middle of a stream of large writes: the reader gets a byte-exact prefix (what the close
     * took along included) and then the end; both connections free everything (ring and window included).
     */
    @Test
    void closeMidStreamDeliversAnExactPrefixAndFreesTheRing() throws Exception {
        Pattern pattern = Pattern.standard();
        long total = RdmaTestSupport.scaledBytes(64L << 20, 1 << 20); // not reached: the writer closes at an eighth
        long closeAt = total / 8;
        StreamReader reader = new StreamReader(total, pattern);
        AtomicReference<RdmaSocketChannel> child = new AtomicReference<>();
        Channel server = RdmaTestSupport.serverBootstrap(serverGroup, serverGroup)
                .childOption(RdmaChannelOption.WRITE_RING, true)
                .childHandler(new ChannelInitializer<Channel>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        child.set((RdmaSocketChannel) ch);
                        ch.pipeline().addLast(reader);
                    }
                }).bind(RdmaTestSupport.anyPort()).sync().channel();
        StreamWriter writer = new StreamWriter(total, pattern, RdmaTestSupport.fixedPlan(300_000, Kind.REGISTERED), 3);
        RdmaSocketChannel client = (RdmaSocketChannel) RdmaTestSupport.clientBootstrap(clientGroup)
                .option(RdmaChannelOption.WRITE_RING, true)
                .handler(writer)
                .connect(server.localAddress()).sync().channel();
        Supplier<String> state = () -> writer.state() + ", " + reader.state() + ", client " + client.counters()
                + ", child " + (child.get() == null ? null : child.get().counters());
        boolean ring = ringDevice(client);
        try {
            RdmaTestSupport.awaitCondition(closeAt + " bytes received", () -> reader.received >= closeAt, 60_000,
                    state);
            client.close().sync();
            RdmaTestSupport.await(reader.inactive, 30_000, "the server child inactive", state);
            assertTrue(reader.exceptions.isEmpty(), state);
            assertTrue(reader.received >= closeAt && reader.received <= writer.written, state);
            RdmaTestSupport.awaitCondition("both connections freed", () -> RdmaTestSupport.registeredChannels(
                    clientGroup) == 0 && RdmaTestSupport.registeredChannels(serverGroup) == 1, 15_000, state);
            assertEquals(0, client.counters().registeredBytes(), state);
            assertEquals(0, child.get().counters().registeredBytes(), state);
            assertEquals(0, child.get().counters().queuePairs(), state);
            if (ring) {
                assertTrue(client.counters().ringBytesSent() > 0, state);
            }
        } finally {
            client.close().sync();
            server.close().sync();
        }
    }

    /** What {@link #stream} measured. */
    private static final class Result {
        final RdmaCounters client;
        final boolean ring;

        Result(RdmaCounters client, boolean ring) {
            this.client = client;
            this.ring = ring;
        }
    }

    /**
     * {@code total} bytes client to server, both offering the ring ({@code ringSize} bytes), byte-checked; the server
     * child's pipeline set up further by {@code childSetup} (may be null).
     */
    private Result stream(long total, WritePlan plan, int ringSize, Consumer<Channel> childSetup) throws Exception {
        return stream(total, plan, ringSize, childSetup, WriteBufferWaterMark.DEFAULT);
    }

    private Result stream(long total, WritePlan plan, int ringSize, Consumer<Channel> childSetup,
                          WriteBufferWaterMark marks) throws Exception {
        Pattern pattern = Pattern.standard();
        StreamReader reader = new StreamReader(total, pattern);
        ExceptionRecorder serverErrors = new ExceptionRecorder();
        AtomicReference<RdmaSocketChannel> child = new AtomicReference<>();
        Channel server = RdmaTestSupport.serverBootstrap(serverGroup, serverGroup)
                .childOption(RdmaChannelOption.WRITE_RING, true)
                .childOption(RdmaChannelOption.RING_SIZE, ringSize)
                .childHandler(new ChannelInitializer<Channel>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        child.set((RdmaSocketChannel) ch);
                        ch.pipeline().addLast(reader, serverErrors);
                        if (childSetup != null) {
                            childSetup.accept(ch);
                        }
                    }
                }).bind(RdmaTestSupport.anyPort()).sync().channel();
        StreamWriter writer = new StreamWriter(total, pattern, plan, 17);
        RdmaSocketChannel client = (RdmaSocketChannel) RdmaTestSupport.clientBootstrap(clientGroup)
                .option(RdmaChannelOption.WRITE_RING, true)
                .option(RdmaChannelOption.RING_SIZE, ringSize)
                .option(ChannelOption.WRITE_BUFFER_WATER_MARK, marks)
                .handler(writer)
                .connect(server.localAddress()).sync().channel();
        Supplier<String> state = () -> writer.state() + ", " + reader.state() + ", client " + client.counters()
                + ", child " + (child.get() == null ? null : child.get().counters()) + ", " + serverErrors.exceptions;
        try {
            RdmaTestSupport.await(writer.done, 30_000, "all writes succeeded", state);
            assertEquals(total, RdmaTestSupport.await(reader.done, 30_000, "all bytes received", state));
            assertEquals(writer.crc.getValue(), reader.crc.getValue(), "CRC32C of the stream, sender vs receiver");
            assertEquals(client.counters().ringBytesSent(), child.get().counters().ringBytesReceived(), state);
            assertTrue(serverErrors.exceptions.isEmpty() && writer.exceptions.isEmpty(), state);
            boolean ring = ringDevice(client);
            assertEquals(ring, RdmaTestSupport.onLoop(client, client::writeRingNegotiated), state);
            return new Result(client.counters(), ring);
        } finally {
            client.close().sync();
            server.close().sync();
        }
    }

    /** Whether the device can carry a WRITE ring: memory windows and immediate data (not iWARP, so not siw). */
    private static boolean ringDevice(RdmaSocketChannel ch) throws Exception {
        DeviceAttributes a = RdmaTestSupport.onLoop(ch, ch::deviceAttributes);
        return a.supportsMemoryWindows() && a.supportsImmediateData();
    }
}
