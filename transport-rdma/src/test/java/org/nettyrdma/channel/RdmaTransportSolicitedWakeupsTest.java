package org.nettyrdma.channel;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.EventLoopGroup;
import io.netty.util.concurrent.EventExecutor;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.nettyrdma.verbs.CmEventType;
import org.nettyrdma.verbs.DeviceAttributes;

import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

/**
 * A loop arms its completion queues for solicited completions only while nothing it runs waits for a completion of its
 * own sends ({@link SolicitedWakeups}): it then sleeps through the completions of the SENDs it posted, and every
 * message of a peer that solicits still wakes it. What must still wake it for every completion: a peer that does not
 * say it solicits (an earlier version, a raw peer), a write whose bytes settle at their completion (zero copy), a
 * queue nearly full, a closing connection. Runs on the provider of {@link RdmaTestSupport} (the tests' loops do not
 * busy-poll: a wake-up the loop does not get is a wait until its next tick).
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class RdmaTransportSolicitedWakeupsTest {
    private static final int ECHOES = 40;
    /** 40 echoes take milliseconds (a second in the guest); with a missed wake-up per echo, paced by the 1 s tick, 26 s. */
    private static final long ECHOES_MILLIS = 10_000;

    private final List<RdmaIoHandler> serverHandlers = new ArrayList<>();
    private final List<RdmaIoHandler> clientHandlers = new ArrayList<>();
    private EventLoopGroup serverGroup;
    private EventLoopGroup clientGroup;
    private Channel server;

    private void startEchoServer(RdmaIoHandlerConfig config) throws Exception {
        startEchoServer(config, RdmaTestSupport.anyPort());
    }

    private void startEchoServer(RdmaIoHandlerConfig config, InetSocketAddress address) throws Exception {
        serverGroup = RdmaTestSupport.newGroup(1, "solicited-server", serverHandlers, config);
        server = RdmaTestSupport.serverBootstrap(serverGroup, serverGroup).childHandler(new RdmaIoHandlerTest.Echo())
                .bind(address).sync().channel();
    }

    /** One of our channels, on a loop of its own, connected to {@link #server}; what it reads goes to {@code echoed}. */
    private Channel connectClient(LinkedBlockingQueue<ByteBuf> echoed) throws InterruptedException {
        clientGroup = RdmaTestSupport.newGroup(1, "solicited-client", clientHandlers, RdmaTestSupport.config());
        return RdmaTestSupport.clientBootstrap(clientGroup).handler(new ChannelInboundHandlerAdapter() {
            @Override
            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                echoed.add((ByteBuf) msg);
            }
        }).connect(server.localAddress()).sync().channel();
    }

    @AfterEach
    void stop() throws Exception {
        try {
            if (server != null) {
                server.close().sync();
            }
        } finally {
            RdmaTestSupport.shutdown(clientGroup, serverGroup);
        }
    }

    /**
     * A peer whose handshake lacks the flag (a version before it; here a raw client that sends unsolicited SENDs): the
     * server's loop wakes for every completion as long as the connection lives, so each message is answered at once.
     */
    @Test
    void aPeerThatDoesNotSolicitIsAnsweredAtOnce() throws Exception {
        startEchoServer(RdmaTestSupport.config());
        RdmaIoHandler handler = serverHandlers.get(0);
        try (HostilePeer peer = new HostilePeer()) {
            assertEquals(CmEventType.ESTABLISHED, peer.connect(
                    (InetSocketAddress) server.localAddress(), RdmaProtocol.handshake(16384, 16)));
            assertTrue(peer.serverHandshake().solicits(), "the server's handshake says it solicits");
            echoes(peer);
            assertEquals(1, (int) RdmaTestSupport.onLoop(server, () -> handler.wakeups().awaitingQueues()),
                    "the connection of a peer that does not solicit keeps its loop waking for every completion");
        }
        awaitNoneAwaiting(handler, serverGroup.next(), "the unsoliciting peer's connection is gone");
    }

    /**
     * A peer that solicits: answered at once, and between its messages the server's loop waits armed for solicited
     * completions only (its echoes are copied SENDs, settled at post: nothing waits for their completions).
     */
    @Test
    void aPeerThatSolicitsIsAnsweredByALoopThatSleepsThroughItsOwnSends() throws Exception {
        startEchoServer(RdmaTestSupport.config());
        RdmaIoHandler handler = serverHandlers.get(0);
        try (HostilePeer peer = new HostilePeer()) {
            peer.solicit = true;
            assertEquals(CmEventType.ESTABLISHED, peer.connect((InetSocketAddress) server.localAddress(),
                    RdmaProtocol.handshake(16384, 16, RdmaProtocol.FLAG_SOLICITS)));
            long before = handler.counters().solicitedWaits();
            echoes(peer);
            assertEquals(0, (int) RdmaTestSupport.onLoop(server, () -> handler.wakeups().awaitingQueues()),
                    "nothing waits for a completion between echoes");
            if (peer.id.device().attributes().transport() == DeviceAttributes.Transport.IWARP) {
                assertEquals(before, handler.counters().solicitedWaits(), () -> "an iWARP queue armed for solicited "
                        + "completions only: " + handler.counters());
            } else {
                assertTrue(handler.counters().solicitedWaits() > before, () -> "the loop never waited armed for "
                        + "solicited completions only: " + handler.counters());
            }
        }
    }

    /**
     * iWARP: soft-iWARP raises no solicited event for a receive (the emulated iWARP device copies it), so a loop armed
     * for solicited completions only would sleep through every message until its tick. Its queues are armed for every
     * completion: a ping-pong between two of our channels over the emulated iWARP device runs at once. (On siw0 in the
     * VM the other cases run over iWARP.)
     */
    @Test
    void iwarpQueuesAreArmedForEveryCompletion() throws Exception {
        assumeFalse(RdmaTestSupport.isNative(), "the emulated iWARP device; on a native one the other cases cover it");
        startEchoServer(RdmaTestSupport.config(), new InetSocketAddress(RdmaTestSupport.emulatedIwarpAddress(), 0));
        LinkedBlockingQueue<ByteBuf> echoed = new LinkedBlockingQueue<>();
        Channel ch = connectClient(echoed);
        try {
            long start = System.nanoTime();
            for (int i = 0; i < ECHOES; i++) {
                byte[] payload = new byte[64];
                Arrays.fill(payload, (byte) i);
                ch.writeAndFlush(Unpooled.wrappedBuffer(payload));
                assertArrayEquals(payload, readEchoed(echoed, payload.length), "echo " + i);
            }
            long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
            assertTrue(millis < ECHOES_MILLIS, () -> ECHOES + " echoes over iWARP took " + millis + " ms");
        } finally {
            ch.close().sync();
        }
        assertEquals(0, serverHandlers.get(0).counters().solicitedWaits(), "an iWARP queue armed for solicited only");
        assertEquals(0, clientHandlers.get(0).counters().solicitedWaits(), "an iWARP queue armed for solicited only");
    }

    /** {@link RdmaIoHandlerConfig#setSolicitedWakeups} false: every wait is armed for every completion. */
    @Test
    void turnedOffEveryWaitIsArmedForEveryCompletion() throws Exception {
        startEchoServer(RdmaTestSupport.config().setSolicitedWakeups(false));
        RdmaIoHandler handler = serverHandlers.get(0);
        try (HostilePeer peer = new HostilePeer()) {
            peer.solicit = true;
            assertEquals(CmEventType.ESTABLISHED, peer.connect((InetSocketAddress) server.localAddress(),
                    RdmaProtocol.handshake(16384, 16, RdmaProtocol.FLAG_SOLICITS)));
            echoes(peer);
        }
        RdmaCounters c = handler.counters();
        assertTrue(c.waits() > 0, c::toString);
        assertEquals(0, c.solicitedWaits(), c::toString);
    }

    /**
     * Between our own channels: a zero-copy write (its bytes settle at the SEND's completion) keeps the writer's loop
     * waking for every completion until that completion came; a copied write (settled at post) does not; a closed
     * channel leaves nothing counted.
     */
    @Test
    void aWriteThatSettlesAtItsCompletionKeepsItsLoopWakingForIt() throws Exception {
        startEchoServer(RdmaTestSupport.config());
        LinkedBlockingQueue<ByteBuf> echoed = new LinkedBlockingQueue<>();
        Channel ch = connectClient(echoed);
        RdmaIoHandler handler = clientHandlers.get(0);
        try {
            int size = 65536;
            ByteBuf registered = RdmaByteBufAllocator.DEFAULT.directBuffer(size);
            registered.writerIndex(size);
            for (int i = 0; i < size; i++) {
                registered.setByte(i, i * 31);
            }
            byte[] expected = new byte[size];
            registered.getBytes(0, expected);
            ChannelFuture[] zeroCopy = new ChannelFuture[1];
            int awaitingInFlight = RdmaTestSupport.onLoop(ch, () -> {
                zeroCopy[0] = ch.writeAndFlush(registered); // posted now; its completion is polled after this task
                return handler.wakeups().awaitingQueues();
            });
            assertEquals(1, awaitingInFlight, "a zero-copy SEND in flight: its completion settles the write");
            assertTrue(zeroCopy[0].await(10, TimeUnit.SECONDS), "the zero-copy write did not complete");
            assertTrue(zeroCopy[0].isSuccess(), () -> "the zero-copy write failed: " + zeroCopy[0].cause());
            assertArrayEquals(expected, readEchoed(echoed, size), "the echo of the zero-copy write");
            awaitNoneAwaiting(handler, clientGroup.next(), "the zero-copy write completed and its echo was read");

            byte[] small = "copied and settled at post".getBytes(StandardCharsets.US_ASCII);
            ChannelFuture[] copied = new ChannelFuture[1];
            int awaitingCopied = RdmaTestSupport.onLoop(ch, () -> {
                copied[0] = ch.writeAndFlush(Unpooled.wrappedBuffer(small));
                return handler.wakeups().awaitingQueues();
            });
            assertTrue(copied[0].isSuccess(), "a copied write succeeds when its SEND is posted");
            assertEquals(0, awaitingCopied, "a copied SEND in flight: nothing waits for its completion");
            assertArrayEquals(small, readEchoed(echoed, small.length), "the echo of the copied write");
        } finally {
            ch.close().sync();
        }
        awaitNoneAwaiting(handler, clientGroup.next(), "the client channel closed");
        assertTrue(RdmaTestSupport.onLoop(clientGroup.next(), () -> handler.wakeups().solicitedOnly()),
                "with nothing open, the loop arms for solicited completions only");
    }

    /** {@link #ECHOES} echoes of 64 bytes through the raw peer, each checked, within {@link #ECHOES_MILLIS}. */
    private static void echoes(HostilePeer peer) throws Exception {
        long start = System.nanoTime();
        for (int i = 0; i < ECHOES; i++) {
            byte[] payload = new byte[64];
            Arrays.fill(payload, (byte) i);
            assertArrayEquals(payload, peer.echo(payload), "echo " + i);
        }
        long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        assertTrue(millis < ECHOES_MILLIS, () -> ECHOES + " echoes took " + millis + " ms: the server's loop was not "
                + "woken by the peer's messages");
    }

    private static byte[] readEchoed(LinkedBlockingQueue<ByteBuf> echoed, int size) throws InterruptedException {
        byte[] got = new byte[size];
        int at = 0;
        while (at < size) {
            ByteBuf b = echoed.poll(10, TimeUnit.SECONDS);
            assertNotNull(b, "the echo stopped at " + at + " of " + size + " bytes");
            try {
                int n = b.readableBytes();
                assertTrue(at + n <= size, "more echoed than written");
                b.readBytes(got, at, n);
                at += n;
            } finally {
                b.release();
            }
        }
        return got;
    }

    /** Waits until no send queue of {@code handler} (the loop of {@code loop}) awaits completions. */
    private static void awaitNoneAwaiting(RdmaIoHandler handler, EventExecutor loop, String when) throws Exception {
        RdmaTestSupport.awaitCondition(when + ": no send queue left awaiting completions", () -> {
            try {
                return RdmaTestSupport.onLoop(loop, () -> handler.wakeups().awaitingQueues()) == 0;
            } catch (Exception e) {
                throw new AssertionError(e);
            }
        }, 10_000, () -> "awaiting queues: " + handler.wakeups().awaitingQueues());
    }
}
