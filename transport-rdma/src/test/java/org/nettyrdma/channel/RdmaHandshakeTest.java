package org.nettyrdma.channel;

import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.nettyrdma.verbs.CmEvent;
import org.nettyrdma.verbs.CmEventChannel;
import org.nettyrdma.verbs.CmEventType;
import org.nettyrdma.verbs.CmId;
import org.nettyrdma.verbs.CompletionQueue;
import org.nettyrdma.verbs.ConnectionParameters;
import org.nettyrdma.verbs.EventWaiter;
import org.nettyrdma.verbs.ProtectionDomain;
import org.nettyrdma.verbs.QpInitAttributes;
import org.nettyrdma.verbs.VerbsProvider;
import org.nettyrdma.verbs.emulated.EmulatedProvider;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The handshake in the RDMA CM private data: a peer that is not netty-rdma, or speaks another protocol version, is
 * rejected with a reason that the connecting side can read (docs/protocol.md).
 */
@Timeout(30)
class RdmaHandshakeTest {
    private static EventLoopGroup group;
    private static Channel server;

    @BeforeAll
    static void startServer() {
        group = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory(
                new RdmaIoHandlerConfig().setProvider(RdmaIoHandlerConfig.PROVIDER_EMULATED).setBusyPollNanos(0)));
        server = new ServerBootstrap().group(group).channel(RdmaServerSocketChannel.class)
                .childHandler(new ChannelInboundHandlerAdapter())
                .bind(new InetSocketAddress("127.0.0.1", 0)).syncUninterruptibly().channel();
    }

    @AfterAll
    static void stopServer() throws InterruptedException {
        server.close().syncUninterruptibly();
        group.shutdownGracefully(0, 0, TimeUnit.SECONDS).sync();
    }

    @Test
    void foreignPeerIsRejectedWithReason() throws Exception {
        String reason = connectRaw(new byte[] {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16});
        assertTrue(reason.contains("not a netty-rdma peer"), reason);
    }

    @Test
    void otherProtocolVersionIsRejectedWithReason() throws Exception {
        byte[] handshake = RdmaProtocol.handshake(16384, 16);
        ByteBuffer.wrap(handshake).putShort(4, (short) (RdmaProtocol.VERSION + 1));
        String reason = connectRaw(handshake);
        assertTrue(reason.contains("protocol version " + (RdmaProtocol.VERSION + 1) + " not supported"), reason);
    }

    @Test
    void validHandshakeIsAccepted() throws Exception {
        assertEquals("ESTABLISHED", connectRaw(RdmaProtocol.handshake(16384, 16)));
    }

    /**
     * Connects to the server at the verbs level with {@code privateData}: the reject reason the server sent (as
     * {@link RdmaProtocol#rejectMessage} reads it), or "ESTABLISHED".
     */
    private static String connectRaw(byte[] privateData) throws Exception {
        VerbsProvider provider = EmulatedProvider.create();
        try (CmEventChannel channel = provider.createEventChannel(); EventWaiter waiter = provider.createWaiter()) {
            waiter.add(channel);
            CmId id = provider.createId(channel, null);
            CmEvent event = new CmEvent();
            ProtectionDomain pd = null;
            CompletionQueue cq = null;
            try {
                id.resolveAddress(null, (InetSocketAddress) server.localAddress(), 2000);
                assertEquals(CmEventType.ADDR_RESOLVED, next(channel, waiter, event).type());
                id.resolveRoute(2000);
                assertEquals(CmEventType.ROUTE_RESOLVED, next(channel, waiter, event).type());
                pd = id.device().allocPd();
                cq = id.device().createCq(64, null);
                id.createQp(pd, new QpInitAttributes(cq, cq, 16, 16, 1, 1, 0, false));
                id.connect(new ConnectionParameters(privateData, 1, 1, 7, 7));
                next(channel, waiter, event);
                if (event.type() == CmEventType.ESTABLISHED) {
                    return "ESTABLISHED";
                }
                assertEquals(CmEventType.REJECTED, event.type());
                String reason = RdmaProtocol.rejectMessage(event.privateData(), event.privateDataLength());
                assertNotNull(reason, "a netty-rdma reject carries its reason");
                return reason;
            } finally {
                id.close();
                if (cq != null) {
                    cq.close();
                }
                if (pd != null) {
                    pd.close();
                }
            }
        }
    }

    private static CmEvent next(CmEventChannel channel, EventWaiter waiter, CmEvent event) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (!channel.poll(event)) {
            long left = deadline - System.nanoTime();
            assertTrue(left > 0, "no RDMA CM event within 10 s");
            waiter.await(left);
        }
        return event;
    }
}
