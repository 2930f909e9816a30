package org.nettyrdma.channel;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.ConnectTimeoutException;
import io.netty.channel.EventLoopGroup;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.parallel.Execution;
import org.junit.jupiter.api.parallel.ExecutionMode;
import org.junit.jupiter.api.parallel.Isolated;
import org.nettyrdma.verbs.Errno;
import org.nettyrdma.verbs.emulated.EmulatedFabric;

import java.net.ConnectException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/** Connection set-up errors, the connect time-out, and the addresses both ends report. */
@Isolated("transport-level checks: global allocator counts, throughput, time bounds")
@Execution(ExecutionMode.SAME_THREAD)
class RdmaTransportConnectTest {
    /** TEST-NET-2: on the emulated fabric, a host that resolves but never answers. */
    private static final String BLACKHOLE = "198.51.100.7";

    private EventLoopGroup group;

    @BeforeEach
    void setUp() {
        group = RdmaTestSupport.newGroup(2, "connect");
    }

    @AfterEach
    void tearDown() throws InterruptedException {
        RdmaTestSupport.shutdown(group);
    }

    @Test
    @Timeout(value = 20, unit = TimeUnit.SECONDS)
    void connectToAPortNobodyListensOnIsRefusedQuickly() throws Exception {
        // a port that was just in use and is free now: nobody listens there (on a real device: a CM reject from the
        // kernel's RDMA CM on RoCE, a TCP reset on iWARP)
        Channel probe = RdmaTestSupport.serverBootstrap(group, group).childHandler(new ChannelInboundHandlerAdapter())
                .bind(RdmaTestSupport.anyPort()).sync().channel();
        InetSocketAddress nobody = (InetSocketAddress) probe.localAddress();
        probe.close().sync();

        long start = System.nanoTime();
        ChannelFuture f = RdmaTestSupport.clientBootstrap(group).handler(new ChannelInboundHandlerAdapter())
                .connect(nobody);
        assertTrue(f.await(10, TimeUnit.SECONDS), "connect to " + nobody + " not done within 10 s");
        long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        assertFalse(f.isSuccess(), "connect to " + nobody + " succeeded");
        Throwable cause = f.cause();
        assertInstanceOf(ConnectException.class, cause, () -> RdmaTestSupport.describe(cause));
        assertFalse(cause instanceof ConnectTimeoutException, () -> "a refusal reported as a time-out: "
                + RdmaTestSupport.describe(cause));
        assertTrue(String.valueOf(cause.getMessage()).contains("Connection refused"),
                () -> "message: " + RdmaTestSupport.describe(cause));
        assertTrue(millis < 2000, "refusal took " + millis + " ms");
        assertTrue(f.channel().closeFuture().await(5, TimeUnit.SECONDS), "channel not closed after the refusal");
        assertFalse(f.channel().isOpen());
    }

    /**
     * On the emulated provider, a blackhole of the fabric; on the native one, an address of {@value
     * RdmaTestSupport#BLACKHOLE_PROPERTY} on the device's subnet, which resolves (a permanent neighbour entry that
     * transport.sh adds in the VM) to a MAC address nobody has: the connection request (RoCE) or the TCP SYN (iWARP)
     * goes out and nothing ever comes back.
     */
    @Test
    @Timeout(value = 20, unit = TimeUnit.SECONDS)
    void connectTimeoutIsHonouredAgainstAHostThatNeverAnswers() throws Exception {
        String blackhole;
        if (RdmaTestSupport.isNative()) {
            blackhole = RdmaTestSupport.blackholeNear(RdmaTestSupport.address());
            assumeTrue(blackhole != null, () -> "needs an address that never answers on the subnet of "
                    + RdmaTestSupport.address() + " in -D" + RdmaTestSupport.BLACKHOLE_PROPERTY
                    + " (the emulated fabric's blackholes are emulated-only)");
        } else {
            blackhole = BLACKHOLE;
            EmulatedFabric.defaultFabric().addBlackhole(InetAddress.getByName(BLACKHOLE));
        }
        InetSocketAddress target = new InetSocketAddress(blackhole, 4242);
        long start = System.nanoTime();
        ChannelFuture f = RdmaTestSupport.clientBootstrap(group).handler(new ChannelInboundHandlerAdapter())
                .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, 500)
                .connect(target);
        assertTrue(f.await(15, TimeUnit.SECONDS), "connect to a blackhole not done within 15 s");
        long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        assertFalse(f.isSuccess(), "connect to a blackhole succeeded");
        Throwable cause = f.cause();
        assertInstanceOf(ConnectTimeoutException.class, cause, () -> RdmaTestSupport.describe(cause));
        // not before the time-out; and well before the CM's own time-out (10 s emulated, seconds of retries on a
        // real device), so it was ours
        assertTrue(millis >= 450, "time-out after " + millis + " ms, before CONNECT_TIMEOUT_MILLIS=500");
        assertTrue(millis < 5000, "time-out after " + millis + " ms (CONNECT_TIMEOUT_MILLIS=500)");
        System.out.println("[RdmaTransportConnectTest] ConnectTimeoutException after " + millis + " ms: "
                + cause.getMessage());
        assertTrue(f.channel().closeFuture().await(5, TimeUnit.SECONDS), "channel not closed after the time-out");
        assertFalse(f.channel().isOpen());
        // nothing stays behind: a connection that was never established has nothing to disconnect
        RdmaTestSupport.awaitCondition("the timed-out channel's QP and registration released", () ->
                RdmaIoHandler.counters(group).queuePairs() == 0 && RdmaTestSupport.registeredChannels(group) == 0,
                5_000, () -> "loop " + RdmaIoHandler.counters(group) + ", registrations "
                        + RdmaTestSupport.registeredChannels(group));
    }

    /** An echo server on this test's loop, on a port RDMA CM picks. */
    private Channel bindEchoServer() throws InterruptedException {
        return bindEchoServer(RdmaTestSupport.anyPort());
    }

    private Channel bindEchoServer(InetSocketAddress at) throws InterruptedException {
        return RdmaTestSupport.serverBootstrap(group, group).childHandler(new ChannelInboundHandlerAdapter() {
            @Override
            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                ctx.writeAndFlush(msg);
            }
        }).bind(at).sync().channel();
    }

    /** A client connects to {@code at}, gets two bytes echoed, and closes. */
    private void assertEchoedOnce(SocketAddress at) throws Exception {
        CompletableFuture<ByteBuf> echoed = new CompletableFuture<>();
        Channel client = RdmaTestSupport.clientBootstrap(group).handler(new ChannelInboundHandlerAdapter() {
            @Override
            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                echoed.complete((ByteBuf) msg);
            }
        }).connect(at).sync().channel();
        client.writeAndFlush(Unpooled.wrappedBuffer(new byte[] {4, 2})).sync();
        ByteBuf back = RdmaTestSupport.await(echoed, 10_000, "the echo", () -> "");
        try {
            assertEquals(Unpooled.wrappedBuffer(new byte[] {4, 2}), back);
        } finally {
            back.release();
        }
        client.close().sync();
    }

    /**
     * iWARP's connection is a TCP connection of the host, and the local port RDMA CM picks may be held by another
     * socket (CONNECT_ERROR, -EADDRINUSE; seen on soft-iWARP in CI): the transport connects again on a fresh CM id,
     * which picks another port, at most {@link PendingConnect.FRESH_ID_RETRIES} times. Emulated: the fabric fails
     * the first connects to the server so.
     */
    @Test
    @Timeout(value = 20, unit = TimeUnit.SECONDS)
    void aLocalPortInUseIsTriedAgainFromAnother() throws Exception {
        assumeFalse(RdmaTestSupport.isNative(), "a port in use is injected by the emulated fabric");
        Channel server = bindEchoServer();
        try {
            InetSocketAddress at = (InetSocketAddress) server.localAddress();
            EmulatedFabric.defaultFabric().failConnectsWithPortInUse(at, PendingConnect.FRESH_ID_RETRIES);
            assertEchoedOnce(at);

            // one more failure than the transport tries again: the connect fails, saying why and what to do
            EmulatedFabric.defaultFabric().failConnectsWithPortInUse(at, PendingConnect.FRESH_ID_RETRIES + 1);
            assertConnectFails(at, "in use by a TCP socket", "connect again");
        } finally {
            server.close().sync();
        }
        // the ids and QPs of the attempts are all gone
        RdmaTestSupport.awaitCondition("every attempt's QP and registration released", () ->
                RdmaIoHandler.counters(group).queuePairs() == 0 && RdmaTestSupport.registeredChannels(group) == 0,
                5_000, () -> "loop " + RdmaIoHandler.counters(group) + ", registrations "
                        + RdmaTestSupport.registeredChannels(group));
    }

    /**
     * On iWARP the MPA exchange on the connection's TCP connection may break before the connection is up (soft-iWARP's
     * CONNECT_ERROR, -EINVAL; seen once in CI): no byte of the application's has moved, and the transport connects
     * again on a fresh CM id, at most {@link PendingConnect#FRESH_ID_RETRIES} times. Elsewhere that status is no
     * such hazard and ends the connect at once. Emulated: the fabric fails the first connects so.
     */
    @Test
    @Timeout(value = 20, unit = TimeUnit.SECONDS)
    void aBrokenMpaExchangeOnIwarpIsTriedAgain() throws Exception {
        assumeFalse(RdmaTestSupport.isNative(), "a broken MPA exchange is injected by the emulated fabric");
        EmulatedFabric fabric = EmulatedFabric.defaultFabric();
        Channel iwarp = bindEchoServer(new InetSocketAddress(RdmaTestSupport.emulatedIwarpAddress(), 0));
        Channel roce = bindEchoServer();
        try {
            InetSocketAddress at = (InetSocketAddress) iwarp.localAddress();
            fabric.failConnects(at, -Errno.EINVAL, PendingConnect.FRESH_ID_RETRIES);
            assertEchoedOnce(at);

            fabric.failConnects(at, -Errno.EINVAL, PendingConnect.FRESH_ID_RETRIES + 1);
            assertConnectFails(at, "the connection exchange with the peer failed", "EINVAL",
                    (PendingConnect.FRESH_ID_RETRIES + 1) + " times");

            InetSocketAddress elsewhere = (InetSocketAddress) roce.localAddress();
            fabric.failConnects(elsewhere, -Errno.EINVAL, 1);
            assertConnectFails(elsewhere, "the connection exchange with the peer failed", "EINVAL");
            assertEchoedOnce(elsewhere); // that one failure was all
        } finally {
            iwarp.close().sync();
            roce.close().sync();
        }
        RdmaTestSupport.awaitCondition("every attempt's QP and registration released", () ->
                RdmaIoHandler.counters(group).queuePairs() == 0 && RdmaTestSupport.registeredChannels(group) == 0,
                5_000, () -> "loop " + RdmaIoHandler.counters(group) + ", registrations "
                        + RdmaTestSupport.registeredChannels(group));
    }

    /**
     * A server whose pipeline takes a connection and never registers it — here a child handler instance that is not
     * {@code @Sharable}, so ServerBootstrap cannot add it to the second child — refuses that connection within about
     * a second ({@link RdmaServerSocketChannel#UNREGISTERED_CHILD_MILLIS}): the client's connect fails with the reason,
     * not after its CM's time-out, and the server holds nothing for it.
     */
    @Test
    @Timeout(value = 30, unit = TimeUnit.SECONDS)
    void aConnectionThePipelineNeverRegistersIsRefused() throws Exception {
        Channel server = RdmaTestSupport.serverBootstrap(group, group).childHandler(new ChannelInboundHandlerAdapter() {
            @Override
            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                ctx.writeAndFlush(msg);
            }
        }).bind(RdmaTestSupport.anyPort()).sync().channel();
        try {
            InetSocketAddress at = (InetSocketAddress) server.localAddress();
            assertEchoedOnce(at); // the first child takes the handler
            for (int i = 0; i < 2; i++) {
                long start = System.nanoTime();
                assertConnectFails(at, "closed before it was accepted");
                long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
                assertTrue(millis < RdmaServerSocketChannel.UNREGISTERED_CHILD_MILLIS + 3_000,
                        () -> "refused only after " + millis + " ms");
            }
            RdmaTestSupport.awaitCondition("nothing held for the refused connections", () ->
                    RdmaIoHandler.counters(group).queuePairs() == 0 && RdmaTestSupport.registeredChannels(group) == 1,
                    5_000, () -> "loop " + RdmaIoHandler.counters(group) + ", registrations "
                            + RdmaTestSupport.registeredChannels(group));
            assertTrue(server.isActive(), "the server closed");
        } finally {
            server.close().sync();
        }
    }

    /** A connect to {@code at} fails with a {@link ConnectException} whose message has each of {@code says}. */
    private void assertConnectFails(InetSocketAddress at, String... says) throws InterruptedException {
        ChannelFuture f = RdmaTestSupport.clientBootstrap(group).handler(new ChannelInboundHandlerAdapter())
                .connect(at);
        assertTrue(f.await(10, TimeUnit.SECONDS), "connect not done within 10 s");
        Throwable cause = f.cause();
        assertInstanceOf(ConnectException.class, cause, () -> RdmaTestSupport.describe(cause));
        for (String s : says) {
            assertTrue(String.valueOf(cause.getMessage()).contains(s), () -> s + ": " + RdmaTestSupport.describe(cause));
        }
        assertTrue(f.channel().closeFuture().await(5, TimeUnit.SECONDS), "channel not closed after the failure");
    }

    /**
     * iWARP listens on a TCP port as well: the port RDMA CM picked for a bind to port 0 may be held by a TCP socket
     * (rdma_listen: EADDRINUSE; seen on soft-iWARP in CI). The server binds again on a fresh CM id, which picks another
     * port, at most {@link RdmaServerSocketChannel#LISTEN_PORT_IN_USE_RETRIES} times; a port the application chose is
     * not tried again. Emulated: the fabric fails the first listens on the address so.
     */
    @Test
    @Timeout(value = 20, unit = TimeUnit.SECONDS)
    void aListenPortInUseIsBoundAgainOnAnother() throws Exception {
        assumeFalse(RdmaTestSupport.isNative(), "a port in use is injected by the emulated fabric");
        InetAddress ip = InetAddress.getByName(RdmaTestSupport.address());
        EmulatedFabric fabric = EmulatedFabric.defaultFabric();
        fabric.failListensWithPortInUse(ip, RdmaServerSocketChannel.LISTEN_PORT_IN_USE_RETRIES);
        Channel server;
        try {
            server = bindEchoServer();
        } finally {
            fabric.failListensWithPortInUse(ip, 0);
        }
        try {
            assertEchoedOnce(server.localAddress());
        } finally {
            server.close().sync();
        }

        // one more failure than the server tries again: the bind fails with the listen's error
        fabric.failListensWithPortInUse(ip, RdmaServerSocketChannel.LISTEN_PORT_IN_USE_RETRIES + 1);
        try {
            ChannelFuture f = RdmaTestSupport.serverBootstrap(group, group)
                    .childHandler(new ChannelInboundHandlerAdapter()).bind(RdmaTestSupport.anyPort());
            assertTrue(f.await(10, TimeUnit.SECONDS), "bind not done within 10 s");
            assertTrue(String.valueOf(f.cause()).contains("EADDRINUSE"), () -> RdmaTestSupport.describe(f.cause()));
            assertTrue(f.channel().closeFuture().await(5, TimeUnit.SECONDS), "channel not closed after the failure");
        } finally {
            fabric.failListensWithPortInUse(ip, 0);
        }

        // a port the application chose: one failure is the bind's failure (a second listen would have succeeded)
        int chosen = ((InetSocketAddress) server.localAddress()).getPort();
        fabric.failListensWithPortInUse(ip, 1);
        try {
            ChannelFuture g = RdmaTestSupport.serverBootstrap(group, group)
                    .childHandler(new ChannelInboundHandlerAdapter()).bind(new InetSocketAddress(ip, chosen));
            assertTrue(g.await(10, TimeUnit.SECONDS), "bind not done within 10 s");
            assertTrue(String.valueOf(g.cause()).contains("EADDRINUSE"), () -> RdmaTestSupport.describe(g.cause()));
            assertTrue(g.channel().closeFuture().await(5, TimeUnit.SECONDS), "channel not closed after the failure");
            // the injected failure was that bind's (not a port taken otherwise): the same port binds now
            RdmaTestSupport.serverBootstrap(group, group).childHandler(new ChannelInboundHandlerAdapter())
                    .bind(new InetSocketAddress(ip, chosen)).sync().channel().close().sync();
        } finally {
            fabric.failListensWithPortInUse(ip, 0);
        }
        RdmaTestSupport.awaitCondition("every attempt's CM id and registration released", () ->
                RdmaTestSupport.registeredChannels(group) == 0, 5_000, () -> "registrations "
                        + RdmaTestSupport.registeredChannels(group));
    }

    @Test
    @Timeout(value = 20, unit = TimeUnit.SECONDS)
    void addressesOfBothEndsMatch() throws Exception {
        AtomicReference<RdmaSocketChannel> accepted = new AtomicReference<>();
        RdmaServerSocketChannel server = (RdmaServerSocketChannel) RdmaTestSupport.serverBootstrap(group, group)
                .childHandler(new ChannelInitializer<Channel>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        accepted.set((RdmaSocketChannel) ch);
                    }
                }).bind(RdmaTestSupport.anyPort()).sync().channel();
        RdmaSocketChannel client = (RdmaSocketChannel) RdmaTestSupport.clientBootstrap(group)
                .handler(new ChannelInboundHandlerAdapter()).connect(server.localAddress()).sync().channel();
        RdmaTestSupport.awaitCondition("accepted channel active",
                () -> accepted.get() != null && accepted.get().isActive(), 10_000, () -> "accepted " + accepted.get());
        RdmaSocketChannel child = accepted.get();
        try {
            InetSocketAddress serverAddress = server.localAddress();
            assertNotNull(serverAddress);
            assertNotEquals(0, serverAddress.getPort(), "the server's bound port");
            assertEquals(InetAddress.getByName(RdmaTestSupport.address()), serverAddress.getAddress());

            assertNotNull(client.localAddress(), "client localAddress()");
            assertNotNull(client.remoteAddress(), "client remoteAddress()");
            assertNotNull(child.localAddress(), "accepted localAddress()");
            assertNotNull(child.remoteAddress(), "accepted remoteAddress()");
            assertNotEquals(0, client.localAddress().getPort(), "client's local port");
            assertEquals(serverAddress, client.remoteAddress(), "client remoteAddress() vs the server's address");
            assertEquals(serverAddress, child.localAddress(), "accepted localAddress() vs the server's address");
            assertEquals(client.localAddress(), child.remoteAddress(), "accepted remoteAddress() vs client local");
            assertEquals(client.remoteAddress(), child.localAddress(), "client remoteAddress() vs accepted local");
            assertEquals(server, child.parent(), "accepted channel's parent");
        } finally {
            client.close().sync();
            server.close().sync();
        }
    }
}
