package org.nettyrdma.channel;

import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
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
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;
import java.util.function.Supplier;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * Protocol v2's READ rendezvous (docs/protocol.md): negotiated only when both sides offer it and the device has memory
 * windows and SEND_WITH_INV; registered buffers alone in their region, at least the threshold long, are announced and
 * READ by the receiver; every combination of offers interoperates, byte-checked, with the WRITE ring too.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class RdmaTransportRendezvousTest {
    private EventLoopGroup serverGroup;
    private EventLoopGroup clientGroup;

    @BeforeEach
    void setUp() {
        serverGroup = RdmaTestSupport.newGroup(1, "rendezvous-server");
        clientGroup = RdmaTestSupport.newGroup(1, "rendezvous-client");
    }

    @AfterEach
    void tearDown() throws InterruptedException {
        RdmaTestSupport.shutdown(clientGroup, serverGroup);
    }

    /** What a stream left behind: the counters of both ends, and whether the rendezvous was used. */
    private static final class Result {
        RdmaCounters client;
        RdmaCounters server;
        boolean rendezvous;
    }

    private static boolean rendezvousDevice(RdmaSocketChannel ch) throws Exception {
        DeviceAttributes a = RdmaTestSupport.onLoop(ch, ch::deviceAttributes);
        return a.supportsMemoryWindows() && a.supportsSendWithInvalidate() && a.maxQpRdAtom() > 0;
    }

    private Result stream(long total, WritePlan plan, boolean clientOffers, boolean serverOffers, boolean ring,
                          int threshold) throws Exception {
        return stream(total, plan, clientOffers, serverOffers, ring, threshold, ch -> { });
    }

    private Result stream(long total, WritePlan plan, boolean clientOffers, boolean serverOffers, boolean ring,
                          int threshold, Consumer<Channel> childSetUp) throws Exception {
        Pattern pattern = Pattern.standard();
        StreamReader reader = new StreamReader(total, pattern);
        ExceptionRecorder serverErrors = new ExceptionRecorder();
        AtomicReference<RdmaSocketChannel> child = new AtomicReference<>();
        Channel server = RdmaTestSupport.serverBootstrap(serverGroup, serverGroup)
                .childOption(RdmaChannelOption.RENDEZVOUS, serverOffers)
                .childOption(RdmaChannelOption.WRITE_RING, ring)
                .childHandler(new ChannelInitializer<Channel>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        child.set((RdmaSocketChannel) ch);
                        ch.pipeline().addLast(reader, serverErrors);
                        childSetUp.accept(ch);
                    }
                }).bind(RdmaTestSupport.anyPort()).sync().channel();
        StreamWriter writer = new StreamWriter(total, pattern, plan, 23);
        RdmaSocketChannel client = (RdmaSocketChannel) RdmaTestSupport.clientBootstrap(clientGroup)
                .option(RdmaChannelOption.RENDEZVOUS, clientOffers)
                .option(RdmaChannelOption.RENDEZVOUS_THRESHOLD, threshold)
                .option(RdmaChannelOption.WRITE_RING, ring)
                .handler(writer)
                .connect(server.localAddress()).sync().channel();
        Supplier<String> state = () -> writer.state() + ", " + reader.state() + ", client " + client.counters()
                + ", server errors " + serverErrors.exceptions;
        try {
            RdmaTestSupport.await(writer.done, 100_000, "all writes succeeded", state);
            long received = RdmaTestSupport.await(reader.done, 100_000, "all bytes received", state);
            assertEquals(total, received, "bytes received");
            assertEquals(writer.crc.getValue(), reader.crc.getValue(), "CRC32C of the stream, sender vs receiver");
            assertTrue(writer.exceptions.isEmpty(), () -> "client exceptions: " + writer.exceptions);
            assertTrue(reader.exceptions.isEmpty() && serverErrors.exceptions.isEmpty(),
                    () -> "server exceptions: " + reader.exceptions + serverErrors.exceptions);
            Result r = new Result();
            r.rendezvous = clientOffers && serverOffers && rendezvousDevice(client);
            r.client = client.counters();
            r.server = child.get().counters();
            System.out.println("[RdmaTransportRendezvousTest] client " + r.client + "; server child " + r.server);
            assertEquals(r.client.rendezvousBytesSent(), r.server.rendezvousBytesRead(),
                    () -> "rendezvous bytes announced vs read: " + state.get());
            if (!r.rendezvous) {
                assertEquals(0, r.client.rendezvousBytesSent(), "rendezvous without one negotiated");
            }
            assertEquals(0, r.client.rendezvousExposedBytes(), () -> "every write done, bytes still exposed: " + r.client);
            return r;
        } finally {
            client.close().sync();
            server.close().sync();
        }
    }

    /** v1 and rendezvous peers in all four combinations, with and without the WRITE ring: bytes arrive exact. */
    @ParameterizedTest(name = "client offers {0}, server offers {1}, ring {2}")
    @CsvSource({"false,false,false", "true,false,false", "false,true,false", "true,true,false", "true,true,true"})
    void everyCombinationOfOffersInteroperates(boolean clientOffers, boolean serverOffers, boolean ring)
            throws Exception {
        long total = RdmaTestSupport.scaledBytes(64L << 20, 4 << 20);
        Result r = stream(total, RdmaTestSupport.mixedPlan(4 << 20), clientOffers, serverOffers, ring, 1 << 20);
        if (r.rendezvous) {
            assertTrue(r.client.rendezvousBytesSent() > 0, () -> "nothing went by rendezvous: " + r.client);
            assertTrue(r.server.rendezvousReads() > 0, () -> "no READ: " + r.server);
        }
    }

    /**
     * Only large registered buffers: every write goes by rendezvous (8 MiB buffers, READ in 1 MiB chunks, at most four
     * outstanding), nothing is copied on either side.
     */
    @Test
    void largeRegisteredBuffersAreReadWithoutCopy() throws Exception {
        long total = RdmaTestSupport.scaledBytes(128L << 20, 8 << 20);
        Result r = stream(total, RdmaTestSupport.fixedPlan(8 << 20, Kind.REGISTERED), true, true, false, 1 << 20);
        if (r.rendezvous) {
            assertEquals(total, r.client.rendezvousBytesSent(), () -> "client " + r.client);
            assertEquals(0, r.client.copiedBytes(), () -> "client " + r.client);
            assertEquals(0, r.server.receiveCopiedBytes(), () -> "server " + r.server);
            assertEquals(total / (1 << 20), r.server.rendezvousReads(), () -> "one READ per MiB: " + r.server);
        }
    }

    /**
     * Writes one at a time, each waiting for the last one's success: a writer whose loop has nothing in flight waits
     * for the DONE armed for solicited completions only, so the DONE must ask for a solicited event, or every write
     * waits for the loop's next tick (1 s). 24 writes of 2 MiB took 15 s that way (the perf tool: 3 messages/s of
     * 4 MiB); here a few hundred ms, about 2 s on rxe0 in the VM. Bound: 8 s.
     */
    @Test
    void writesOneAtATimeAreNotPacedByTheLoopsTick() throws Exception {
        int size = 2 << 20;
        int writes = 24;
        Pattern pattern = Pattern.standard();
        StreamReader reader = new StreamReader((long) size * writes, pattern);
        Channel server = RdmaTestSupport.serverBootstrap(serverGroup, serverGroup)
                .childOption(RdmaChannelOption.RENDEZVOUS, true)
                .childHandler(reader).bind(RdmaTestSupport.anyPort()).sync().channel();
        RdmaSocketChannel client = (RdmaSocketChannel) RdmaTestSupport.clientBootstrap(clientGroup)
                .option(RdmaChannelOption.RENDEZVOUS, true)
                .handler(new ChannelInboundHandlerAdapter())
                .connect(server.localAddress()).sync().channel();
        try {
            org.junit.jupiter.api.Assumptions.assumeTrue(rendezvousDevice(client),
                    "the device has no memory windows or no SEND_WITH_INV (iWARP, siw): no READ rendezvous");
            long start = System.nanoTime();
            for (int i = 0; i < writes; i++) {
                ByteBuf buf = client.alloc().directBuffer(size);
                pattern.writeTo(buf, (long) i * size, size);
                assertTrue(client.writeAndFlush(buf).await(10, TimeUnit.SECONDS), "write " + i + " did not complete");
            }
            long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
            assertEquals((long) size * writes, (long) RdmaTestSupport.await(reader.done, 10_000, "all bytes received",
                    reader::state), "bytes received");
            assertEquals(writes, client.counters().rendezvousBytesSent() / size, () -> "writes by rendezvous: "
                    + client.counters());
            assertTrue(millis < 8_000, () -> writes + " writes of " + size + " B one at a time took " + millis
                    + " ms: the writer's loop slept through the DONEs until its tick");
        } finally {
            client.close().sync();
            server.close().sync();
        }
    }

    /**
     * A slow reader (autoRead off, one {@code read()} a millisecond) that holds every chunk it got until the end: the
     * receiver never holds more than the read-ahead of chunks not yet delivered, the writer's rendezvous wait for the
     * reader, every byte arrives in order.
     */
    @Test
    void slowReaderHoldingChunksStaysWithinTheReadAhead() throws Exception {
        long total = RdmaTestSupport.scaledBytes(32L << 20, 4 << 20);
        List<ByteBuf> held = new CopyOnWriteArrayList<>();
        AtomicLong maxHeld = new AtomicLong();
        Result r = stream(total, RdmaTestSupport.fixedPlan(3 << 20, Kind.REGISTERED), true, true, false, 1 << 20,
                ch -> {
                    ch.config().setAutoRead(false);
                    ch.pipeline().addFirst(new ChannelInboundHandlerAdapter() {
                        @Override
                        public void channelActive(ChannelHandlerContext ctx) {
                            ctx.executor().scheduleAtFixedRate(ctx::read, 1, 1, TimeUnit.MILLISECONDS);
                            ctx.fireChannelActive();
                        }

                        @Override
                        public void channelRead(ChannelHandlerContext ctx, Object msg) {
                            RendezvousReceives table = ((RdmaSocketChannel) ctx.channel()).resources()
                                    .rendezvousReceives;
                            if (table != null) {
                                maxHeld.accumulateAndGet(table.heldBytes(), Math::max);
                            }
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
        if (r.rendezvous) {
            // all but a last write of 1 MiB or less (a pooled slot, not alone in its region: sent as SENDs)
            assertTrue(r.client.rendezvousBytesSent() >= total - (1 << 20), () -> "client " + r.client);
            assertTrue(maxHeld.get() <= 4 << 20, () -> "chunks held beyond the read-ahead: " + maxHeld.get());
        }
    }

    /**
     * The loop's read-ahead bound: one server loop bound to 3 MiB of rendezvous chunks (each connection's own bound is
     * 4 MiB). Connection A's pipeline reads nothing until B and C have all their bytes, so A's chunks fill the loop's
     * bound; B and C, slow readers (one {@code read()} a millisecond), still get every byte in order, 64 KiB at a time
     * while A holds the bound (without that allowance they would wait for A, and A for them, for ever). The loop never
     * holds more than its bound plus 64 KiB a connection, its stalls are counted, and every byte comes back at the end.
     */
    @Test
    void connectionsShareTheLoopsReadAheadWithoutStarving() throws Exception {
        long bound = 3 << 20;
        long total = RdmaTestSupport.scaledBytes(16L << 20, 4 << 20);
        List<RdmaIoHandler> handlers = new CopyOnWriteArrayList<>();
        EventLoopGroup boundGroup = RdmaTestSupport.newGroup(1, "rendezvous-bound", handlers,
                RdmaTestSupport.config().setRendezvousReadAheadBytes(bound));
        Pattern pattern = Pattern.standard();
        List<StreamReader> readers = new CopyOnWriteArrayList<>();
        List<RdmaSocketChannel> children = new CopyOnWriteArrayList<>();
        ExceptionRecorder serverErrors = new ExceptionRecorder();
        AtomicLong maxHeld = new AtomicLong();
        CompletableFuture<Void> othersDone = new CompletableFuture<>();
        List<Channel> clients = new CopyOnWriteArrayList<>();
        List<StreamWriter> writers = new CopyOnWriteArrayList<>();
        Channel server = RdmaTestSupport.serverBootstrap(boundGroup, boundGroup)
                .childOption(RdmaChannelOption.RENDEZVOUS, true)
                .childHandler(new ChannelInitializer<Channel>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        boolean first = children.isEmpty();
                        children.add((RdmaSocketChannel) ch);
                        ch.config().setAutoRead(false);
                        StreamReader reader = new StreamReader(total, pattern);
                        readers.add(reader);
                        ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                            @Override
                            public void channelActive(ChannelHandlerContext ctx) {
                                if (first) { // A: reads once the others have everything
                                    othersDone.thenRun(() -> ctx.channel().config().setAutoRead(true));
                                } else {
                                    ctx.executor().scheduleAtFixedRate(ctx::read, 1, 1, TimeUnit.MILLISECONDS);
                                }
                                ctx.fireChannelActive();
                            }

                            @Override
                            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                maxHeld.accumulateAndGet(handlers.get(0).readAheadBudget().held(), Math::max);
                                ctx.fireChannelRead(msg);
                            }
                        }, reader, serverErrors);
                    }
                }).bind(RdmaTestSupport.anyPort()).sync().channel();
        Supplier<String> state = () -> "writers " + writers.stream().map(StreamWriter::state).toList() + ", readers "
                + readers.stream().map(StreamReader::state).toList() + ", server errors " + serverErrors.exceptions;
        try {
            for (int i = 0; i < 3; i++) {
                StreamWriter writer = new StreamWriter(total, pattern,
                        RdmaTestSupport.fixedPlan(3 << 20, Kind.REGISTERED), 31 + i);
                writers.add(writer);
                clients.add(RdmaTestSupport.clientBootstrap(clientGroup)
                        .option(RdmaChannelOption.RENDEZVOUS, true)
                        .handler(writer)
                        .connect(server.localAddress()).sync().channel());
                if (i == 0 && rendezvousDevice((RdmaSocketChannel) clients.get(0))) {
                    RdmaTestSupport.awaitCondition("A's chunks fill the loop's bound", () -> {
                        try {
                            return RdmaTestSupport.onLoop(boundGroup.next(),
                                    () -> handlers.get(0).readAheadBudget().held()) >= bound;
                        } catch (Exception e) {
                            throw new IllegalStateException(e);
                        }
                    }, 30_000, state);
                }
            }
            for (int i = 1; i < 3; i++) {
                RdmaTestSupport.await(readers.get(i).done, 100_000, "B and C have every byte while A reads nothing",
                        state);
            }
            othersDone.complete(null);
            RdmaTestSupport.await(readers.get(0).done, 100_000, "A has every byte", state);
            for (StreamWriter w : writers) {
                RdmaTestSupport.await(w.done, 100_000, "all writes succeeded", state);
            }
            for (int i = 0; i < 3; i++) {
                assertEquals(writers.get(i).crc.getValue(), readers.get(i).crc.getValue(), "CRC32C of stream " + i);
            }
            assertTrue(serverErrors.exceptions.isEmpty(), state);
            RdmaCounters loop = handlers.get(0).counters();
            if (rendezvousDevice((RdmaSocketChannel) clients.get(0))) {
                assertTrue(maxHeld.get() <= bound + 3 * ReadAheadBudget.MIN_CHUNK,
                        () -> "the loop held " + maxHeld.get() + " bytes of chunks");
                assertTrue(loop.rendezvousReadAheadStalls() > 0, () -> "no stall: " + loop);
                for (RdmaSocketChannel child : children) {
                    assertTrue(child.counters().rendezvousBytesRead() > 0, () -> "no rendezvous: " + child.counters());
                }
            }
        } finally {
            for (Channel c : clients) {
                c.close().sync();
            }
            server.close().sync();
        }
        for (RdmaSocketChannel child : children) {
            child.closeFuture().sync();
        }
        assertEquals(0L, RdmaTestSupport.onLoop(boundGroup.next(), () -> handlers.get(0).readAheadBudget().held()),
                "every byte back");
        RdmaTestSupport.shutdown(boundGroup);
    }

    /**
     * Pooled credits with the rendezvous (docs/protocol.md, "DONE"): on a loop's shared receive queue (the default on
     * IB and RoCE) an idle connection's windows come down to the floor as without the rendezvous, with the receives for
     * the peer's DONEs reserved beside them on each side (2 + 4 buffers of 16 KiB, where the whole window and the DONEs'
     * took 16 + 4), and a rendezvous stream between the same loops still carries every byte; its reservations go back
     * with its connection.
     */
    @Test
    void onASharedReceiveQueueAnIdleWindowComesDownToTheFloorBesideTheDonesReceives() throws Exception {
        List<RdmaSocketChannel> accepted = new CopyOnWriteArrayList<>();
        Channel server = RdmaTestSupport.serverBootstrap(serverGroup, serverGroup)
                .childOption(RdmaChannelOption.RENDEZVOUS, true)
                .childOption(RdmaChannelOption.WRITE_RING, false)
                .childHandler(new ChannelInitializer<Channel>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        accepted.add((RdmaSocketChannel) ch);
                    }
                }).bind(RdmaTestSupport.anyPort()).sync().channel();
        RdmaSocketChannel idle = (RdmaSocketChannel) RdmaTestSupport.clientBootstrap(clientGroup)
                .option(RdmaChannelOption.RENDEZVOUS, true)
                .option(RdmaChannelOption.WRITE_RING, false)
                .handler(new ChannelInboundHandlerAdapter()).connect(server.localAddress()).sync().channel();
        try {
            ReceivePool pool = RdmaTestSupport.onLoop(idle, () -> idle.resources().receivePool());
            assumeTrue(pool != null, "no shared receive queue here (iWARP, siw0: each connection has its own)");
            int dones = RdmaTestSupport.onLoop(idle, () -> idle.resources().offersRendezvous)
                    ? RendezvousSends.MAX_RENDEZVOUS : 0;
            RdmaTestSupport.awaitCondition("the idle connection at the floor, both ends", () -> accepted.size() == 1
                    && windowReservation(idle) == CreditWindow.KEPT_FLOOR
                    && windowReservation(accepted.get(0)) == CreditWindow.KEPT_FLOOR, 10_000, () -> "client "
                    + windowReservation(idle) + ", accepted " + accepted);
            RdmaSocketChannel child = accepted.get(0);
            assertEquals(CreditWindow.KEPT_FLOOR + dones, poolReservation(idle),
                    "the client loop's pool: the floor and the receives for DONEs");
            assertEquals(CreditWindow.KEPT_FLOOR + dones, poolReservation(child),
                    "the server loop's pool: the floor and the receives for DONEs");

            long total = RdmaTestSupport.scaledBytes(32L << 20, 4 << 20);
            Result r = stream(total, RdmaTestSupport.fixedPlan(4 << 20, Kind.REGISTERED), true, true, false, 1 << 20);
            if (r.rendezvous) {
                assertEquals(total, r.client.rendezvousBytesSent(), () -> "client " + r.client);
            }
            RdmaTestSupport.awaitCondition("the stream's reservations given back", () ->
                    poolReservation(idle) == CreditWindow.KEPT_FLOOR + dones
                            && poolReservation(child) == CreditWindow.KEPT_FLOOR + dones, 10_000,
                    () -> "client pool " + poolReservation(idle) + ", server pool " + poolReservation(child));
        } finally {
            idle.close().sync();
            server.close().sync();
        }
    }

    private static int windowReservation(RdmaSocketChannel c) {
        return unchecked(() -> RdmaTestSupport.onLoop(c, () -> c.resources().reservedReceives()));
    }

    private static int poolReservation(RdmaSocketChannel c) {
        return unchecked(() -> RdmaTestSupport.onLoop(c, () -> c.resources().receivePool().reserved()));
    }

    private static int unchecked(Callable<Integer> task) {
        try {
            return task.call();
        } catch (Exception e) {
            throw new AssertionError(e);
        }
    }

    /**
     * One end closes in the middle of a stream of 2 MiB rendezvous: with the writer closing, the reader gets a
     * byte-exact prefix and then the end; with the reader closing, the writer's connection ends (its writes fail or
     * succeed, none hangs). Either way both connections free everything (windows, exposed buffers, chunks, registered
     * memory, queue pairs).
     */
    @ParameterizedTest(name = "the {0} closes")
    @CsvSource({"writer", "reader"})
    void closeMidStreamFreesEverything(String closing) throws Exception {
        Pattern pattern = Pattern.standard();
        long total = RdmaTestSupport.scaledBytes(256L << 20, 8 << 20); // not reached: an end closes at an eighth
        long closeAt = total / 8;
        StreamReader reader = new StreamReader(total, pattern);
        AtomicReference<RdmaSocketChannel> child = new AtomicReference<>();
        Channel server = RdmaTestSupport.serverBootstrap(serverGroup, serverGroup)
                .childOption(RdmaChannelOption.RENDEZVOUS, true)
                .childHandler(new ChannelInitializer<Channel>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        child.set((RdmaSocketChannel) ch);
                        ch.pipeline().addLast(reader);
                    }
                }).bind(RdmaTestSupport.anyPort()).sync().channel();
        StreamWriter writer = new StreamWriter(total, pattern, RdmaTestSupport.fixedPlan(2 << 20, Kind.REGISTERED), 3);
        RdmaSocketChannel client = (RdmaSocketChannel) RdmaTestSupport.clientBootstrap(clientGroup)
                .option(RdmaChannelOption.RENDEZVOUS, true)
                .handler(writer)
                .connect(server.localAddress()).sync().channel();
        Supplier<String> state = () -> writer.state() + ", " + reader.state() + ", client " + client.counters()
                + ", child " + (child.get() == null ? null : child.get().counters());
        boolean rendezvous = rendezvousDevice(client);
        try {
            RdmaTestSupport.awaitCondition(closeAt + " bytes received", () -> reader.received >= closeAt, 60_000,
                    state);
            if (closing.equals("writer")) {
                client.close().sync();
                RdmaTestSupport.await(reader.inactive, 30_000, "the server child inactive", state);
                assertTrue(reader.exceptions.isEmpty(), state);
                assertTrue(reader.received >= closeAt && reader.received <= writer.written, state);
            } else {
                child.get().close().sync();
                RdmaTestSupport.awaitCondition("the client closed", () -> !client.isOpen(), 30_000, state);
            }
            RdmaTestSupport.awaitCondition("both connections freed", () -> RdmaTestSupport.registeredChannels(
                    clientGroup) == 0 && RdmaTestSupport.registeredChannels(serverGroup) == 1, 15_000, state);
            assertEquals(0, client.counters().registeredBytes(), state);
            assertEquals(0, client.counters().queuePairs(), state);
            assertEquals(0, child.get().counters().registeredBytes(), state);
            assertEquals(0, child.get().counters().queuePairs(), state);
            if (rendezvous) {
                assertTrue(client.counters().rendezvousBytesSent() > 0, state);
            }
        } finally {
            client.close().sync();
            server.close().sync();
        }
    }
}
