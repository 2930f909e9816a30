package org.nettyrdma.channel;

import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.FixedRecvByteBufAllocator;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.parallel.Execution;
import org.junit.jupiter.api.parallel.ExecutionMode;
import org.junit.jupiter.api.parallel.Isolated;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * What an operator reads: a channel's and its event loops' counters of queue pairs, registered memory, lent receive
 * buffers and receive copies, through {@link RdmaSocketChannel#counters()} and
 * {@link RdmaIoHandler#counters(io.netty.util.concurrent.EventExecutorGroup)}; and that the lending bound holds.
 */
@Isolated("transport-level checks: global allocator counts")
@Execution(ExecutionMode.SAME_THREAD)
class RdmaTransportCountersTest {
    private static final int MESSAGE = 8000;
    private static final int MESSAGES = 12;
    private EventLoopGroup serverGroup;
    private EventLoopGroup clientGroup;

    @BeforeEach
    void setUp() {
        // counts each connection's 16 receive buffers
        serverGroup = RdmaTestSupport.newGroup(1, "counters-server", null, RdmaTestSupport.ownReceivesConfig());
        clientGroup = RdmaTestSupport.newGroup(1, "counters-client", null, RdmaTestSupport.ownReceivesConfig());
    }

    @AfterEach
    void tearDown() throws InterruptedException {
        RdmaTestSupport.shutdown(clientGroup, serverGroup);
    }

    /** A server that keeps every buffer it reads, as an aggregator does, until told to let go. */
    private static final class Keeper extends ChannelInboundHandlerAdapter {
        final List<ByteBuf> kept = new CopyOnWriteArrayList<>();
        final AtomicReference<RdmaSocketChannel> channel = new AtomicReference<>();
        volatile long received;

        @Override
        public void channelActive(ChannelHandlerContext ctx) {
            channel.set((RdmaSocketChannel) ctx.channel());
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf b = (ByteBuf) msg;
            received += b.readableBytes();
            kept.add(b);
        }

        void releaseAll() {
            for (ByteBuf b : kept) {
                b.release();
            }
            kept.clear();
        }
    }

    private Channel server(Keeper keeper, int maxLent) throws InterruptedException {
        return RdmaTestSupport.plainServerBootstrap(serverGroup, serverGroup)
                .childOption(RdmaChannelOption.MAX_LENT_RECEIVE_BYTES, maxLent)
                // guesses that cover every message: what is not lent is copied because of the bound alone
                .childOption(ChannelOption.RCVBUF_ALLOCATOR, new FixedRecvByteBufAllocator(65536))
                .childHandler(new ChannelInitializer<Channel>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        ch.pipeline().addLast(keeper);
                    }
                }).bind(RdmaTestSupport.anyPort()).sync().channel();
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void countersFollowConnectionsRegisteredMemoryAndLentBuffers() throws Exception {
        Keeper keeper = new Keeper();
        Channel server = server(keeper, 4 << 20);
        try {
            RdmaSocketChannel client = (RdmaSocketChannel) RdmaTestSupport.plainClientBootstrap(clientGroup)
                    .handler(new ChannelInboundHandlerAdapter()).connect(server.localAddress()).sync().channel();
            RdmaTestSupport.awaitCondition("server child active", () -> keeper.channel.get() != null, 10_000,
                    () -> "no child");
            RdmaSocketChannel child = keeper.channel.get();
            assertEquals(1, client.counters().queuePairs());
            assertEquals(1, RdmaIoHandler.counters(clientGroup).queuePairs(), "the client loop's queue pairs");
            assertEquals(1, RdmaIoHandler.counters(client.eventLoop()).queuePairs(), "the same, by the loop");
            long registered = client.counters().registeredBytes();
            // 16 receives of 16 KiB by default, and protocol v2's ring if it is used; an idle connection holds no send
            // staging (its SENDs take slots of the loop's pool while they are in flight)
            long ring = RdmaTestSupport.onLoop(client, client::writeRingNegotiated) ? client.config().getRingSize() : 0;
            assertEquals(16 * 16384 + ring, registered, () -> "client " + client.counters());
            // the process's registered memory by device: at least both connections' (plus the allocator's regions)
            long allDevices = Rdma.registeredBytesByDevice().values().stream().mapToLong(Long::longValue).sum();
            assertTrue(allDevices >= 2 * registered, () -> "registered by device: " + Rdma.registeredBytesByDevice()
                    + ", less than both connections' " + 2 * registered);

            for (int i = 0; i < MESSAGES; i++) {
                client.writeAndFlush(client.alloc().directBuffer(MESSAGE).writeZero(MESSAGE));
            }
            Supplier<String> state = () -> "server child " + child.counters() + ", kept " + keeper.kept.size();
            RdmaTestSupport.awaitCondition("all bytes held by the server", () -> keeper.received == MESSAGES * MESSAGE,
                    10_000, state);
            // every message was lent (no copy): 12 buffers of 16 KiB slots, counted on the child and on its loop
            assertEquals(0, child.counters().receiveCopies(), state.get());
            assertEquals(MESSAGES * 16384L, child.counters().lentBytes(), state.get());
            assertEquals(MESSAGES * 16384L, RdmaIoHandler.counters(serverGroup).lentBytes(), state.get());
            RdmaTestSupport.onLoop(child, () -> {
                keeper.releaseAll();
                return null;
            });
            assertEquals(0, child.counters().lentBytes(), "after the application released them");
            assertEquals(0, RdmaIoHandler.counters(serverGroup).lentBytes());

            client.close().sync();
            RdmaTestSupport.awaitCondition("connections gone", () -> RdmaIoHandler.counters(clientGroup)
                    .queuePairs() == 0 && RdmaIoHandler.counters(serverGroup).queuePairs() == 0, 10_000,
                    () -> "client loop " + RdmaIoHandler.counters(clientGroup) + ", server loop "
                            + RdmaIoHandler.counters(serverGroup));
            assertEquals(0, RdmaIoHandler.counters(clientGroup).registeredBytes());
            assertEquals(0, RdmaIoHandler.counters(serverGroup).registeredBytes());
        } finally {
            keeper.releaseAll();
            server.close().sync();
        }
    }

    /** Past the channel's lending bound received bytes are copied, and the bound is never exceeded. */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void pastTheLendingBoundBytesAreCopied() throws Exception {
        Keeper keeper = new Keeper();
        int maxLent = 4 * 16384;
        Channel server = server(keeper, maxLent);
        try {
            RdmaSocketChannel client = (RdmaSocketChannel) RdmaTestSupport.plainClientBootstrap(clientGroup)
                    .handler(new ChannelInboundHandlerAdapter()).connect(server.localAddress()).sync().channel();
            for (int i = 0; i < MESSAGES; i++) {
                client.writeAndFlush(client.alloc().directBuffer(MESSAGE).writeZero(MESSAGE));
            }
            RdmaTestSupport.awaitCondition("all bytes held by the server", () -> keeper.received == MESSAGES * MESSAGE,
                    10_000, () -> "kept " + keeper.kept.size());
            RdmaSocketChannel child = keeper.channel.get();
            Supplier<String> state = () -> "server child " + child.counters();
            assertEquals(maxLent, child.counters().lentBytes(), state.get());
            assertEquals(MESSAGES - 4, child.counters().receiveCopies(), state.get());
            assertEquals((MESSAGES - 4L) * MESSAGE, child.counters().receiveCopiedBytes(), state.get());
            client.close().sync();
        } finally {
            keeper.releaseAll();
            server.close().sync();
        }
    }
}
