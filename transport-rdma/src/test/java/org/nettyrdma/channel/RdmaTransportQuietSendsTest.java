package org.nettyrdma.channel;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.EventLoopGroup;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.parallel.Execution;
import org.junit.jupiter.api.parallel.ExecutionMode;
import org.junit.jupiter.api.parallel.Isolated;

import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Quiet SENDs ({@link SendQueue#QUIET_SENDS}): a small message that nothing waits for goes unsignalled, so a round trip
 * of small messages costs each side about one completion, its receive's, instead of two; and what stays in flight
 * unsignalled does not hold up the keep-alive, the stream or the close.
 */
@Isolated("transport-level checks: the keep-alive's time bounds")
@Execution(ExecutionMode.SAME_THREAD)
class RdmaTransportQuietSendsTest {
    private static final int ROUND_TRIPS = 300;
    /** The keep-alive interval of both ends: the silence after the round trips spans several. */
    private static final int INTERVAL = RdmaTestSupport.isNative() ? 300 : 100;
    private EventLoopGroup group;
    private Channel server;
    private final List<RdmaSocketChannel> children = new CopyOnWriteArrayList<>();
    private final List<Throwable> errors = new CopyOnWriteArrayList<>();

    @BeforeEach
    void setUp() throws InterruptedException {
        group = RdmaTestSupport.newGroup(2, "quiet");
        server = RdmaTestSupport.serverBootstrap(group, group)
                .childOption(RdmaChannelOption.KEEPALIVE_MILLIS, INTERVAL)
                .childHandler(new ChannelInboundHandlerAdapter() {
                    @Override
                    public boolean isSharable() {
                        return true;
                    }

                    @Override
                    public void handlerAdded(ChannelHandlerContext ctx) {
                        children.add((RdmaSocketChannel) ctx.channel());
                    }

                    @Override
                    public void channelRead(ChannelHandlerContext ctx, Object msg) {
                        ctx.writeAndFlush(msg);
                    }

                    @Override
                    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
                        errors.add(cause);
                        ctx.close();
                    }
                }).bind(RdmaTestSupport.anyPort()).sync().channel();
    }

    @AfterEach
    void tearDown() throws InterruptedException {
        if (server != null) {
            server.close().await(5, TimeUnit.SECONDS);
        }
        RdmaTestSupport.shutdown(group);
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void aPingPongOfSmallMessagesCostsAboutOneCompletionPerMessage() throws Exception {
        BlockingQueue<ByteBuf> echoes = new LinkedBlockingQueue<>();
        RdmaSocketChannel client = (RdmaSocketChannel) RdmaTestSupport.clientBootstrap(group)
                .option(RdmaChannelOption.KEEPALIVE_MILLIS, INTERVAL)
                .handler(new ChannelInboundHandlerAdapter() {
                    @Override
                    public void channelRead(ChannelHandlerContext ctx, Object msg) {
                        echoes.add((ByteBuf) msg);
                    }

                    @Override
                    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
                        errors.add(cause);
                        ctx.close();
                    }
                }).connect(server.localAddress()).sync().channel();
        RdmaTestSupport.awaitCondition("the server child", () -> !children.isEmpty(), 10_000, () -> "");
        RdmaSocketChannel child = children.get(0);
        Supplier<String> state = () -> "client " + client.counters() + ", child " + child.counters() + ", errors "
                + errors;
        long clientBefore = client.counters().completions();
        long childBefore = child.counters().completions();
        byte[] message = new byte[64];
        for (int i = 0; i < ROUND_TRIPS; i++) {
            int n = i;
            message[0] = (byte) i;
            message[63] = (byte) (i * 7);
            client.writeAndFlush(Unpooled.wrappedBuffer(message.clone())).sync();
            ByteBuf back = echoes.poll(10, TimeUnit.SECONDS);
            assertNotNull(back, () -> "no echo of round trip " + n + ": " + state.get());
            try {
                assertEquals(Unpooled.wrappedBuffer(message), back, () -> "round trip " + n);
            } finally {
                back.release();
            }
        }
        // one receive completion per message on each side, and a send completion for one SEND in a quarter of the
        // send queue (every SEND was signalled before: two per message)
        long clientCompletions = client.counters().completions() - clientBefore;
        long childCompletions = child.counters().completions() - childBefore;
        assertTrue(clientCompletions < ROUND_TRIPS * 3 / 2 && childCompletions < ROUND_TRIPS * 3 / 2,
                () -> ROUND_TRIPS + " round trips took " + clientCompletions + " completions on the client and "
                        + childCompletions + " on the server's side: " + state.get());
        assertTrue(clientCompletions >= ROUND_TRIPS && childCompletions >= ROUND_TRIPS, state);

        // silence: the keep-alive's probes retire what is left in flight unsignalled, and nobody takes the quiet
        // SENDs for work the peer never acknowledged
        RdmaTestSupport.awaitCondition("3 probes from each end", () -> client.counters().keepAliveProbes() >= 3
                && child.counters().keepAliveProbes() >= 3, 30_000, state);
        assertTrue(client.isActive() && child.isActive() && errors.isEmpty(), state);

        // the stream goes on, and the close completes on both ends with nothing left
        message[0] = 42;
        client.writeAndFlush(Unpooled.wrappedBuffer(message.clone())).sync();
        ByteBuf last = echoes.poll(10, TimeUnit.SECONDS);
        assertNotNull(last, state);
        try {
            assertEquals(Unpooled.wrappedBuffer(message), last);
        } finally {
            last.release();
        }
        client.close().sync();
        RdmaTestSupport.awaitCondition("both ends closed, no queue pair left", () -> !child.isOpen()
                && RdmaIoHandler.counters(group).queuePairs() == 0, 10_000, state);
        assertTrue(errors.isEmpty(), state);
    }
}
