package org.nettyrdma.channel;

import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.parallel.Isolated;
import org.nettyrdma.channel.RdmaTestSupport.ExceptionRecorder;
import org.nettyrdma.channel.RdmaTestSupport.Kind;
import org.nettyrdma.channel.RdmaTestSupport.Pattern;
import org.nettyrdma.channel.RdmaTestSupport.StreamReader;
import org.nettyrdma.channel.RdmaTestSupport.StreamWriter;
import org.nettyrdma.channel.RdmaTransportManyConnectionsTest.Echo;
import org.nettyrdma.channel.RdmaTransportManyConnectionsTest.EchoClient;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Lazy send staging end to end (docs/architecture.md, "Send staging"): an idle connection registers its receive
 * buffers and no staging; the connections of a loop share its pool; streams through a pool capped small enough to run
 * out arrive whole (the writes wait, nothing is lost); and a connection closed with SENDs in flight gives their slots
 * back only once its QP is gone.
 */
@Isolated("counts the registered bytes of whole event loops")
class RdmaTransportSendStagingTest {
    private static final int SIZE = 16384;
    private static final int COUNT = 16;
    /** SENDs that a silent link keeps in flight, of a pool of 16 slots. */
    private static final int STUCK = 14;

    /** Each connection's ring, if protocol v2 negotiated it (registered with the connection, not lazily). */
    private static long ring(RdmaSocketChannel ch) throws Exception {
        return RdmaTestSupport.onLoop(ch, ch::writeRingNegotiated) ? ch.config().getRingSize() : 0;
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void idleConnectionsHoldNoStagingAndShareTheLoopsPool() throws Exception {
        int connections = 8;
        // counts each connection's 16 receive buffers
        EventLoopGroup serverGroup = RdmaTestSupport.newGroup(1, "staging-server", null,
                RdmaTestSupport.ownReceivesConfig());
        EventLoopGroup clientGroup = RdmaTestSupport.newGroup(1, "staging-client", null,
                RdmaTestSupport.ownReceivesConfig());
        try {
            Channel server = RdmaTestSupport.plainServerBootstrap(serverGroup, serverGroup).childHandler(Echo.INSTANCE)
                    .bind(RdmaTestSupport.anyPort()).sync().channel();
            Pattern pattern = Pattern.standard();
            List<EchoClient> echoes = new ArrayList<>();
            List<RdmaSocketChannel> clients = new ArrayList<>();
            for (int i = 0; i < connections; i++) {
                EchoClient echo = new EchoClient(3000 + 500 * i, pattern, 1000L * i);
                echoes.add(echo);
                clients.add((RdmaSocketChannel) RdmaTestSupport.plainClientBootstrap(clientGroup).handler(echo)
                        .connect(server.localAddress()).sync().channel());
            }
            for (EchoClient e : echoes) {
                RdmaTestSupport.await(e.done, 20_000, "an echo", e::state);
            }
            long rings = 0;
            long receives = (long) COUNT * SIZE;
            for (RdmaSocketChannel c : clients) {
                long ring = ring(c);
                rings += ring;
                // once its SENDs completed, a connection holds its receive buffers and nothing of the staging: 320 KiB
                // (20 slots of 16 KiB) less than when each connection registered its own
                RdmaTestSupport.awaitCondition("the client's SENDs completed",
                        () -> c.counters().registeredBytes() == receives + ring, 10_000, () -> "" + c.counters());
            }
            StagingPool pool = RdmaTestSupport.onLoop(clients.get(0), () -> clients.get(0).resources().stagingPool());
            for (RdmaSocketChannel c : clients) {
                assertTrue(pool == RdmaTestSupport.onLoop(c, () -> c.resources().stagingPool()),
                        "the connections of a loop share one pool");
            }
            assertEquals(0, (int) RdmaTestSupport.onLoop(clients.get(0), pool::inUse), "no slot out when idle");
            // the loop holds the receives, the rings and one region of the shared pool (with its inline scratch):
            // every connection's SENDs fitted in it
            long poolBytes = RdmaTestSupport.onLoop(clients.get(0), pool::registeredBytes);
            // (no scratch on a device that takes nothing inline)
            assertTrue(poolBytes == StagingPool.MAX_REGION_BYTES + StagingPool.SCRATCH_BYTES
                    || poolBytes == StagingPool.MAX_REGION_BYTES, "one region: " + poolBytes);
            long loop = RdmaIoHandler.counters(clientGroup).registeredBytes();
            assertEquals(connections * receives + rings + poolBytes, loop, () -> "client loop "
                    + RdmaIoHandler.counters(clientGroup));
            assertTrue(poolBytes < connections * (COUNT + 4L) * SIZE, "less than a staging of its own each");
            // a loop quiet for StagingPool.IDLE_TICKS of its ticks gives the region back (the scratch stays)
            long rest = connections * receives + rings + poolBytes - StagingPool.MAX_REGION_BYTES;
            long quietMillis = (StagingPool.IDLE_TICKS + 2L) * RdmaIoHandler.TICK_MILLIS;
            RdmaTestSupport.awaitCondition("the staging region given back once the loop is quiet",
                    () -> RdmaIoHandler.counters(clientGroup).registeredBytes() == rest, quietMillis + 10_000,
                    () -> "client loop " + RdmaIoHandler.counters(clientGroup) + ", expected " + rest);
            assertEquals(0, RdmaTestSupport.onLoop(clients.get(0), pool::registeredBytes) - (poolBytes
                    - StagingPool.MAX_REGION_BYTES), "the pool's own count");

            for (RdmaSocketChannel c : clients) {
                c.close().sync();
            }
            RdmaTestSupport.awaitCondition("the client loop holds nothing once its connections are gone",
                    () -> RdmaIoHandler.counters(clientGroup).queuePairs() == 0
                            && RdmaIoHandler.counters(clientGroup).registeredBytes() == 0, 10_000,
                    () -> "client loop " + RdmaIoHandler.counters(clientGroup));
            server.close().sync();
        } finally {
            RdmaTestSupport.shutdown(clientGroup, serverGroup);
        }
    }

    /**
     * Echoed streams of 64 KiB SENDs on both loops, each loop's staging capped at one region of 16 slots while the 4
     * connections could have 20 SENDs in flight each: the writes stall on the staging (counted), and every byte comes
     * back, in order.
     */
    @Test
    @Timeout(value = 180, unit = TimeUnit.SECONDS)
    void streamsThroughAnExhaustedPoolArriveWhole() throws Exception {
        int connections = 4;
        int size = 65536;
        // at least 4 MiB a stream (64 SENDs) even at the VM's scale: with fewer the streams barely overlap, and the
        // staging may never run out (seen once on rxe0 and once on siw0 at 512 KiB)
        long bytes = Math.max(4L << 20, RdmaTestSupport.scaledBytes(8L << 20, 1 << 20));
        RdmaIoHandlerConfig config = RdmaTestSupport.ownReceivesConfig() // the peer's 16 credits fill the staging
                .setSendStagingBytes(StagingPool.MAX_REGION_BYTES);
        EventLoopGroup serverGroup = RdmaTestSupport.newGroup(1, "exhausted-server", null, config);
        EventLoopGroup clientGroup = RdmaTestSupport.newGroup(1, "exhausted-client", null, config);
        try {
            ExceptionRecorder serverErrors = new ExceptionRecorder();
            Channel server = RdmaTestSupport.plainServerBootstrap(serverGroup, serverGroup)
                    .childOption(RdmaChannelOption.RECEIVE_BUFFER_SIZE, size)
                    .childHandler(new ChannelInitializer<Channel>() {
                        @Override
                        protected void initChannel(Channel ch) {
                            ch.pipeline().addLast(Echo.INSTANCE, serverErrors);
                        }
                    }).bind(RdmaTestSupport.anyPort()).sync().channel();
            Pattern pattern = Pattern.standard();
            List<StreamWriter> writers = new ArrayList<>();
            List<StreamReader> readers = new ArrayList<>();
            List<Channel> clients = new ArrayList<>();
            for (int i = 0; i < connections; i++) {
                StreamWriter w = new StreamWriter(bytes, pattern, RdmaTestSupport.mixedPlan(4 * size), i);
                StreamReader r = new StreamReader(bytes, pattern);
                writers.add(w);
                readers.add(r);
                clients.add(RdmaTestSupport.plainClientBootstrap(clientGroup)
                        .option(RdmaChannelOption.RECEIVE_BUFFER_SIZE, size)
                        .handler(new ChannelInitializer<Channel>() {
                            @Override
                            protected void initChannel(Channel ch) {
                                ch.pipeline().addLast(r, w);
                            }
                        }).connect(server.localAddress()).sync().channel());
            }
            Supplier<String> state = () -> "client loop " + RdmaIoHandler.counters(clientGroup) + ", server loop "
                    + RdmaIoHandler.counters(serverGroup) + ", server errors " + serverErrors.exceptions;
            for (int i = 0; i < connections; i++) {
                RdmaTestSupport.await(writers.get(i).done, 120_000, "stream #" + i + " written", state);
                RdmaTestSupport.await(readers.get(i).done, 120_000, "stream #" + i + " echoed", state);
                assertEquals(writers.get(i).crc.getValue(), readers.get(i).crc.getValue());
            }
            assertTrue(serverErrors.exceptions.isEmpty(), state.get());
            long stalls = RdmaIoHandler.counters(clientGroup).stagingStalls()
                    + RdmaIoHandler.counters(serverGroup).stagingStalls();
            assertTrue(stalls > 0, () -> "the staging never ran out: " + state.get());
            StagingPool pool = RdmaTestSupport.onLoop(clients.get(0),
                    () -> ((RdmaSocketChannel) clients.get(0)).resources().stagingPool());
            assertEquals(16, (int) RdmaTestSupport.onLoop(clients.get(0), pool::capacity),
                    "never more than the cap: one region of 16 slots of 64 KiB");
            for (Channel c : clients) {
                c.close().sync();
            }
            server.close().sync();
        } finally {
            RdmaTestSupport.shutdown(clientGroup, serverGroup);
        }
    }

    /**
     * A connection whose SENDs stay in flight (the link is silent: posted, neither completed nor failed) keeps their
     * slots while its QP lives, however much the other connection of the loop needs them; aborted, it gives them back
     * once its QP is destroyed, and the other stream goes on with them. Emulated provider only (a silent link).
     */
    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void slotsOfSendsInFlightComeBackOnlyWithTheirQueuePair() throws Exception {
        org.junit.jupiter.api.Assumptions.assumeFalse(RdmaTestSupport.isNative(), "silences a link: emulated only");
        int size = 65536;
        RdmaIoHandlerConfig config = RdmaTestSupport.ownReceivesConfig() // the peer's 16 credits fill the staging
                .setSendStagingBytes(StagingPool.MAX_REGION_BYTES);
        List<RdmaIoHandler> clientHandlers = new ArrayList<>();
        EventLoopGroup serverGroup = RdmaTestSupport.newGroup(1, "inflight-server", null,
                RdmaTestSupport.ownReceivesConfig());
        EventLoopGroup clientGroup = RdmaTestSupport.newGroup(1, "inflight-client", clientHandlers, config);
        try {
            Channel server = RdmaTestSupport.plainServerBootstrap(serverGroup, serverGroup)
                    .childOption(RdmaChannelOption.RECEIVE_BUFFER_SIZE, size)
                    .childHandler(Discard.INSTANCE).bind(RdmaTestSupport.anyPort()).sync().channel();
            // protocol v1's SENDs through staging, whatever -Dorg.nettyrdma.writeRing says: the registered bytes
            // counted below are its receives and staging slots, not a ring it would expose
            RdmaSocketChannel silent = (RdmaSocketChannel) RdmaTestSupport.plainClientBootstrap(clientGroup)
                    .option(RdmaChannelOption.WRITE_RING, false)
                    .option(RdmaChannelOption.RECEIVE_BUFFER_SIZE, size)
                    .option(RdmaChannelOption.KEEPALIVE_MILLIS, 120_000) // its silence is not to end it here
                    .handler(new ChannelInboundHandlerAdapter()).connect(server.localAddress()).sync().channel();
            StagingPool pool = RdmaTestSupport.onLoop(silent, () -> {
                clientHandlers.get(0).resources().provider().faults().silenceLink(silent.resources().qp);
                return silent.resources().stagingPool();
            });
            // heap bytes: copied into staging, 14 SENDs of 64 KiB that stay posted (of its 15 data credits)
            List<ChannelFuture> stuck = new ArrayList<>();
            for (int i = 0; i < STUCK; i++) {
                stuck.add(silent.writeAndFlush(io.netty.buffer.Unpooled.buffer(size - 4).writeZero(size - 4)));
            }
            RdmaTestSupport.awaitCondition("the SENDs posted", () -> {
                try {
                    return RdmaTestSupport.onLoop(silent, pool::inUse) == STUCK;
                } catch (Exception e) {
                    throw new AssertionError(e);
                }
            }, 10_000, () -> "" + silent.counters());
            assertEquals(COUNT * (long) size + STUCK * (long) size,
                    (long) RdmaTestSupport.onLoop(silent, () -> silent.counters().registeredBytes()),
                    () -> "its receives and its slots in flight: " + silent.counters());

            // another connection streams through the 2 slots left, and never gets the others
            Pattern pattern = Pattern.standard();
            long bytes = RdmaTestSupport.scaledBytes(4L << 20, 1 << 20);
            StreamWriter w = new StreamWriter(bytes, pattern, RdmaTestSupport.fixedPlan(size, Kind.HEAP), 7);
            Channel busy = RdmaTestSupport.plainClientBootstrap(clientGroup)
                    .option(RdmaChannelOption.RECEIVE_BUFFER_SIZE, size).handler(w)
                    .connect(server.localAddress()).sync().channel();
            RdmaTestSupport.await(w.done, 60_000, "the other stream", w::state);
            assertTrue(RdmaIoHandler.counters(clientGroup).stagingStalls() > 0, "the other stream ran out of slots");
            assertEquals(COUNT * (long) size + STUCK * (long) size,
                    (long) RdmaTestSupport.onLoop(silent, () -> silent.counters().registeredBytes()),
                    () -> "the silent connection's slots stayed out while its SENDs were posted: " + silent.counters());
            // the other's last SENDs give theirs back as they complete; the silent one's stay out
            RdmaTestSupport.awaitCondition("the other connection's slots back", () -> {
                try {
                    return RdmaTestSupport.onLoop(silent, pool::inUse) == STUCK;
                } catch (Exception e) {
                    throw new AssertionError(e);
                }
            }, 10_000, () -> "" + pool);
            assertTrue(stuck.stream().noneMatch(ChannelFuture::isDone) || stuck.stream().allMatch(
                    ChannelFuture::isSuccess), "its writes neither failed nor were lost");

            silent.config().setOption(io.netty.channel.ChannelOption.SO_LINGER, 0); // abortive: destroys the QP
            silent.close().sync();
            RdmaTestSupport.awaitCondition("the aborted connection's slots back", () -> {
                try {
                    return RdmaTestSupport.onLoop(busy, pool::inUse) == 0;
                } catch (Exception e) {
                    throw new AssertionError(e);
                }
            }, 10_000, () -> "" + pool);
            assertEquals(16, (int) RdmaTestSupport.onLoop(busy, pool::capacity), "no region beyond the cap");
            busy.close().sync();
            server.close().sync();
        } finally {
            RdmaTestSupport.shutdown(clientGroup, serverGroup);
        }
    }

    /**
     * A write that waits for staging while its connection has nothing in flight and hears nothing (no completion of its
     * own will come, its keep-alive is off) goes out when another connection's SENDs give their slots back: the pool
     * wakes it. The other connection's completions are delayed, so that its SENDs hold every slot for a while.
     * Emulated provider only (delayed completions).
     */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aWriteWaitingForStagingIsWokenByAnotherConnectionsCompletion() throws Exception {
        org.junit.jupiter.api.Assumptions.assumeFalse(RdmaTestSupport.isNative(), "delays completions: emulated only");
        int size = 65536;
        int count = 32; // 31 data credits: one connection can hold all 16 slots
        RdmaIoHandlerConfig config = RdmaTestSupport.ownReceivesConfig() // the peer's 16 credits fill the staging
                .setSendStagingBytes(StagingPool.MAX_REGION_BYTES);
        List<RdmaIoHandler> clientHandlers = new ArrayList<>();
        EventLoopGroup serverGroup = RdmaTestSupport.newGroup(1, "wake-server", null,
                RdmaTestSupport.ownReceivesConfig());
        EventLoopGroup clientGroup = RdmaTestSupport.newGroup(1, "wake-client", clientHandlers, config);
        try {
            Channel server = RdmaTestSupport.plainServerBootstrap(serverGroup, serverGroup)
                    .childOption(RdmaChannelOption.RECEIVE_BUFFER_SIZE, size)
                    .childOption(RdmaChannelOption.RECEIVE_BUFFER_COUNT, count)
                    .childHandler(Discard.INSTANCE).bind(RdmaTestSupport.anyPort()).sync().channel();
            RdmaSocketChannel holder = (RdmaSocketChannel) RdmaTestSupport.plainClientBootstrap(clientGroup)
                    .option(RdmaChannelOption.RECEIVE_BUFFER_SIZE, size)
                    .option(RdmaChannelOption.RECEIVE_BUFFER_COUNT, count)
                    .handler(new ChannelInboundHandlerAdapter()).connect(server.localAddress()).sync().channel();
            RdmaSocketChannel waiter = (RdmaSocketChannel) RdmaTestSupport.plainClientBootstrap(clientGroup)
                    .option(RdmaChannelOption.RECEIVE_BUFFER_SIZE, size)
                    .option(RdmaChannelOption.RECEIVE_BUFFER_COUNT, count)
                    .option(RdmaChannelOption.KEEPALIVE_MILLIS, 0)
                    .handler(new ChannelInboundHandlerAdapter()).connect(server.localAddress()).sync().channel();
            RdmaIoHandler handler = clientHandlers.get(0);
            org.nettyrdma.verbs.Device device = handler.resources().provider().devices().stream()
                    .filter(d -> d.name().equals("emu0")).findFirst().orElseThrow();
            RdmaIoHandler.DeviceQueues queues = RdmaTestSupport.onLoop(holder,
                    () -> handler.deviceQueues(device, null, 0));
            StagingPool pool = RdmaTestSupport.onLoop(holder, () -> holder.resources().stagingPool());
            handler.resources().provider().faults().delayCompletions(queues.cq, TimeUnit.MILLISECONDS.toNanos(500));
            try {
                for (int i = 0; i < 16; i++) {
                    holder.write(io.netty.buffer.Unpooled.buffer(size - 4).writeZero(size - 4));
                }
                holder.flush();
                boolean[] waitingAndSolicitedOnly = RdmaTestSupport.onLoop(waiter, () -> {
                    waiter.writeAndFlush(io.netty.buffer.Unpooled.buffer(1000).writeZero(1000));
                    return new boolean[] {pool.waiterCount() > 0, handler.solicitedOnly()};
                });
                assertTrue(waitingAndSolicitedOnly[0], () -> "the write did not wait for staging: " + pool);
                // the holder's SENDs are copied (settled at post): only the pool's waiter makes the loop wake for them
                assertFalse(waitingAndSolicitedOnly[1], "the loop would arm for solicited completions only while a "
                        + "write waits for a staging slot that a completion gives back");
                long expected = 16L * (size - 4) + 1000;
                RdmaTestSupport.awaitCondition("every byte at the server, the waiting write's too",
                        () -> RdmaIoHandler.counters(serverGroup).bytesReceived() == expected, 10_000,
                        () -> "server loop " + RdmaIoHandler.counters(serverGroup) + ", waiter " + waiter.counters()
                                + ", " + pool);
                assertTrue(waiter.counters().stagingStalls() > 0, () -> "the write never waited: " + pool);
            } finally {
                handler.resources().provider().faults().delayCompletions(queues.cq, 0);
            }
            holder.close().sync();
            waiter.close().sync();
            server.close().sync();
        } finally {
            RdmaTestSupport.shutdown(clientGroup, serverGroup);
        }
    }

    @io.netty.channel.ChannelHandler.Sharable
    private static final class Discard extends ChannelInboundHandlerAdapter {
        static final Discard INSTANCE = new Discard();

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ((ByteBuf) msg).release();
        }
    }
}
