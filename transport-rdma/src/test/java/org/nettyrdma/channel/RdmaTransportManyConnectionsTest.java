package org.nettyrdma.channel;

import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.parallel.Execution;
import org.junit.jupiter.api.parallel.ExecutionMode;
import org.junit.jupiter.api.parallel.Isolated;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.nettyrdma.channel.RdmaTestSupport.ExceptionRecorder;
import org.nettyrdma.channel.RdmaTestSupport.Kind;
import org.nettyrdma.channel.RdmaTestSupport.Pattern;
import org.nettyrdma.channel.RdmaTestSupport.StreamReader;

import java.util.ArrayList;
import java.util.List;
import java.util.Queue;
import java.util.Random;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * 200 concurrent connections on single-threaded loops, each echoing a few KiB, in several rounds; after each round
 * every channel's registration is gone again. The rounds together need more completion-queue entries than one loop
 * has (16384 by default, 36 per connection), so resources that a closed connection does not give back make a later
 * round fail to connect. At a {@linkplain RdmaTestSupport#scaledConnections smaller scale}, fewer connections on a
 * proportionally smaller completion queue.
 */
@Isolated("transport-level checks: global allocator counts, throughput, time bounds")
@Execution(ExecutionMode.SAME_THREAD)
class RdmaTransportManyConnectionsTest {
    private static final int FULL_CONNECTIONS = 200;
    private static final int FULL_COMPLETION_QUEUE = 16384;
    private static final int ROUNDS = 3;

    /** The resets {@link #isResetBeforeAnyMessage} describes, in this JVM: one is tolerated, in either parameter. */
    private static final AtomicInteger unexplainedResets = new AtomicInteger();

    private int connections;

    @ParameterizedTest(name = "sharedLoop={0}")
    @ValueSource(booleans = {false, true})
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void manyConcurrentEchoConnectionsOnOneLoop(boolean sharedLoop) throws Exception {
        connections = RdmaTestSupport.scaledConnections(FULL_CONNECTIONS);
        RdmaIoHandlerConfig config = RdmaTestSupport.config();
        if (connections < FULL_CONNECTIONS) {
            config.setCompletionQueueSize(FULL_COMPLETION_QUEUE * connections / FULL_CONNECTIONS);
        }
        List<RdmaIoHandler> serverHandlers = new CopyOnWriteArrayList<>();
        List<RdmaIoHandler> clientHandlers = new CopyOnWriteArrayList<>();
        EventLoopGroup serverGroup = RdmaTestSupport.newGroup(1, "many-server", serverHandlers, config);
        EventLoopGroup clientGroup = sharedLoop ? serverGroup : RdmaTestSupport.newGroup(1, "many-client",
                clientHandlers, config);
        try {
            run(serverGroup, clientGroup, sharedLoop, sharedLoop ? serverHandlers : clientHandlers, serverHandlers);
        } finally {
            RdmaTestSupport.shutdown(sharedLoop ? new EventLoopGroup[] {serverGroup}
                    : new EventLoopGroup[] {clientGroup, serverGroup});
        }
    }

    private void run(EventLoopGroup serverGroup, EventLoopGroup clientGroup, boolean sharedLoop,
                     List<RdmaIoHandler> clientHandlers, List<RdmaIoHandler> serverHandlers) throws Exception {
        Pattern pattern = Pattern.standard();
        ExceptionRecorder serverErrors = new ExceptionRecorder();
        List<Channel> children = new CopyOnWriteArrayList<>();
        Channel server = RdmaTestSupport.serverBootstrap(serverGroup, serverGroup)
                .childHandler(new ChannelInitializer<Channel>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        children.add(ch);
                        ch.pipeline().addLast(Echo.INSTANCE, serverErrors);
                    }
                }).bind(RdmaTestSupport.anyPort()).sync().channel();
        long baselineBuffers = RdmaByteBufAllocator.DEFAULT.buffersInUse();
        int serverBase = RdmaTestSupport.registeredChannels(serverGroup);
        assertEquals(1, serverBase, "registrations of the server loop with only the listener");
        long expectedBytes = 0;
        // connects retried after the local port was in use (iWARP), or after the reset isResetBeforeAnyMessage
        // describes; each may leave one reset child
        int retried = 0;
        long lostBytesSent = 0; // posted by a client whose connection was reset before they arrived
        for (int round = 0; round < ROUNDS; round++) {
            int retriedBefore = retried;
            children.clear();
            List<StreamReader> readers = new ArrayList<>();
            List<ChannelFuture> connects = new ArrayList<>();
            long roundBytes = 0;
            for (int i = 0; i < connections; i++) {
                EchoClient reader = echoClient(i, round, pattern);
                roundBytes += reader.len;
                readers.add(reader);
                connects.add(RdmaTestSupport.clientBootstrap(clientGroup).handler(reader)
                        .connect(server.localAddress()));
            }
            expectedBytes += roundBytes;
            final int r = round;
            Supplier<String> state = () -> "round " + r + ": " + summary(readers, children)
                    + ", children=" + children.size()
                    + ", server registrations=" + RdmaTestSupport.registeredChannels(serverGroup)
                    + ", client registrations=" + RdmaTestSupport.registeredChannels(clientGroup)
                    + ", serverErrors=" + first(serverErrors.exceptions);
            RdmaTestSupport.awaitAll(connects, 30_000, "connects of round " + round);
            for (int i = 0; i < connections; i++) {
                ChannelFuture f = connects.get(i);
                if (!f.isSuccess() && RdmaTestSupport.isLocalPortInUse(f.cause())) {
                    // iWARP: the TCP port RDMA CM picked is held by a socket of an earlier round (TIME_WAIT); the
                    // remedy the failure names is to connect again
                    retried++;
                    f = connectAgain(i, round, pattern, readers, connects, clientGroup, server);
                }
                if (!f.isSuccess()) {
                    throw new AssertionError("round " + round + ": connect #" + i + " failed; " + state.get(),
                            f.cause());
                }
            }
            for (int i = 0; i < connections; i++) {
                String what = "round " + round + ": echo of connection #" + i;
                try {
                    RdmaTestSupport.await(readers.get(i).done, 30_000, what, state);
                } catch (AssertionError e) {
                    EchoClient reset = (EchoClient) readers.get(i);
                    if (unexplainedResets.get() > 0 || !isResetBeforeAnyMessage(reset, children)) {
                        throw e;
                    }
                    // soft-iWARP, not explained (docs/testing.md, "Known failures of the devices"): tolerated once
                    unexplainedResets.incrementAndGet();
                    System.out.println("[RdmaTransportManyConnectionsTest] " + what + ": reset before any message "
                            + "arrived at either end (iWARP; tolerated once, connected again): " + ends(reset, children));
                    lostBytesSent += ((RdmaSocketChannel) reset.channel).counters().bytesSent();
                    retried++;
                    ChannelFuture f = connectAgain(i, round, pattern, readers, connects, clientGroup, server);
                    if (!f.isSuccess()) {
                        throw new AssertionError(what + ": connecting again failed; " + state.get(), f.cause());
                    }
                    RdmaTestSupport.await(readers.get(i).done, 30_000, what + " (connected again)", state);
                }
            }
            int retriedNow = retried - retriedBefore;
            assertTrue(children.size() >= connections && children.size() <= connections + retriedNow,
                    "accepted channels in round " + round + ": " + children.size() + " for " + connections
                            + " connections (" + retriedNow + " connects retried)");

            List<ChannelFuture> closes = new ArrayList<>();
            for (ChannelFuture f : connects) {
                closes.add(f.channel().close());
            }
            RdmaTestSupport.awaitAll(closes, 10_000, "client closes of round " + round);
            List<ChannelFuture> childCloses = new ArrayList<>();
            for (Channel c : children) {
                childCloses.add(c.closeFuture());
            }
            RdmaTestSupport.awaitAll(childCloses, 10_000, "server children closed after the clients closed");
            for (Channel c : children) {
                assertFalse(c.isActive(), "server child active after the client closed");
            }
            // registrations end with the connection's last completion, after the close future
            int expectedRegistrations = 1; // the listener, on the server loop (which is the client loop when shared)
            RdmaTestSupport.awaitCondition("round " + round + ": registrations back to the listener alone",
                    () -> RdmaTestSupport.registeredChannels(serverGroup) == expectedRegistrations
                            && (sharedLoop || RdmaTestSupport.registeredChannels(clientGroup) == 0),
                    10_000, state);
            for (int i = 0; i < connections; i++) {
                StreamReader reader = readers.get(i);
                assertTrue(reader.exceptions.isEmpty(), "client #" + i + " exceptions: " + reader.exceptions);
            }
            int resetsAllowed = retried; // the server's side of a connect the client gave up on and retried
        assertTrue(serverErrors.exceptions.size() <= resetsAllowed && serverErrors.exceptions.stream().allMatch(
                t -> resetsAllowed > 0 && String.valueOf(t.getMessage()).contains("reset by peer")),
                () -> "server exceptions: " + serverErrors.exceptions + " (" + resetsAllowed + " connects retried)");
        }
        RdmaTestSupport.awaitCondition("registered buffers of all rounds released",
                () -> RdmaByteBufAllocator.DEFAULT.buffersInUse() == baselineBuffers, 10_000,
                () -> "buffersInUse=" + RdmaByteBufAllocator.DEFAULT.buffersInUse() + ", baseline " + baselineBuffers);
        server.close().sync();
        RdmaTestSupport.awaitCondition("server loop registrations back to zero",
                () -> RdmaTestSupport.registeredChannels(serverGroup) == 0, 10_000,
                () -> "registrations=" + RdmaTestSupport.registeredChannels(serverGroup));

        // the handlers' counters saw exactly the echoed bytes, both ways
        long sent = 0;
        long received = 0;
        for (RdmaIoHandler h : serverHandlers) {
            sent += h.counters().bytesSent();
            received += h.counters().bytesReceived();
        }
        if (!sharedLoop) {
            long clientSent = 0;
            long clientReceived = 0;
            for (RdmaIoHandler h : clientHandlers) {
                clientSent += h.counters().bytesSent();
                clientReceived += h.counters().bytesReceived();
            }
            assertEquals(expectedBytes + lostBytesSent, clientSent, "client handler bytesSent");
            assertEquals(expectedBytes, clientReceived, "client handler bytesReceived");
            assertEquals(expectedBytes, sent, "server handler bytesSent");
            assertEquals(expectedBytes, received, "server handler bytesReceived");
        } else {
            assertEquals(2 * expectedBytes + lostBytesSent, sent, "shared handler bytesSent (both ways)");
            assertEquals(2 * expectedBytes, received, "shared handler bytesReceived (both ways)");
        }
    }

    /**
     * Connects client {@code i} of {@code round} again in place of the one that failed (its reader and connect replaced
     * in {@code readers} and {@code connects}); returns the connect, done.
     */
    private static ChannelFuture connectAgain(int i, int round, Pattern pattern, List<StreamReader> readers,
                                              List<ChannelFuture> connects, EventLoopGroup clientGroup, Channel server)
            throws InterruptedException {
        EchoClient again = echoClient(i, round, pattern);
        readers.set(i, again);
        ChannelFuture f = RdmaTestSupport.clientBootstrap(clientGroup).handler(again).connect(server.localAddress())
                .await();
        connects.set(i, f);
        return f;
    }

    /** Connection {@code i}'s client in {@code round}: its length and where in the pattern its bytes start. */
    private static EchoClient echoClient(int i, int round, Pattern pattern) {
        return new EchoClient(2048 + (i * 37 + round * 101) % 4096, pattern, i * 7919L + round * 104_729L);
    }

    /**
     * The failure of soft-iWARP's seen twice in CI on siw0 (docs/testing.md, "Known failures of the devices"): a
     * connection established at both ends, reset on both before anything arrived at either. Only on a native iWARP
     * device, with the client's one exception "Connection reset by peer", no message received by it, and no completion
     * at its server child.
     */
    private static boolean isResetBeforeAnyMessage(EchoClient client, List<Channel> children) throws Exception {
        RdmaSocketChannel c = (RdmaSocketChannel) client.channel;
        if (!RdmaTestSupport.isNative() || c == null || !c.closeFuture().await(5, TimeUnit.SECONDS)
                || c.counters().messagesReceived() != 0 || client.exceptions.size() != 1
                || !"Connection reset by peer".equals(client.exceptions.peek().getMessage())
                || !RdmaTestSupport.onLoop(c, () -> c.resources() != null && c.resources().iwarp)) {
            return false;
        }
        for (Channel child : children) {
            if (c.localAddress() != null && c.localAddress().equals(child.remoteAddress())) {
                // (the accepted side sends nothing before a message arrived: its only completions would be arrivals)
                return child.closeFuture().await(5, TimeUnit.SECONDS)
                        && ((RdmaSocketChannel) child).counters().completions() == 0;
            }
        }
        return false;
    }

    private static String first(Queue<Throwable> q) {
        Throwable t = q.peek();
        return q.size() + (t == null ? "" : " first: " + RdmaTestSupport.describe(t));
    }

    private static String summary(List<StreamReader> readers, List<Channel> children) {
        int done = 0;
        int failed = 0;
        String firstFailure = null;
        for (StreamReader r : readers) {
            if (r.done.isCompletedExceptionally()) {
                failed++;
                if (firstFailure == null) {
                    firstFailure = r.state() + " " + r.exceptions + ends((EchoClient) r, children);
                }
            } else if (r.done.isDone()) {
                done++;
            }
        }
        return "echoes done=" + done + ", failed=" + failed + (firstFailure == null ? "" : " (" + firstFailure + ")");
    }

    /**
     * Both ends of a failed echo, for a failure nothing else explains (a reset seen once on siw0 in CI): the client's
     * addresses and counters, and those of the server child whose peer is the client's address.
     */
    private static String ends(EchoClient client, List<Channel> children) {
        Channel c = client.channel;
        if (c == null) {
            return "; never active";
        }
        StringBuilder sb = new StringBuilder("; client ").append(c.localAddress()).append(" -> ")
                .append(c.remoteAddress()).append(' ').append(((RdmaSocketChannel) c).counters());
        for (Channel child : children) {
            if (c.localAddress() != null && c.localAddress().equals(child.remoteAddress())) {
                sb.append("; its server child ").append(child.isActive() ? "active " : "inactive ")
                        .append(((RdmaSocketChannel) child).counters());
            }
        }
        return sb.toString();
    }

    /** Writes its bytes when active and checks the echo. */
    static final class EchoClient extends StreamReader {
        final int len;
        private final long offset;
        volatile Channel channel;

        EchoClient(int len, Pattern pattern, long offset) {
            super(len, pattern);
            this.len = len;
            this.offset = offset;
            this.base = offset;
        }

        @Override
        public void channelActive(ChannelHandlerContext ctx) throws Exception {
            channel = ctx.channel();
            Random r = new Random(offset);
            // mixed kinds: half registered, half heap
            Kind kind = (offset & 1) == 0 ? Kind.REGISTERED : Kind.HEAP;
            int half = len / 2;
            ctx.write(shifted(kind, 0, half, r));
            ctx.writeAndFlush(shifted(kind, half, len - half, r));
            super.channelActive(ctx);
        }

        /** Bytes {@code [from, from + n)} of this connection's stream: the pattern's from {@code offset} on. */
        private ByteBuf shifted(Kind kind, int from, int n, Random r) {
            return RdmaTestSupport.newBuffer(kind, pattern, offset + from, n, r);
        }
    }

    @ChannelHandler.Sharable
    static final class Echo extends ChannelInboundHandlerAdapter {
        static final Echo INSTANCE = new Echo();

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ctx.write(msg);
        }

        @Override
        public void channelReadComplete(ChannelHandlerContext ctx) {
            ctx.flush();
        }
    }
}
