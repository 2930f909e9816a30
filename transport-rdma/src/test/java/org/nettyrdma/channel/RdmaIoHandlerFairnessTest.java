package org.nettyrdma.channel;

import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.EventLoop;
import io.netty.channel.EventLoopGroup;
import io.netty.util.ReferenceCountUtil;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.parallel.Execution;
import org.junit.jupiter.api.parallel.ExecutionMode;
import org.junit.jupiter.api.parallel.Isolated;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.net.SocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Fairness of one event loop: one connection streaming flat out (the firehose) must not starve 100 ping-pong
 * connections on the same client and server loops. Every ping-pong connection must complete its round trips, checked
 * byte by byte, while the firehose keeps streaming; the firehose must keep moving too. Progress only: the round-trip
 * latencies with and without the firehose are the benchmark's (benchmarks' FairnessBenchmark, docs/performance.md).
 *
 * <p>Named {@code RdmaIoHandler*}, not {@code RdmaTransport*}, so that the VM's transport runs (transport.sh) do not
 * pick it up: it was written and run on the emulated provider only; on rxe0 or siw0 under TCG its time limits are
 * untested. {@code -Dorg.nettyrdma.test.provider=native} with an address still runs it there by hand.
 */
@Isolated("timing-sensitive: one firehose and 100 connections on two loops")
@Execution(ExecutionMode.SAME_THREAD)
class RdmaIoHandlerFairnessTest {
    private static final int PING_SIZE = 64;
    private static final int ROUND_TRIPS = 50;
    private static final int FIREHOSE_MESSAGE = 64 * 1024;

    @ParameterizedTest(name = "firehose from the {0}")
    @ValueSource(strings = {"client", "server"})
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void pingPongsProgressWhileOneConnectionStreamsFlatOut(String firehoseFrom) throws Exception {
        boolean fromClient = firehoseFrom.equals("client");
        int connections = RdmaTestSupport.scaledConnections(100);
        EventLoopGroup serverGroup = RdmaTestSupport.newGroup(1, "fair-server");
        EventLoopGroup clientGroup = RdmaTestSupport.newGroup(1, "fair-client");
        AtomicLong streamed = new AtomicLong();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        try {
            Firehose source = new Firehose(failure);
            Channel echo = RdmaTestSupport.serverBootstrap(serverGroup, serverGroup).childHandler(new Echo(failure))
                    .bind(RdmaTestSupport.anyPort()).sync().channel();
            Channel stream = RdmaTestSupport.serverBootstrap(serverGroup, serverGroup)
                    .childHandler(fromClient ? new Sink(streamed, failure) : source)
                    .bind(RdmaTestSupport.anyPort()).sync().channel();
            EventLoop clientLoop = clientGroup.next();
            List<Ping> pings = new ArrayList<>();
            for (int i = 0; i < connections; i++) {
                Ping p = new Ping(i, failure);
                connect(clientLoop, echo.localAddress(), p);
                pings.add(p);
            }
            Channel firehose = connect(clientLoop, stream.localAddress(),
                    fromClient ? source : new Sink(streamed, failure));
            RdmaTestSupport.awaitCondition("the firehose streams", () -> streamed.get() > 16L * FIREHOSE_MESSAGE,
                    30_000, () -> "streamed " + streamed.get() + " bytes");

            long streamedBefore = streamed.get();
            for (Ping p : pings) {
                clientLoop.execute(p::send);
            }
            long startNs = System.nanoTime();
            RdmaTestSupport.awaitCondition("every ping-pong connection completes " + ROUND_TRIPS + " round trips while "
                    + "the firehose streams", () -> pings.stream().allMatch(p -> p.done.isDone()), 60_000,
                    () -> state(pings, streamed.get() - streamedBefore, failure.get()));
            System.err.printf("fairness (firehose from the %s): %d connections x %d round trips in %d ms; firehose "
                    + "%d bytes meanwhile%n", firehoseFrom, connections, ROUND_TRIPS,
                    (System.nanoTime() - startNs) / 1_000_000, streamed.get() - streamedBefore);
            long during = streamed.get() - streamedBefore;
            assertNull(failure.get(), () -> RdmaTestSupport.describe(failure.get()));
            assertTrue(firehose.isActive(), "the firehose connection closed");
            // the firehose was not starved either: it went on while the ping-pongs ran, and still does
            assertTrue(during >= 4L * FIREHOSE_MESSAGE, "the firehose streamed only " + during
                    + " bytes while " + connections + " connections made " + ROUND_TRIPS + " round trips each");
            long after = streamed.get();
            RdmaTestSupport.awaitCondition("the firehose still streams", () -> streamed.get() > after
                    + 4L * FIREHOSE_MESSAGE, 30_000, () -> "streamed " + (streamed.get() - after) + " bytes");
            source.stopped = true;
            assertTrue(firehose.close().await(30, TimeUnit.SECONDS), "the firehose did not close within 30 s");
        } finally {
            RdmaTestSupport.shutdown(clientGroup, serverGroup);
        }
    }

    private static String state(List<Ping> pings, long streamed, Throwable failure) {
        int least = Integer.MAX_VALUE;
        int leastIndex = -1;
        int done = 0;
        for (Ping p : pings) {
            if (p.done.isDone()) {
                done++;
            } else if (p.roundTrips < least) {
                least = p.roundTrips;
                leastIndex = p.index;
            }
        }
        return done + " of " + pings.size() + " done; the slowest, #" + leastIndex + ", made " + least
                + " round trips; the firehose streamed " + streamed + " bytes since they started; failure " + failure;
    }

    private static Channel connect(EventLoop loop, SocketAddress address, ChannelHandler handler) throws Exception {
        return new io.netty.bootstrap.Bootstrap().group(loop).channel(RdmaSocketChannel.class).handler(handler)
                .connect(address).sync().channel();
    }

    /** 64 B out, its echo checked byte by byte, {@value #ROUND_TRIPS} times. */
    private static final class Ping extends ChannelInboundHandlerAdapter {
        final int index;
        final CompletableFuture<Void> done = new CompletableFuture<>();
        final AtomicReference<Throwable> failure;
        volatile int roundTrips;
        private Channel channel;
        private int received;

        Ping(int index, AtomicReference<Throwable> failure) {
            this.index = index;
            this.failure = failure;
        }

        @Override
        public void channelActive(ChannelHandlerContext ctx) {
            channel = ctx.channel();
        }

        private byte expected(int i) {
            return (byte) (index * 31 + roundTrips * 7 + i);
        }

        void send() {
            ByteBuf b = channel.alloc().directBuffer(PING_SIZE);
            for (int i = 0; i < PING_SIZE; i++) {
                b.writeByte(expected(i));
            }
            received = 0;
            channel.writeAndFlush(b).addListener(f -> {
                if (!f.isSuccess()) {
                    done.completeExceptionally(f.cause());
                }
            });
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf b = (ByteBuf) msg;
            try {
                while (b.isReadable()) {
                    byte got = b.readByte();
                    if (received >= PING_SIZE || got != expected(received)) {
                        AssertionError e = new AssertionError("connection #" + index + ", round trip " + roundTrips
                                + ": byte " + received + " is " + got + ", sent " + expected(received));
                        failure.compareAndSet(null, e);
                        done.completeExceptionally(e);
                        return;
                    }
                    received++;
                }
            } finally {
                ReferenceCountUtil.release(b);
            }
            if (received == PING_SIZE) {
                roundTrips++;
                if (roundTrips == ROUND_TRIPS) {
                    done.complete(null);
                } else {
                    send();
                }
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            failure.compareAndSet(null, cause);
            done.completeExceptionally(cause);
        }
    }

    /** Writes {@value #FIREHOSE_MESSAGE}-byte messages while the channel is writable, as long as it is open. */
    @ChannelHandler.Sharable
    private static final class Firehose extends ChannelInboundHandlerAdapter {
        private final AtomicReference<Throwable> failure;
        /** Set before the channel is closed: an RDMA channel stays active while its close waits for its sends. */
        volatile boolean stopped;

        Firehose(AtomicReference<Throwable> failure) {
            this.failure = failure;
        }

        @Override
        public void channelActive(ChannelHandlerContext ctx) {
            fill(ctx);
        }

        @Override
        public void channelWritabilityChanged(ChannelHandlerContext ctx) {
            fill(ctx);
        }

        private void fill(ChannelHandlerContext ctx) {
            boolean wrote = false;
            while (!stopped && ctx.channel().isActive() && ctx.channel().isWritable()) {
                ByteBuf b = ctx.alloc().directBuffer(FIREHOSE_MESSAGE);
                b.writerIndex(FIREHOSE_MESSAGE); // the contents do not matter: the sink counts them
                ctx.write(b, ctx.voidPromise());
                wrote = true;
            }
            if (wrote) {
                ctx.flush();
            }
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ReferenceCountUtil.release(msg);
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            failure.compareAndSet(null, cause);
        }
    }

    /** Counts and drops what the firehose sends. */
    @ChannelHandler.Sharable
    private static final class Sink extends ChannelInboundHandlerAdapter {
        private final AtomicLong streamed;
        private final AtomicReference<Throwable> failure;

        Sink(AtomicLong streamed, AtomicReference<Throwable> failure) {
            this.streamed = streamed;
            this.failure = failure;
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            streamed.addAndGet(((ByteBuf) msg).readableBytes());
            ReferenceCountUtil.release(msg);
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            failure.compareAndSet(null, cause);
        }
    }

    @ChannelHandler.Sharable
    private static final class Echo extends ChannelInboundHandlerAdapter {
        private final AtomicReference<Throwable> failure;

        Echo(AtomicReference<Throwable> failure) {
            this.failure = failure;
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ctx.write(msg, ctx.voidPromise());
        }

        @Override
        public void channelReadComplete(ChannelHandlerContext ctx) {
            ctx.flush();
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            failure.compareAndSet(null, cause);
        }
    }
}
