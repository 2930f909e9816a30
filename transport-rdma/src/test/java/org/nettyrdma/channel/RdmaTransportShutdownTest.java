package org.nettyrdma.channel;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.parallel.Execution;
import org.junit.jupiter.api.parallel.ExecutionMode;
import org.junit.jupiter.api.parallel.Isolated;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.net.InetSocketAddress;
import java.util.List;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * An event loop shut down at once ({@code shutdownGracefully(0, 0, ...)}) while every one of its many channels is busy:
 * each channel closes the way a channel closes ({@code channelInactive}, then {@code channelUnregistered} in its
 * pipeline), the loop's connections free their resources, and nothing is logged at WARN with a stack trace (Netty
 * logs one per channel whose deregistration it could not schedule on a loop that already rejects tasks). Netty 4.2's
 * loop can end without calling the handler's {@code prepareToDestroy} when the shutdown comes while it runs its tasks,
 * and a busy loop (here: its echoes are tasks) spends much of its time there: so each case repeats the shutdown on
 * fresh loops.
 */
@Isolated("watches the log of every loop")
@Execution(ExecutionMode.SAME_THREAD)
class RdmaTransportShutdownTest {
    private static final int MESSAGE = 256;
    /** Messages each connection keeps going back and forth. */
    private static final int IN_FLIGHT = 4;

    @ParameterizedTest(name = "the {0}'s loop shuts down")
    @ValueSource(strings = {"client", "server"})
    @Timeout(value = 600, unit = TimeUnit.SECONDS)
    void everyChannelOfALoopShutDownUnderTrafficSeesChannelInactive(String side) throws Exception {
        int connections = RdmaTestSupport.scaledConnections(128);
        int rounds = RdmaTestSupport.scaledConnections(12);
        for (int round = 1; round <= rounds; round++) {
            shutDownUnderTraffic(side.equals("server"), connections, "round " + round + " of " + rounds);
        }
    }

    /**
     * A loop that has closed its channels for its shutdown takes no new one (the registration fails and says why):
     * during its quiet period it still runs tasks, but a channel registered then could only be closed once it rejects
     * them.
     */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aLoopThatClosedItsChannelsForItsShutdownRegistersNoNewOne() throws Exception {
        EventLoopGroup serverGroup = RdmaTestSupport.newGroup(1, "shutdown-quiet-server");
        EventLoopGroup clientGroup = RdmaTestSupport.newGroup(1, "shutdown-quiet-client");
        WarnStacks warnStacks = WarnStacks.startAnyBinding();
        try {
            Channel server = RdmaTestSupport.serverBootstrap(serverGroup, serverGroup)
                    .childHandler(new Lifecycle(new Side(), false)).bind(RdmaTestSupport.anyPort()).sync().channel();
            Side clients = new Side();
            Channel before = RdmaTestSupport.clientBootstrap(clientGroup).handler(new Lifecycle(clients, true))
                    .connect(server.localAddress()).sync().channel();
            clientGroup.shutdownGracefully(2, 10, TimeUnit.SECONDS); // a quiet period: the loop still runs tasks
            assertTrue(before.closeFuture().await(10, TimeUnit.SECONDS), "the channel was not closed for the shutdown");
            ChannelFuture after = RdmaTestSupport.clientBootstrap(clientGroup).handler(new Lifecycle(clients, true))
                    .connect(server.localAddress()).await();
            assertFalse(after.isSuccess(), "a channel registered on a loop that closed its channels for its shutdown");
            assertInstanceOf(RejectedExecutionException.class, after.cause(),
                    () -> RdmaTestSupport.describe(after.cause()));
            assertTrue(after.cause().getMessage().contains("shutting down"), after.cause().getMessage());
            assertFalse(after.channel().isOpen());
            assertTrue(clientGroup.terminationFuture().await(15, TimeUnit.SECONDS), "the loop did not terminate");
            // (after the loop's end: closeFuture completes before the task that fires channelInactive runs)
            assertEquals(1, clients.inactive.get(), "channelInactive: the first channel's only");
            List<String> stacks = warnStacks.take();
            assertTrue(stacks.isEmpty(), () -> "stack traces logged at WARN or above: " + stacks);
        } finally {
            warnStacks.stop();
            RdmaTestSupport.shutdown(clientGroup, serverGroup);
        }
    }

    private static void shutDownUnderTraffic(boolean serverSide, int connections, String round) throws Exception {
        List<RdmaIoHandler> serverHandlers = new CopyOnWriteArrayList<>();
        List<RdmaIoHandler> clientHandlers = new CopyOnWriteArrayList<>();
        EventLoopGroup serverGroup = RdmaTestSupport.newGroup(1, "shutdown-server", serverHandlers);
        EventLoopGroup clientGroup = RdmaTestSupport.newGroup(1, "shutdown-client", clientHandlers);
        WarnStacks warnStacks = WarnStacks.startAnyBinding();
        try {
            Side servers = new Side();
            Side clients = new Side();
            Side listener = new Side();
            Channel server = RdmaTestSupport.serverBootstrap(serverGroup, serverGroup)
                    .handler(new Lifecycle(listener, false))
                    .childHandler(new ChannelInitializer<>() {
                        @Override
                        protected void initChannel(Channel ch) {
                            ch.pipeline().addLast(new Lifecycle(servers, false));
                        }
                    })
                    .bind(RdmaTestSupport.anyPort()).sync().channel();
            InetSocketAddress address = (InetSocketAddress) server.localAddress();
            for (int i = 0; i < connections; i++) {
                RdmaTestSupport.clientBootstrap(clientGroup).handler(new Lifecycle(clients, true))
                        .connect(address).sync();
            }
            RdmaTestSupport.awaitCondition(round + ": every connection carries messages both ways",
                    () -> clients.flowing.get() == connections && servers.flowing.get() == connections, 60_000,
                    () -> "flowing: clients " + clients.flowing + ", servers " + servers.flowing + " of "
                            + connections);

            Channel aClient = clients.channels.peek();
            boolean iwarp = RdmaTestSupport.onLoop(aClient, () -> ((RdmaSocketChannel) aClient).resources().iwarp);
            EventLoopGroup ending = serverSide ? serverGroup : clientGroup;
            Side ended = serverSide ? servers : clients;
            assertTrue(ending.shutdownGracefully(0, 0, TimeUnit.SECONDS).await(30, TimeUnit.SECONDS),
                    round + ": the loop did not terminate within 30 s");

            String what = round + ", " + (serverSide ? "server" : "client") + " loop shut down";
            for (Channel ch : ended.channels) {
                assertFalse(ch.isOpen(), () -> what + ": a channel is still open");
            }
            // every channel that was active (on iWARP a server may have had more: a connect whose MPA exchange broke,
            // tried again from another port, leaves an accepted channel that was reset at once)
            int active = ended.channels.size();
            assertTrue(active == connections || iwarp && active > connections, () -> what + ": " + active
                    + " channels active of " + connections);
            assertEquals(active, ended.inactive.get(), what + ": channelInactive seen by pipelines");
            assertEquals(active, ended.unregistered.get(), what + ": channelUnregistered seen by pipelines");
            if (serverSide) {
                assertFalse(server.isOpen(), what + ": the listener is still open");
                assertEquals(1, listener.inactive.get(), what + ": channelInactive seen by the listener's pipeline");
                assertEquals(1, listener.unregistered.get(), what + ": channelUnregistered seen by the listener's");
            }
            RdmaCounters left = (serverSide ? serverHandlers : clientHandlers).get(0).counters();
            assertEquals(0, left.queuePairs(), () -> what + ": queue pairs left: " + left);
            List<String> stacks = warnStacks.take();
            assertTrue(stacks.isEmpty(), () -> what + ": " + stacks.size() + " stack trace(s) logged at WARN or above,"
                    + " the first: " + stacks.get(0));
        } finally {
            warnStacks.stop();
            RdmaTestSupport.shutdown(clientGroup, serverGroup);
        }
    }

    /** What the pipelines of one side saw. */
    static final class Side {
        final Queue<Channel> channels = new ConcurrentLinkedQueue<>();
        /** Channels that have received a message. */
        final AtomicInteger flowing = new AtomicInteger();
        final AtomicInteger inactive = new AtomicInteger();
        final AtomicInteger unregistered = new AtomicInteger();
    }

    /**
     * Sends back whatever it reads, from a task of the loop (the client starts with {@link #IN_FLIGHT} messages), and
     * counts its events.
     */
    static final class Lifecycle extends ChannelInboundHandlerAdapter {
        private final Side side;
        private final boolean starts;
        private boolean flowing;

        Lifecycle(Side side, boolean starts) {
            this.side = side;
            this.starts = starts;
        }

        @Override
        public void channelActive(ChannelHandlerContext ctx) {
            side.channels.add(ctx.channel());
            if (starts) {
                for (int i = 0; i < IN_FLIGHT; i++) {
                    ctx.write(Unpooled.wrappedBuffer(new byte[MESSAGE]));
                }
                ctx.flush();
            }
            ctx.fireChannelActive();
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            if (!(msg instanceof ByteBuf)) {
                ctx.fireChannelRead(msg); // the listener's children: ServerBootstrap's acceptor registers them
                return;
            }
            if (!flowing) {
                flowing = true;
                side.flowing.incrementAndGet();
            }
            // as a handler that hands its work to the loop does (a write from another thread is such a task too):
            // the loop then spends much of its time running tasks, where a shutdown can end it unprepared
            ctx.executor().execute(() -> ctx.writeAndFlush(msg));
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            side.inactive.incrementAndGet();
            ctx.fireChannelInactive();
        }

        @Override
        public void channelUnregistered(ChannelHandlerContext ctx) {
            side.unregistered.incrementAndGet();
            ctx.fireChannelUnregistered();
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            ctx.close(); // the other side's loop went away: a reset, as on TCP
        }

        @Override
        public boolean isSharable() {
            return true; // the listener's, which ServerBootstrap adds to its pipeline (one channel)
        }
    }
}
