package org.nettyrdma.channel;

import io.netty.bootstrap.Bootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.FixedRecvByteBufAllocator;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.nettyrdma.channel.RdmaTestSupport.Pattern;
import org.nettyrdma.channel.RdmaTransportManyConnectionsTest.Echo;
import org.nettyrdma.channel.RdmaTransportManyConnectionsTest.EchoClient;
import org.nettyrdma.verbs.CmEventType;

import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Connections whose receives come from their loop's shared receive queue ({@link
 * RdmaIoHandlerConfig#setSharedReceiveQueue}, issue 11, docs/srq-design.md): each reserves its receives in the loop's
 * pool, which keeps them posted with a margin; every byte is echoed in order; closed connections give their
 * reservations back.
 */
class RdmaTransportSharedReceiveQueueTest {
    private static final int COUNT = 16;

    private static ReceivePool pool(RdmaSocketChannel c) throws Exception {
        return RdmaTestSupport.onLoop(c, () -> c.resources().receivePool());
    }

    private static ReceivePool pool(Channel loopOf, RdmaIoHandler handler) {
        try {
            return RdmaTestSupport.onLoop(loopOf, () -> handler.receivePool(0));
        } catch (Exception e) {
            throw new AssertionError(e);
        }
    }

    /**
     * Into {@code parts}, read on the loop: its registered bytes, its {@code channels}' (their reservations), its
     * staging's, and what {@code pool} holds beyond the reservations.
     */
    private static void registeredParts(RdmaIoHandler loop, List<RdmaSocketChannel> channels, ReceivePool pool,
                                        long[] parts) {
        try {
            RdmaTestSupport.onLoop(channels.get(0), () -> {
                parts[0] = loop.counters().registeredBytes;
                parts[1] = 0;
                for (RdmaSocketChannel c : channels) {
                    parts[1] += c.counters().registeredBytes;
                }
                parts[2] = channels.get(0).resources().stagingPool().registeredBytes();
                parts[3] = pool.unreservedBytes();
                return null;
            });
        } catch (Exception e) {
            throw new AssertionError(e);
        }
    }

    private static int reserved(Channel loopOf, ReceivePool pool) {
        try {
            return RdmaTestSupport.onLoop(loopOf, pool::reserved);
        } catch (Exception e) {
            throw new AssertionError(e);
        }
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void connectionsOfALoopShareItsReceiveQueueAndEchoEveryByte() throws Exception {
        int connections = 8;
        RdmaIoHandlerConfig config = RdmaTestSupport.config().setSharedReceiveQueue(true);
        List<RdmaIoHandler> serverHandlers = new ArrayList<>();
        EventLoopGroup serverGroup = RdmaTestSupport.newGroup(1, "srq-server", serverHandlers, config);
        List<RdmaIoHandler> clientHandlers = new ArrayList<>();
        EventLoopGroup clientGroup = RdmaTestSupport.newGroup(1, "srq-client", clientHandlers, config);
        try {
            List<RdmaSocketChannel> accepted = new CopyOnWriteArrayList<>();
            Channel server = echoServer(serverGroup, accepted);
            Pattern pattern = Pattern.standard();
            List<EchoClient> echoes = new ArrayList<>();
            List<RdmaSocketChannel> clients = new ArrayList<>();
            for (int i = 0; i < connections; i++) {
                // from a few bytes to ~1 MiB: many receives of each connection consumed and posted again
                EchoClient echo = new EchoClient(1000 + 150_000 * i, pattern, 777L * i);
                echoes.add(echo);
                clients.add((RdmaSocketChannel) client(clientGroup).handler(echo)
                        .connect(server.localAddress()).sync().channel());
            }
            for (EchoClient e : echoes) {
                RdmaTestSupport.await(e.done, 60_000, "an echo", e::state);
            }
            ReceivePool clientPool = pool(clients.get(0));
            assertNotNull(clientPool, "the client's receives come from its loop's shared queue");
            for (RdmaSocketChannel c : clients) {
                assertSame(clientPool, pool(c), "one pool per loop, device and buffer size");
            }
            // pooled credits: each window between the floor and the receive count, the pool holding their sum; read in
            // one task of the loop (a tick between two reads may move a window, the target with it)
            int[] snapshot = RdmaTestSupport.onLoop(clients.get(0), () -> new int[] {reservationsOnLoop(clients),
                    clientPool.reserved(), clientPool.target(), clientPool.posted(), clientPool.lag()});
            assertEquals(snapshot[0], snapshot[1], "the pool holds the sum of its connections' windows");
            assertTrue(snapshot[3] > snapshot[2] - snapshot[4], () -> "refilled once it lacks its lag: what is "
                    + "reserved plus the margin is posted, less than the lag short (more once a tick shrank a window: "
                    + "posted receives stay), target " + snapshot[2] + ", posted " + snapshot[3] + ", lag " + snapshot[4]);
            // the loop's registered bytes: its connections' (their reservations) plus its staging plus what its pool
            // holds beyond the reservations (the margin of at least 16 receives, the spares), which is registered too
            RdmaIoHandler clientLoop = clientHandlers.get(0);
            long margin = (long) ReceivePool.margin(reservations(clients)) * clientPool.bufferSize();
            long[] parts = new long[4];
            RdmaTestSupport.awaitCondition("the client loop counting its pool's margin and spares", () -> {
                registeredParts(clientLoop, clients, clientPool, parts);
                return parts[0] == parts[1] + parts[2] + parts[3] && parts[3] >= margin;
            }, 5_000, () -> "loop " + parts[0] + ", connections " + parts[1] + ", staging " + parts[2]
                    + ", pool beyond the reservations " + parts[3] + " (the margin alone " + margin + ")");
            RdmaIoHandler serverLoop = serverHandlers.get(0);
            ReceivePool serverPool = RdmaTestSupport.onLoop(server, () -> serverLoop.receivePool(0));
            assertNotNull(serverPool);
            int[] serverSide = RdmaTestSupport.onLoop(server, () -> new int[] {reservationsOnLoop(accepted),
                    serverPool.reserved()});
            assertEquals(serverSide[0], serverSide[1], "the accepted connections' reservations");

            for (RdmaSocketChannel c : clients) {
                c.close().sync();
            }
            RdmaTestSupport.awaitCondition("both loops' reservations given back", () ->
                    reserved(clients.get(0), clientPool) == 0 && reserved(server, serverPool) == 0
                            && RdmaIoHandler.counters(clientGroup).queuePairs() == 0
                            && RdmaIoHandler.counters(serverGroup).queuePairs() == 0, 10_000, () -> "client loop "
                    + RdmaIoHandler.counters(clientGroup) + ", server loop " + RdmaIoHandler.counters(serverGroup));
            // a pool nobody reserves in is closed once its completion queue is drained: memory follows the connections
            RdmaTestSupport.awaitCondition("the idle pools closed", () -> pool(server, serverLoop) == null
                    && pool(clients.get(0), clientHandlers.get(0)) == null, 10_000, () -> "client loop "
                    + RdmaIoHandler.counters(clientGroup));
            server.close().sync();
        } finally {
            RdmaTestSupport.shutdown(clientGroup, serverGroup);
        }
    }

    private static Channel echoServer(EventLoopGroup group, List<RdmaSocketChannel> accepted)
            throws InterruptedException {
        return server(group, accepted, false, Echo.INSTANCE);
    }

    /** A client bootstrap without the WRITE ring offered (it excludes pooled credits; -Dorg.nettyrdma.writeRing=true). */
    private static Bootstrap client(EventLoopGroup group) {
        return RdmaTestSupport.plainClientBootstrap(group).option(RdmaChannelOption.WRITE_RING, false);
    }

    /** A server whose accepted channels go to {@code accepted}, with {@code handler}, offering the WRITE ring or not. */
    private static Channel server(EventLoopGroup group, List<RdmaSocketChannel> accepted, boolean writeRing,
            ChannelHandler handler) throws InterruptedException {
        return RdmaTestSupport.plainServerBootstrap(group, group).childOption(RdmaChannelOption.WRITE_RING, writeRing)
                .childHandler(new ChannelInitializer<Channel>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        accepted.add((RdmaSocketChannel) ch);
                        ch.pipeline().addLast(handler);
                    }
                }).bind(RdmaTestSupport.anyPort()).sync().channel();
    }

    /** The receives the channels reserved in their loop's pool, in all; each between the floor and the count. */
    private static int reservations(List<RdmaSocketChannel> channels) throws Exception {
        return RdmaTestSupport.onLoop(channels.get(0), () -> reservationsOnLoop(channels));
    }

    /** The sum of the windows of {@code channels}, all of one loop, read on that loop in one go. */
    private static int reservationsOnLoop(List<RdmaSocketChannel> channels) {
        int sum = 0;
        for (RdmaSocketChannel c : channels) {
            int r = c.resources().reservedReceives();
            assertTrue(r >= CreditWindow.KEPT_FLOOR && r <= COUNT, c + " reserved " + r);
            sum += r;
        }
        return sum;
    }

    private static int reservedReceives(RdmaSocketChannel c) throws Exception {
        return RdmaTestSupport.onLoop(c, () -> c.resources().reservedReceives());
    }

    private static int peakReservedReceives(RdmaSocketChannel c) throws Exception {
        return RdmaTestSupport.onLoop(c, () -> c.resources().peakReservedReceives());
    }

    /**
     * Pooled credits (docs/srq-design.md section 2): a connection starts at 4 receives in the pool, both ends, and its
     * first unstarved tick takes it to the floor of 2 (the accepted side keeps its peer going); a stream grows its
     * windows (up to the limit, 16) as its peer starves for credits; once idle, the windows halve every tick back to
     * the floor, and the pools' reservations and the registered bytes counted with them come down.
     */
    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void aStreamGrowsItsWindowsAndIdleOnesShrinkToTheFloor() throws Exception {
        RdmaIoHandlerConfig config = RdmaTestSupport.config().setSharedReceiveQueue(true);
        EventLoopGroup serverGroup = RdmaTestSupport.newGroup(1, "pooled-server", null, config);
        EventLoopGroup clientGroup = RdmaTestSupport.newGroup(1, "pooled-client", null, config);
        try {
            List<RdmaSocketChannel> accepted = new CopyOnWriteArrayList<>();
            Channel server = echoServer(serverGroup, accepted);
            // an idle connection: both ends at the floor once the handshake is through
            RdmaSocketChannel idle = (RdmaSocketChannel) client(clientGroup)
                    .handler(new ChannelInboundHandlerAdapter()).connect(server.localAddress()).sync().channel();
            RdmaTestSupport.awaitCondition("the idle connection at the floor, both ends", () -> accepted.size() == 1
                    && reserved(idle) == CreditWindow.KEPT_FLOOR
                    && reserved(accepted.get(0)) == CreditWindow.KEPT_FLOOR,
                    10_000, () -> "accepted " + accepted);
            long idleBytes = RdmaTestSupport.onLoop(idle, () -> idle.counters().registeredBytes);

            EchoClient echo = new EchoClient(16 << 20, Pattern.standard(), 99);
            RdmaSocketChannel streaming = (RdmaSocketChannel) client(clientGroup)
                    .handler(echo).connect(server.localAddress()).sync().channel();
            RdmaTestSupport.await(echo.done, 60_000, "the echo", echo::state);
            RdmaSocketChannel streamed = accepted.get(1);
            // grown: as far as the stream needed (the limit on the host; 8 was seen on rxe0). A window grows when its
            // peer starves twice within a tick. On the emulated provider both do. On a native device the timing decides:
            // a JDK 25 CI run on rxe0 grew only the client's window, a JDK 17 one neither (the 16 MiB echo was over
            // within the first tick, at the initial window of 4, its reader returning credits with two messages still
            // to come, so the writer never looked starving). There growth is the slow reader's case
            // (aSlowReaderWhoseWindowShrankWithMessagesUnreadGetsEveryByte), and this one checks the way back.
            int clientPeak = peakReservedReceives(streaming);
            int serverPeak = peakReservedReceives(streamed);
            String peaks = "peak reservations: client " + clientPeak + ", server " + serverPeak;
            if (RdmaTestSupport.isNative()) {
                System.out.println("[" + getClass().getSimpleName() + "] a 16 MiB echo: " + peaks);
            } else {
                assertTrue(clientPeak > CreditWindow.KEPT_FLOOR, "the client's window grew: " + peaks);
                assertTrue(serverPeak > CreditWindow.KEPT_FLOOR, "the server's window grew: " + peaks);
            }
            assertEquals(0, peakReservedReceives(idle), "the idle window never grew");
            assertEquals(0, peakReservedReceives(accepted.get(0)), "the idle window never grew");

            RdmaTestSupport.awaitCondition("the streamed windows back at the floor", () ->
                    reserved(streaming) == CreditWindow.KEPT_FLOOR && reserved(streamed) == CreditWindow.KEPT_FLOOR,
                    10 * RdmaIoHandler.TICK_MILLIS, () -> "client " + reserved(streaming) + ", server "
                    + reserved(streamed));
            assertEquals(2 * CreditWindow.KEPT_FLOOR, reserved(idle, pool(idle)), "the client pool holds two floors");
            assertEquals(2 * CreditWindow.KEPT_FLOOR, reserved(server, pool(streamed)),
                    "the server pool holds two floors");
            // the counters follow the reservation: the idle connection counts 2 receive buffers, not 16
            assertEquals(idleBytes, (long) RdmaTestSupport.onLoop(streaming, () -> streaming.counters()
                    .registeredBytes), "a connection back at the floor counts the registered bytes of an idle one");
            // and after the shrink the connection still carries every byte
            EchoClient again = new EchoClient(1 << 20, Pattern.standard(), 7);
            RdmaSocketChannel third = (RdmaSocketChannel) client(clientGroup)
                    .handler(again).connect(server.localAddress()).sync().channel();
            RdmaTestSupport.await(again.done, 60_000, "the second echo", again::state);
            third.close().sync();
            streaming.close().sync();
            idle.close().sync();
            server.close().sync();
        } finally {
            RdmaTestSupport.shutdown(clientGroup, serverGroup);
        }
    }

    /**
     * The accepted side keeps its peer going (docs/protocol.md, "The floor"): idle from the start, it gives back the
     * credits beyond 1 and the client's window comes down to 2; then it writes first, at its last credit. Only its poke
     * gets it going: the client owes a single control credit (for the returning CREDIT), which a connecting side never
     * returns alone. Every byte arrives, in order.
     */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void anIdleAcceptedSideWritesFirstAtItsLastCredit() throws Exception {
        RdmaIoHandlerConfig config = RdmaTestSupport.config().setSharedReceiveQueue(true);
        EventLoopGroup serverGroup = RdmaTestSupport.newGroup(1, "poke-server", null, config);
        EventLoopGroup clientGroup = RdmaTestSupport.newGroup(1, "poke-client", null, config);
        try {
            List<RdmaSocketChannel> accepted = new CopyOnWriteArrayList<>();
            Channel server = server(serverGroup, accepted, false, new ChannelInboundHandlerAdapter());
            int total = 40 * 1000;
            AtomicInteger got = new AtomicInteger();
            AtomicReference<String> wrong = new AtomicReference<>();
            ChannelInboundHandlerAdapter checker = new ChannelInboundHandlerAdapter() {
                @Override
                public void channelRead(ChannelHandlerContext ctx, Object msg) {
                    ByteBuf b = (ByteBuf) msg;
                    while (b.isReadable()) {
                        int i = got.getAndIncrement();
                        byte v = b.readByte();
                        if (v != (byte) (i % 251)) {
                            wrong.compareAndSet(null, "byte " + i + " is " + v);
                        }
                    }
                    b.release();
                }
            };
            RdmaSocketChannel client = (RdmaSocketChannel) client(clientGroup).handler(checker)
                    .connect(server.localAddress()).sync().channel();
            // the client's window at 2 means the server gave its surplus back: it started with 4 and sent nothing
            RdmaTestSupport.awaitCondition("both windows at the floor of 2", () -> accepted.size() == 1
                    && reserved(client) == CreditWindow.KEPT_FLOOR
                    && reserved(accepted.get(0)) == CreditWindow.KEPT_FLOOR, 10_000, () -> "accepted " + accepted);
            RdmaSocketChannel child = accepted.get(0);
            for (int m = 0; m < 40; m++) {
                ByteBuf b = child.alloc().buffer(1000);
                for (int j = 0; j < 1000; j++) {
                    b.writeByte((m * 1000 + j) % 251);
                }
                child.write(b);
            }
            child.flush();
            RdmaTestSupport.awaitCondition("the server's 40 messages at the client", () -> got.get() >= total, 10_000,
                    () -> "got " + got.get() + " of " + total + " bytes");
            assertEquals(total, got.get());
            assertNull(wrong.get());
            client.close().sync();
            server.close().sync();
        } finally {
            RdmaTestSupport.shutdown(clientGroup, serverGroup);
        }
    }

    /**
     * A slow reader (auto-read off, one 16 KiB buffer a read) whose window grew while it kept up, shrank while it paused
     * with the peer's messages unread, and grows again as it resumes, a read every 2 ms: the growth must not grant the
     * peer more than the receive slots its unread messages leave. Before 2026-12-03 it granted all the new receives,
     * and the peer's next messages found every slot full: "sent more messages than it had credits for" (seen once in
     * Netty's echo test with a reader on another executor; CreditWindowModelTest found the pattern). Every byte
     * arrives, in order, on a connection that stays up.
     */
    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void aSlowReaderWhoseWindowShrankWithMessagesUnreadGetsEveryByte() throws Exception {
        RdmaIoHandlerConfig config = RdmaTestSupport.config().setSharedReceiveQueue(true);
        EventLoopGroup serverGroup = RdmaTestSupport.newGroup(1, "slow-server", null, config);
        EventLoopGroup clientGroup = RdmaTestSupport.newGroup(1, "slow-client", null, config);
        try {
            int total = 8 << 20;
            byte[] pattern = new byte[251 + 16384]; // byte i of the stream is i % 251
            for (int i = 0; i < pattern.length; i++) {
                pattern[i] = (byte) (i % 251);
            }
            AtomicInteger got = new AtomicInteger();
            AtomicReference<String> wrong = new AtomicReference<>();
            AtomicReference<Throwable> error = new AtomicReference<>();
            ChannelInboundHandlerAdapter reader = new ChannelInboundHandlerAdapter() {
                private boolean paused;

                @Override
                public void channelActive(ChannelHandlerContext ctx) {
                    ctx.read();
                }

                @Override
                public void channelRead(ChannelHandlerContext ctx, Object msg) {
                    ByteBuf b = (ByteBuf) msg;
                    int n = b.readableBytes();
                    byte[] bytes = new byte[n]; // in bulk: the tests' paranoid leak detector records every access
                    b.readBytes(bytes).release();
                    int at = got.getAndAdd(n);
                    if (n > 16384 || !Arrays.equals(bytes, 0, n, pattern, at % 251, at % 251 + n)) {
                        wrong.compareAndSet(null, n + " bytes at " + at + " are not the stream's");
                    }
                }

                @Override
                public void channelReadComplete(ChannelHandlerContext ctx) {
                    if (got.get() < total / 4) {
                        ctx.read(); // keeping up: the window grows
                    } else if (!paused) {
                        paused = true; // two ticks unread: the window halves twice, the peer's messages wait
                        ctx.executor().schedule(() -> ctx.read(), 2 * RdmaIoHandler.TICK_MILLIS + 500,
                                TimeUnit.MILLISECONDS);
                    } else {
                        ctx.executor().schedule(() -> ctx.read(), 2, TimeUnit.MILLISECONDS);
                    }
                }

                @Override
                public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
                    error.compareAndSet(null, cause);
                    ctx.close();
                }
            };
            List<RdmaSocketChannel> accepted = new CopyOnWriteArrayList<>();
            Channel server = RdmaTestSupport.plainServerBootstrap(serverGroup, serverGroup)
                    .childOption(RdmaChannelOption.WRITE_RING, false)
                    .childOption(ChannelOption.AUTO_READ, false)
                    .childOption(ChannelOption.RECVBUF_ALLOCATOR, new FixedRecvByteBufAllocator(16384)
                            .maxMessagesPerRead(1))
                    .childHandler(new ChannelInitializer<Channel>() {
                        @Override
                        protected void initChannel(Channel ch) {
                            accepted.add((RdmaSocketChannel) ch);
                            ch.pipeline().addLast(reader);
                        }
                    }).bind(RdmaTestSupport.anyPort()).sync().channel();
            RdmaSocketChannel client = (RdmaSocketChannel) client(clientGroup)
                    .handler(new ChannelInboundHandlerAdapter()).connect(server.localAddress()).sync().channel();
            for (int at = 0; at < total; at += 1024) {
                client.write(client.alloc().buffer(1024).writeBytes(pattern, at % 251, 1024));
            }
            client.flush();
            // (in the guest on rxe0 and siw0 this took 11-13 s)
            RdmaTestSupport.awaitCondition("every byte at the slow reader", () -> got.get() >= total
                    || error.get() != null, 90_000, () -> "got " + got.get() + " of " + total + " bytes");
            assertNull(error.get(), () -> "the connection failed: " + RdmaTestSupport.describe(error.get()));
            assertEquals(total, got.get());
            assertNull(wrong.get());
            RdmaSocketChannel child = accepted.get(0);
            assertTrue(child.isActive() && client.isActive(), "the connection stays up");
            int peak = peakReservedReceives(child);
            assertTrue(peak > CreditWindow.POOLED_INITIAL, "the reader's window grew while it kept up: peak " + peak);
            client.close().sync();
            server.close().sync();
        } finally {
            RdmaTestSupport.shutdown(clientGroup, serverGroup);
        }
    }

    /**
     * Either side with the pool and the other without (a v1 peer for pooled credits): the handshake falls back to v1's
     * windows, the pooled side reserves its whole receive count, and every byte is echoed.
     */
    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void aPooledSideAndOneWithoutThePoolSpeakV1Credits() throws Exception {
        for (boolean serverPooled : new boolean[] {true, false}) {
            EventLoopGroup serverGroup = RdmaTestSupport.newGroup(1, "mixed-server", null,
                    RdmaTestSupport.config().setSharedReceiveQueue(serverPooled));
            EventLoopGroup clientGroup = RdmaTestSupport.newGroup(1, "mixed-client", null,
                    RdmaTestSupport.config().setSharedReceiveQueue(!serverPooled));
            try {
                List<RdmaSocketChannel> accepted = new CopyOnWriteArrayList<>();
                Channel server = echoServer(serverGroup, accepted);
                EchoClient echo = new EchoClient(4 << 20, Pattern.standard(), 5);
                RdmaSocketChannel client = (RdmaSocketChannel) client(clientGroup)
                        .handler(echo).connect(server.localAddress()).sync().channel();
                RdmaTestSupport.await(echo.done, 60_000, "the echo", echo::state);
                RdmaSocketChannel pooledEnd = serverPooled ? accepted.get(0) : client;
                RdmaSocketChannel ownEnd = serverPooled ? client : accepted.get(0);
                assertNotNull(pool(pooledEnd), "server pooled " + serverPooled);
                assertNull(pool(ownEnd));
                assertEquals(COUNT, reservedReceives(pooledEnd), "v1 credits: the whole window stays reserved");
                client.close().sync();
                server.close().sync();
            } finally {
                RdmaTestSupport.shutdown(clientGroup, serverGroup);
            }
        }
    }

    /**
     * With the WRITE ring negotiated a connection on the pool keeps its whole window there (no pooled credits: a ring
     * message waiting unread holds no pool buffer, so a shrinking window's reservation would not count it).
     */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aConnectionWithTheWriteRingKeepsItsWholeWindowInThePool() throws Exception {
        RdmaIoHandlerConfig config = RdmaTestSupport.config().setSharedReceiveQueue(true);
        EventLoopGroup group = RdmaTestSupport.newGroup(1, "ring-pool", null, config);
        try {
            List<RdmaSocketChannel> accepted = new CopyOnWriteArrayList<>();
            Channel server = server(group, accepted, true, Echo.INSTANCE);
            EchoClient echo = new EchoClient(4 << 20, Pattern.standard(), 3);
            RdmaSocketChannel client = (RdmaSocketChannel) RdmaTestSupport.plainClientBootstrap(group)
                    .option(RdmaChannelOption.WRITE_RING, true).handler(echo).connect(server.localAddress()).sync()
                    .channel();
            RdmaTestSupport.await(echo.done, 60_000, "the echo", echo::state);
            boolean ring = RdmaTestSupport.onLoop(client, client::writeRingNegotiated);
            if (ring) {
                assertEquals(COUNT, reservedReceives(client));
                assertEquals(COUNT, reservedReceives(accepted.get(0)));
                assertEquals(0, peakReservedReceives(client), "no pooled window to grow");
            }
            client.close().sync();
            server.close().sync();
            Assumptions.assumeTrue(ring, "the device offers no WRITE ring (no memory windows)");
        } finally {
            RdmaTestSupport.shutdown(group);
        }
    }

    /**
     * A hostile peer: a pooled server starts it at 4 credits; its CREDIT returns more than it holds (5, after the
     * message itself spent one of the 4). The server fails that connection, naming the violation, and frees it; a
     * CREDIT returning credits without pooled credits is a reserved byte that is not 0.
     */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aPeerReturningMoreCreditsThanItHoldsIsCutOff() throws Exception {
        for (boolean pooled : new boolean[] {true, false}) {
            EventLoopGroup group = RdmaTestSupport.newGroup(1, "return-server", null,
                    RdmaTestSupport.config().setSharedReceiveQueue(pooled));
            try {
                RdmaTestSupport.ExceptionRecorder errors = new RdmaTestSupport.ExceptionRecorder();
                List<RdmaSocketChannel> accepted = new CopyOnWriteArrayList<>();
                Channel server = server(group, accepted, false, errors);
                try (HostilePeer peer = new HostilePeer()) {
                    assertEquals(CmEventType.ESTABLISHED, peer.connect((InetSocketAddress) server.localAddress(),
                            RdmaProtocol.handshake(16384, 16, 0, CreditWindow.POOLED_INITIAL, 16)));
                    peer.sendReturn(5);
                    assertNotNull(peer.awaitTornDown(10_000), "the connection is still up: " + peer);
                }
                RdmaTestSupport.awaitCondition("the violation reported", () -> !errors.exceptions.isEmpty(), 10_000,
                        () -> "accepted " + accepted);
                String message = errors.exceptions.peek().getMessage();
                assertTrue(message.contains(pooled ? "returned 5 credits, more than it held (3)"
                        : "reserved byte is 5, not 0"), message);
                RdmaTestSupport.awaitCondition("the connection's resources freed", () ->
                        RdmaIoHandler.counters(group).queuePairs() == 0, 10_000, () -> "" + RdmaIoHandler.counters(
                        group));
                server.close().sync();
            } finally {
                RdmaTestSupport.shutdown(group);
            }
        }
    }

    private static int reserved(RdmaSocketChannel c) {
        try {
            return reservedReceives(c);
        } catch (Exception e) {
            throw new AssertionError(e);
        }
    }

    /** Without the option a connection posts receives of its own. */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void withoutTheOptionEachConnectionHasItsOwnReceives() throws Exception {
        EventLoopGroup group = RdmaTestSupport.newGroup(1, "no-srq", null,
                RdmaTestSupport.config().setSharedReceiveQueue(false));
        try {
            Channel server = RdmaTestSupport.plainServerBootstrap(group, group).childHandler(Echo.INSTANCE)
                    .bind(RdmaTestSupport.anyPort()).sync().channel();
            EchoClient echo = new EchoClient(100_000, Pattern.standard(), 0);
            RdmaSocketChannel client = (RdmaSocketChannel) RdmaTestSupport.plainClientBootstrap(group).handler(echo)
                    .connect(server.localAddress()).sync().channel();
            RdmaTestSupport.await(echo.done, 30_000, "the echo", echo::state);
            assertNull(pool(client));
            client.close().sync();
            server.close().sync();
        } finally {
            RdmaTestSupport.shutdown(group);
        }
    }
}
