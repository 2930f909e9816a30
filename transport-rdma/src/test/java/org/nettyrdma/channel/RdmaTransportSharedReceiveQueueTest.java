package org.nettyrdma.channel;

import io.netty.channel.Channel;
import io.netty.channel.EventLoopGroup;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.nettyrdma.channel.RdmaTestSupport.Pattern;
import org.nettyrdma.channel.RdmaTransportManyConnectionsTest.Echo;
import org.nettyrdma.channel.RdmaTransportManyConnectionsTest.EchoClient;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;

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
            Channel server = RdmaTestSupport.serverBootstrap(serverGroup, serverGroup).childHandler(Echo.INSTANCE)
                    .bind(RdmaTestSupport.anyPort()).sync().channel();
            Pattern pattern = Pattern.standard();
            List<EchoClient> echoes = new ArrayList<>();
            List<RdmaSocketChannel> clients = new ArrayList<>();
            for (int i = 0; i < connections; i++) {
                // from a few bytes to ~1 MiB: many receives of each connection consumed and posted again
                EchoClient echo = new EchoClient(1000 + 150_000 * i, pattern, 777L * i);
                echoes.add(echo);
                clients.add((RdmaSocketChannel) RdmaTestSupport.clientBootstrap(clientGroup).handler(echo)
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
            assertEquals(connections * COUNT, (int) RdmaTestSupport.onLoop(clients.get(0), clientPool::reserved));
            assertEquals((int) RdmaTestSupport.onLoop(clients.get(0), clientPool::target),
                    (int) RdmaTestSupport.onLoop(clients.get(0), clientPool::posted),
                    "refilled at the end of each batch: what is reserved plus the margin is posted");
            RdmaIoHandler serverLoop = serverHandlers.get(0);
            ReceivePool serverPool = RdmaTestSupport.onLoop(server, () -> serverLoop.receivePool(0));
            assertNotNull(serverPool);
            assertEquals(connections * COUNT, (int) RdmaTestSupport.onLoop(server, serverPool::reserved),
                    "the accepted connections' reservations");

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

    /** Without the option a connection posts receives of its own. */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void withoutTheOptionEachConnectionHasItsOwnReceives() throws Exception {
        EventLoopGroup group = RdmaTestSupport.newGroup(1, "no-srq", null,
                RdmaTestSupport.config().setSharedReceiveQueue(false));
        try {
            Channel server = RdmaTestSupport.serverBootstrap(group, group).childHandler(Echo.INSTANCE)
                    .bind(RdmaTestSupport.anyPort()).sync().channel();
            EchoClient echo = new EchoClient(100_000, Pattern.standard(), 0);
            RdmaSocketChannel client = (RdmaSocketChannel) RdmaTestSupport.clientBootstrap(group).handler(echo)
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
