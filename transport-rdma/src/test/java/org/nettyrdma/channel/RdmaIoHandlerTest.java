package org.nettyrdma.channel;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelOption;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.IoHandle;
import io.netty.channel.IoHandler;
import io.netty.channel.IoHandlerContext;
import io.netty.channel.IoHandlerFactory;
import io.netty.channel.IoRegistration;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.util.concurrent.ThreadAwareExecutor;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.parallel.Execution;
import org.junit.jupiter.api.parallel.ExecutionMode;
import org.junit.jupiter.api.parallel.Isolated;
import org.nettyrdma.verbs.CompletionArray;
import org.nettyrdma.verbs.Device;
import org.nettyrdma.verbs.Errno;
import org.nettyrdma.verbs.FaultInjector;
import org.nettyrdma.verbs.QueuePair;
import org.nettyrdma.verbs.WorkRequestList;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/** What the event loop does when its completion queue fails (emulated provider: it injects the overrun). */
@Isolated("watches the handler's log")
@Execution(ExecutionMode.SAME_THREAD)
class RdmaIoHandlerTest {

    /**
     * A spinning loop looks at its CM event channel at most once per {@link RdmaIoHandler#CM_POLL_INTERVAL_NANOS}, not
     * on every turn of the spin: on the native provider each look is a system call. Before, a 2 ms spin made
     * thousands of looks; now about 40, plus one after each wait.
     */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aSpinningLoopLooksAtItsCmChannelOncePerInterval() throws Exception {
        long spinNanos = TimeUnit.MILLISECONDS.toNanos(2);
        EventLoopGroup group = RdmaTestSupport.newGroup(1, "cm-interval", null,
                RdmaTestSupport.config().setBusyPollNanos(spinNanos));
        try {
            io.netty.channel.EventLoop loop = group.next();
            loop.submit(() -> { }).sync(); // started
            RdmaCounters before = RdmaIoHandler.counters(group);
            long start = System.nanoTime();
            int idlePeriods = 20;
            for (int i = 0; i < idlePeriods; i++) {
                loop.submit(() -> { }).sync(); // the loop runs it, then spins 2 ms, then waits
                Thread.sleep(5);
            }
            long elapsed = System.nanoTime() - start;
            RdmaCounters after = RdmaIoHandler.counters(group);
            long spins = after.spinsMissed() + after.spinsFound() - before.spinsMissed() - before.spinsFound();
            long waits = after.waits() - before.waits();
            long looks = after.cmPolls() - before.cmPolls();
            assertTrue(spins >= idlePeriods / 2, () -> "the loop spun " + spins + " times: " + after);
            long bound = elapsed / RdmaIoHandler.CM_POLL_INTERVAL_NANOS + waits + 2 * idlePeriods + 2;
            assertTrue(looks <= bound, () -> looks + " looks at the CM channel in " + elapsed / 1000 + " µs, "
                    + spins + " spins and " + waits + " waits; at most " + bound + " expected: " + after);
        } finally {
            RdmaTestSupport.shutdown(group);
        }
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void overrunCompletionQueueFailsItsChannelsOnceAndTheLoopGoesOn() throws Exception {
        assumeTrue(!RdmaTestSupport.isNative(), "the overrun is injected: emulated provider only");
        Logger log = (Logger) LoggerFactory.getLogger(RdmaIoHandler.class);
        ListAppender<ILoggingEvent> logged = new ListAppender<>();
        logged.start();
        log.addAppender(logged);
        List<RdmaIoHandler> clientHandlers = new CopyOnWriteArrayList<>();
        EventLoopGroup serverGroup = RdmaTestSupport.newGroup(1, "overrun-server");
        EventLoopGroup clientGroup = RdmaTestSupport.newGroup(1, "overrun-client", clientHandlers);
        try {
            Channel server = RdmaTestSupport.serverBootstrap(serverGroup, serverGroup)
                    .childHandler(new Echo()).bind(RdmaTestSupport.anyPort()).sync().channel();
            InetSocketAddress address = (InetSocketAddress) server.localAddress();
            Client a = Client.connect(clientGroup, address);
            Client b = Client.connect(clientGroup, address);
            a.echo("a before");
            b.echo("b before");

            RdmaIoHandler handler = clientHandlers.get(0);
            Device device = handler.resources().provider().devices().stream()
                    .filter(d -> d.name().equals("emu0")).findFirst().orElseThrow();
            RdmaIoHandler.DeviceQueues dead = RdmaTestSupport.onLoop(a.channel, () -> handler.deviceQueues(device, null, 0));
            handler.resources().provider().faults().overrunCompletionQueue(dead.cq);
            a.channel.eventLoop().execute(() -> { }); // wakes the loop, which polls the queue

            for (Client c : List.of(a, b)) {
                assertTrue(c.channel.closeFuture().await(10, TimeUnit.SECONDS), "a channel on the overrun CQ is open");
                Throwable cause = c.failure.get(1, TimeUnit.SECONDS);
                assertInstanceOf(IOException.class, cause, () -> RdmaTestSupport.describe(cause));
                assertTrue(cause.getMessage().contains("completion queue of emu0 failed")
                        && cause.getMessage().contains("EOVERFLOW")
                        && cause.getMessage().contains("overran"), cause.getMessage());
            }
            RdmaTestSupport.awaitCondition("the dead completion queue closed",
                    () -> pollOnLoop(a.channel, dead) == -Errno.EBADF, 10_000, () -> "");

            // a new connection on the same loop gets a new completion queue and works
            Client c = Client.connect(clientGroup, address);
            assertTrue(c.channel.eventLoop() == a.channel.eventLoop());
            c.echo("c after");
            assertNotSame(dead, RdmaTestSupport.onLoop(c.channel, () -> handler.deviceQueues(device, null, 0)));
            c.channel.close().sync();

            Thread.sleep(300); // a loop that spun on the dead queue would have logged it many times by now
            List<String> warnings = logged.list.stream().filter(e -> e.getLevel().isGreaterOrEqual(Level.WARN))
                    .map(ILoggingEvent::getFormattedMessage).toList();
            assertEquals(1, warnings.size(), () -> "warnings: " + warnings);
            assertTrue(warnings.get(0).startsWith("2 channel(s) fail: "), warnings.get(0));
            server.close().sync();
        } finally {
            log.detachAppender(logged);
            RdmaTestSupport.shutdown(clientGroup, serverGroup);
        }
    }

    /**
     * The device reports a loop's shared receive queue in error ({@code IBV_EVENT_SRQ_ERR}, injected; nothing else
     * changes, as on a device whose QPs then neither fail nor receive): at the loop's next tick the connections that
     * receive from it fail with an error naming it, the loop logs it once, the queue is closed once they are gone, and
     * the next connection on that loop gets a new queue and works. The peers are told (their channels close).
     */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aFailedSharedReceiveQueueFailsItsConnectionsAndTheNextGetsANewOne() throws Exception {
        assumeTrue(!RdmaTestSupport.isNative(), "the queue's error is injected: emulated provider only");
        Logger log = (Logger) LoggerFactory.getLogger(RdmaIoHandler.class);
        ListAppender<ILoggingEvent> logged = new ListAppender<>();
        logged.start();
        log.addAppender(logged);
        RdmaIoHandlerConfig config = RdmaTestSupport.config().setSharedReceiveQueue(true);
        List<RdmaSocketChannel> accepted = new CopyOnWriteArrayList<>();
        EventLoopGroup serverGroup = RdmaTestSupport.newGroup(1, "srq-error-server", null, config);
        List<RdmaIoHandler> clientHandlers = new CopyOnWriteArrayList<>();
        EventLoopGroup clientGroup = RdmaTestSupport.newGroup(1, "srq-error-client", clientHandlers, config);
        try {
            Channel server = RdmaTestSupport.serverBootstrap(serverGroup, serverGroup)
                    .childHandler(new ChannelInitializer<Channel>() {
                        @Override
                        protected void initChannel(Channel ch) {
                            accepted.add((RdmaSocketChannel) ch);
                            ch.pipeline().addLast(new Echo());
                        }
                    }).bind(RdmaTestSupport.anyPort()).sync().channel();
            InetSocketAddress address = (InetSocketAddress) server.localAddress();
            Client a = Client.connect(clientGroup, address);
            Client b = Client.connect(clientGroup, address);
            a.echo("a before");
            b.echo("b before");
            RdmaSocketChannel ac = (RdmaSocketChannel) a.channel;
            ReceivePool failed = RdmaTestSupport.onLoop(ac, () -> ac.resources().receivePool());
            assertNotNull(failed, "the client's receives come from its loop's shared receive queue");
            assertSame(failed, RdmaTestSupport.onLoop(ac, () -> ((RdmaSocketChannel) b.channel).resources()
                    .receivePool()));
            clientHandlers.get(0).resources().provider().faults().failSharedReceiveQueue(failed.queue());

            for (Client c : List.of(a, b)) {
                assertTrue(c.channel.closeFuture().await(10, TimeUnit.SECONDS), "a channel of the failed queue is open");
                Throwable cause = c.failure.get(1, TimeUnit.SECONDS);
                assertInstanceOf(IOException.class, cause, () -> RdmaTestSupport.describe(cause));
                assertTrue(cause.getMessage().contains("shared receive queue")
                        && cause.getMessage().contains("IBV_EVENT_SRQ_ERR"), cause.getMessage());
            }
            for (RdmaSocketChannel s : accepted) {
                assertTrue(s.closeFuture().await(10, TimeUnit.SECONDS), "the peer of a failed connection is open");
            }
            RdmaTestSupport.awaitCondition("the failed queue closed", () -> closed(ac, failed), 10_000, () -> "");

            // the next connection on the same loop gets a new queue and works
            Client c = Client.connect(clientGroup, address);
            assertTrue(c.channel.eventLoop() == a.channel.eventLoop());
            c.echo("c after");
            RdmaSocketChannel cc = (RdmaSocketChannel) c.channel;
            ReceivePool fresh = RdmaTestSupport.onLoop(cc, () -> cc.resources().receivePool());
            assertNotNull(fresh);
            assertNotSame(failed, fresh);
            c.channel.close().sync();

            List<String> warnings = logged.list.stream().filter(e -> e.getLevel().isGreaterOrEqual(Level.WARN))
                    .map(ILoggingEvent::getFormattedMessage).toList();
            assertEquals(1, warnings.size(), () -> "warnings: " + warnings);
            assertTrue(warnings.get(0).startsWith("a shared receive queue of emu0 failed (IBV_EVENT_SRQ_ERR)"),
                    warnings.get(0));
            server.close().sync();
        } finally {
            log.detachAppender(logged);
            RdmaTestSupport.shutdown(clientGroup, serverGroup);
        }
    }

    /**
     * A shared receive pool is closed only once nothing of its QPs can still come: not by the poll whose batch destroyed
     * its last QP. The one connection of a client loop's pool fails on a completion (a message too short for a header,
     * injected), and while that batch is handled a second receive of the pool completes for the same QP (injected: what
     * rxe and siw leave in a queue from a QP destroyed after the poll). The pool must still be open once that poll is
     * over, so that the leftover goes back to it, never to a new pool with the same index whose receive of the same
     * wr_id is posted (its buffer would be taken and reused while the device may still write into it). It closes later,
     * after the loop's tick drained the queues, and the loop goes on.
     */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aPoolStaysOpenThroughThePollWhoseBatchDestroyedItsLastQueuePair() throws Exception {
        assumeTrue(!RdmaTestSupport.isNative(), "completions are injected: emulated provider only");
        RdmaIoHandlerConfig config = RdmaTestSupport.config().setSharedReceiveQueue(true);
        EventLoopGroup serverGroup = RdmaTestSupport.newGroup(1, "srq-leftover-server", null, config);
        List<RdmaIoHandler> clientHandlers = new CopyOnWriteArrayList<>();
        EventLoopGroup clientGroup = RdmaTestSupport.newGroup(1, "srq-leftover-client", clientHandlers, config);
        try {
            Channel server = RdmaTestSupport.serverBootstrap(serverGroup, serverGroup).childHandler(new Echo())
                    .bind(RdmaTestSupport.anyPort()).sync().channel();
            InetSocketAddress address = (InetSocketAddress) server.localAddress();
            Client a = Client.connect(clientGroup, address);
            a.echo("before");
            RdmaSocketChannel ac = (RdmaSocketChannel) a.channel;
            RdmaIoHandler handler = clientHandlers.get(0);
            FaultInjector faults = handler.resources().provider().faults();
            ReceivePool pool = RdmaTestSupport.onLoop(ac, () -> ac.resources().receivePool());
            assertNotNull(pool, "the client's receives come from its loop's shared receive queue");
            long[] wrIds = RdmaTestSupport.onLoop(ac, () -> postedWrIds(pool, 2));
            int qpNum = RdmaTestSupport.onLoop(ac, () -> ac.resources().qp.qpNum());
            CompletableFuture<Boolean> openAfterThatPoll = new CompletableFuture<>();
            ac.pipeline().addFirst(new ChannelInboundHandlerAdapter() {
                @Override
                public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
                    // within the batch that failed the connection: the leftover, then a look once the poll is over
                    faults.addReceiveCompletion(handler.completionQueue(0), wrIds[1], 64, qpNum);
                    ctx.channel().eventLoop().execute(() -> openAfterThatPoll.complete(
                            handler.receivePool(pool.index()) == pool && pool.posted() > 0));
                    ctx.fireExceptionCaught(cause);
                }
            });
            RdmaTestSupport.onLoop(ac, () -> {
                faults.addReceiveCompletion(handler.completionQueue(0), wrIds[0], 1, qpNum);
                return null;
            });
            Throwable cause = a.failure.get(10, TimeUnit.SECONDS);
            assertInstanceOf(RdmaProtocolViolationException.class, cause, () -> RdmaTestSupport.describe(cause));
            assertTrue(openAfterThatPoll.get(10, TimeUnit.SECONDS), "the pool was closed by the poll whose batch "
                    + "destroyed its last QP, with a receive of that QP still in the completion queue");
            RdmaTestSupport.awaitCondition("the idle pool closed", () -> closed(ac, pool), 10_000, () -> "");

            Client b = Client.connect(clientGroup, address);
            b.echo("after");
            b.channel.close().sync();
            server.close().sync();
        } finally {
            RdmaTestSupport.shutdown(clientGroup, serverGroup);
        }
    }

    /** The wr_ids of the first {@code n} posted receives of {@code pool} (on its loop). */
    private static long[] postedWrIds(ReceivePool pool, int n) {
        long[] ids = new long[n];
        int found = 0;
        for (int slot = 0; found < n && slot < pool.capacity(); slot++) {
            if (pool.isPosted(slot)) {
                ids[found++] = pool.wrId(slot);
            }
        }
        assertEquals(n, found, "posted receives in the pool");
        return ids;
    }

    /**
     * Whether {@code pool} is closed with its queue: nothing reserved or posted, and a post to the queue answers EBADF
     * (tried only once nothing is posted, which a pool still open would not be).
     */
    private static boolean closed(Channel loopOf, ReceivePool pool) {
        try {
            return RdmaTestSupport.onLoop(loopOf, () -> pool.reserved() == 0 && pool.posted() == 0
                    && pool.queue().postRecv(new WorkRequestList(1, 1), 0, 1) == -Errno.EBADF);
        } catch (Exception e) {
            throw new AssertionError(e);
        }
    }

    private static int pollOnLoop(Channel channel, RdmaIoHandler.DeviceQueues q) {
        try {
            return RdmaTestSupport.onLoop(channel, () -> q.cq.poll(new CompletionArray(1), 1));
        } catch (Exception e) {
            throw new AssertionError(e);
        }
    }

    /** Echoes what it reads. */
    static final class Echo extends ChannelInboundHandlerAdapter {
        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ctx.writeAndFlush(msg);
        }

        @Override
        public boolean isSharable() {
            return true;
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            ctx.close();
        }
    }

    /**
     * A loop can end without {@code prepareToDestroy} (Netty 4.2's does when a shutdown comes while it runs its tasks;
     * {@code RdmaIoHandler} then closes its channels from a shutdown hook or a task instead:
     * RdmaTransportShutdownTest); where none of that ran, the handler's {@code destroy} still closes the channels left
     * on it, and their connections free their QP and memory. Here a handler that never gets {@code prepareToDestroy},
     * on an executor that is no {@code EventExecutor} (no hook, no way to see the shutdown coming), stands for such a
     * loop.
     */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aLoopEndingWithoutPrepareToDestroyStillFreesItsConnections() throws Exception {
        IoHandlerFactory rdma = RdmaIoHandler.newFactory(RdmaTestSupport.config());
        EventLoopGroup clientGroup = new MultiThreadIoEventLoopGroup(1, executor -> {
            IoHandler h = rdma.newHandler(new ThreadAwareExecutor() {
                @Override
                public boolean isExecutorThread(Thread thread) {
                    return executor.isExecutorThread(thread);
                }

                @Override
                public void execute(Runnable task) {
                    executor.execute(task);
                }
            });
            return new IoHandler() {
                @Override
                public void initialize() {
                    h.initialize();
                }

                @Override
                public int run(IoHandlerContext context) {
                    return h.run(context);
                }

                @Override
                public void destroy() {
                    h.destroy(); // and no prepareToDestroy before it
                }

                @Override
                public IoRegistration register(IoHandle handle) throws Exception {
                    return h.register(handle);
                }

                @Override
                public void wakeup() {
                    h.wakeup();
                }

                @Override
                public boolean isCompatible(Class<? extends IoHandle> handleType) {
                    return h.isCompatible(handleType);
                }
            };
        });
        EventLoopGroup serverGroup = RdmaTestSupport.newGroup(1, "no-prepare-server");
        try {
            Channel server = RdmaTestSupport.serverBootstrap(serverGroup, serverGroup)
                    .childHandler(new Echo()).bind(RdmaTestSupport.anyPort()).sync().channel();
            Client a = Client.connect(clientGroup, (InetSocketAddress) server.localAddress());
            a.echo("before the loop ends");
            RdmaSocketChannel channel = (RdmaSocketChannel) a.channel;
            assertEquals(1, channel.counters().queuePairs());
            clientGroup.shutdownGracefully(0, 1, TimeUnit.SECONDS).syncUninterruptibly();
            assertFalse(channel.isOpen(), "the channel is closed with its loop");
            assertEquals(0, channel.counters().queuePairs(), () -> "" + channel.counters());
            assertEquals(0, channel.counters().registeredBytes(), () -> "" + channel.counters());
        } finally {
            clientGroup.shutdownGracefully(0, 1, TimeUnit.SECONDS);
            RdmaTestSupport.shutdown(serverGroup);
        }
    }

    /**
     * Destroying a QP may keep the calling thread long in the kernel (SoftRoCE: 1.9 s for a QP whose peer host was
     * killed). The loop hands it to a teardown thread and serves its other channels meanwhile: here destroying A's
     * QP takes 2 s, and while it goes on, B on the same client loop echoes ten times within 1.5 s. A's memory and QP
     * are counted back once the destruction returned.
     */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aQueuePairSlowToDestroyDoesNotStallItsLoop() throws Exception {
        assumeFalse(RdmaTestSupport.isNative(), "only the emulated fabric can be made slow to destroy a QP");
        EventLoopGroup clientGroup = RdmaTestSupport.newGroup(1, "slow-teardown-client");
        EventLoopGroup serverGroup = RdmaTestSupport.newGroup(1, "slow-teardown-server");
        try {
            InetSocketAddress server = echoServer(serverGroup);
            Client a = Client.connect(clientGroup, server);
            Client b = Client.connect(clientGroup, server);
            a.echo("a");
            b.echo("b");
            RdmaSocketChannel channelA = delayDestroy(a, 2_000);
            a.channel.config().setOption(ChannelOption.SO_LINGER, 0); // abortive: the teardown begins within close()
            long start = System.nanoTime();
            ChannelFuture closed = a.channel.close();
            for (int i = 0; i < 10; i++) {
                b.echo("b" + i);
            }
            long echoedMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
            assertTrue(echoedMs < 1_500, "B's ten echoes took " + echoedMs + " ms while A's QP was being destroyed: "
                    + "the loop waited for it");
            closed.sync();
            RdmaTestSupport.awaitCondition("A's QP and memory counted back", () -> channelA.counters().queuePairs() == 0
                    && channelA.counters().registeredBytes() == 0, 10_000, () -> "" + channelA.counters());
            assertTrue(RdmaIoHandler.counters(clientGroup).slowTeardowns() >= 1,
                    () -> "" + RdmaIoHandler.counters(clientGroup));
            b.echo("after A's teardown");
            assertEquals(1, RdmaIoHandler.counters(clientGroup).queuePairs());
        } finally {
            RdmaTestSupport.shutdown(clientGroup);
            RdmaTestSupport.shutdown(serverGroup);
        }
    }

    /**
     * A loop that ends while a connection's QP is still being destroyed on a teardown thread waits for it, then frees
     * the connection's memory, its own queues and staging: nothing is freed under a QP that may still use it.
     */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aLoopEndingWaitsForTheTeardownsUnderWay() throws Exception {
        assumeFalse(RdmaTestSupport.isNative(), "only the emulated fabric can be made slow to destroy a QP");
        EventLoopGroup clientGroup = RdmaTestSupport.newGroup(1, "slow-teardown-ending");
        EventLoopGroup serverGroup = RdmaTestSupport.newGroup(1, "slow-teardown-ending-server");
        try {
            Client a = Client.connect(clientGroup, echoServer(serverGroup));
            a.echo("before the loop ends");
            RdmaSocketChannel channel = delayDestroy(a, 1_000);
            clientGroup.shutdownGracefully(0, 1, TimeUnit.SECONDS).syncUninterruptibly();
            assertFalse(channel.isOpen(), "the channel is closed with its loop");
            assertEquals(0, channel.counters().queuePairs(), () -> "" + channel.counters());
            assertEquals(0, channel.counters().registeredBytes(), () -> "" + channel.counters());
        } finally {
            RdmaTestSupport.shutdown(clientGroup);
            RdmaTestSupport.shutdown(serverGroup);
        }
    }

    /** An echo server on {@code group}; its address. */
    private static InetSocketAddress echoServer(EventLoopGroup group) throws InterruptedException {
        return (InetSocketAddress) RdmaTestSupport.serverBootstrap(group, group).childHandler(new Echo())
                .bind(RdmaTestSupport.anyPort()).sync().channel().localAddress();
    }

    /** Makes the destruction of {@code client}'s QP keep the destroying thread {@code millis}; the client's channel. */
    private static RdmaSocketChannel delayDestroy(Client client, long millis) throws Exception {
        RdmaSocketChannel channel = (RdmaSocketChannel) client.channel;
        QueuePair qp = RdmaTestSupport.onLoop(channel, () -> channel.resources().qp);
        channel.handler.resources().provider().faults().delayDestroy(qp, millis);
        return channel;
    }

    /** A client channel that sends a string and waits for it to come back, and records its failure. */
    static final class Client extends SimpleChannelInboundHandler<ByteBuf> {
        final CompletableFuture<Throwable> failure = new CompletableFuture<>();
        private final StringBuilder received = new StringBuilder();
        private CompletableFuture<String> expected;
        private String awaited;
        Channel channel;

        static Client connect(EventLoopGroup group, InetSocketAddress address) throws Exception {
            Client c = new Client();
            c.channel = RdmaTestSupport.plainClientBootstrap(group).handler(c).connect(address).sync().channel();
            return c;
        }

        void echo(String text) throws Exception {
            CompletableFuture<String> f = new CompletableFuture<>();
            channel.eventLoop().submit(() -> {
                received.setLength(0);
                awaited = text;
                expected = f;
            }).sync();
            channel.writeAndFlush(Unpooled.copiedBuffer(text, StandardCharsets.US_ASCII)).sync();
            assertEquals(text, f.get(10, TimeUnit.SECONDS));
        }

        @Override
        protected void channelRead0(ChannelHandlerContext ctx, ByteBuf msg) {
            received.append(msg.toString(StandardCharsets.US_ASCII));
            if (expected != null && received.length() >= awaited.length()) {
                expected.complete(received.toString());
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            failure.complete(cause);
        }
    }
}
