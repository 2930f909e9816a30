package org.nettyrdma.channel;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.nettyrdma.verbs.Access;
import org.nettyrdma.verbs.CmEvent;
import org.nettyrdma.verbs.CmEventChannel;
import org.nettyrdma.verbs.CmEventType;
import org.nettyrdma.verbs.CmId;
import org.nettyrdma.verbs.CompletionArray;
import org.nettyrdma.verbs.CompletionQueue;
import org.nettyrdma.verbs.ConnectionParameters;
import org.nettyrdma.verbs.EventWaiter;
import org.nettyrdma.verbs.MemoryRegion;
import org.nettyrdma.verbs.ProtectionDomain;
import org.nettyrdma.verbs.QpInitAttributes;
import org.nettyrdma.verbs.QueuePair;
import org.nettyrdma.verbs.VerbsProvider;
import org.nettyrdma.verbs.WcStatus;
import org.nettyrdma.verbs.WorkRequestList;
import org.nettyrdma.verbs.emulated.EmulatedFabric;
import org.nettyrdma.verbs.emulated.EmulatedProvider;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The handshake in the RDMA CM private data: a peer that is not netty-rdma, or speaks another protocol version, is
 * rejected with a reason that the connecting side can read (docs/protocol.md).
 */
@Timeout(30)
class RdmaHandshakeTest {
    private static final String HELLO = "hello from the accepted side";
    /** The accepting side's handshake, as the last {@link #connectRaw} that was established received it. */
    private static byte[] lastAcceptData;
    private static EventLoopGroup group;
    private static Channel server;

    @BeforeAll
    static void startServer() {
        group = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory(
                new RdmaIoHandlerConfig().setProvider(RdmaIoHandlerConfig.PROVIDER_EMULATED).setBusyPollNanos(0)
                        .setSharedReceiveQueue(false))); // a side without a pool
        server = new ServerBootstrap().group(group).channel(RdmaServerSocketChannel.class)
                .childHandler(new HelloFirst())
                .bind(new InetSocketAddress("127.0.0.1", 0)).syncUninterruptibly().channel();
    }

    /** A server that speaks first: {@link #HELLO} in channelActive. */
    private static final class HelloFirst extends ChannelInitializer<Channel> {
        @Override
        protected void initChannel(Channel ch) {
            ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                @Override
                public void channelActive(ChannelHandlerContext ctx) {
                    ctx.writeAndFlush(Unpooled.copiedBuffer(HELLO, StandardCharsets.US_ASCII));
                }

                @Override
                public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
                    ctx.close(); // the raw peers close without a word: a reset
                }
            });
        }
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
        assertEquals("ESTABLISHED", connectRaw(RdmaProtocol.handshake(16384, 16), null));
    }

    /**
     * How a later side negotiates (docs/protocol.md, "Handshake"): flag bits this side does not know and bytes after
     * the 16 it reads are ignored, so a peer that offers more (protocol v2's paths) still connects, speaking v1. (Bit
     * 2, pooled credits, is known: its extension is checked, below.)
     */
    @Test
    void unknownFlagsAndLongerHandshakesAreAccepted() throws Exception {
        byte[] longer = java.util.Arrays.copyOf(RdmaProtocol.handshake(16384, 16), 40);
        ByteBuffer.wrap(longer).putShort(6, (short) (0xffff & ~RdmaProtocol.FLAG_POOLED_CREDITS)).putLong(16, -1L)
                .putLong(24, 0x1234_5678_9abc_def0L);
        assertEquals("ESTABLISHED", connectRaw(longer, null));
    }

    /** Pooled credits' extension (flag bit 2): initial credits and limit, used only when both sides offer it. */
    @Test
    void pooledCreditsExtensionIsParsed() throws Exception {
        byte[] pooled = RdmaProtocol.handshake(16384, 16, RdmaProtocol.FLAG_WRITE_RING, 4, 64);
        assertEquals(RdmaProtocol.POOLED_HANDSHAKE_LENGTH, pooled.length);
        RdmaProtocol.Handshake p = RdmaProtocol.Handshake.parse(pooled, pooled.length);
        assertTrue(p.offersPooledCredits());
        assertTrue(p.offersWriteRing());
        assertTrue(p.pooledCredits(true));
        assertEquals(4, p.initialCredits(true));
        assertEquals(64, p.creditLimit(true));
        assertFalse(p.pooledCredits(false), "this side does not offer them: v1");
        assertEquals(16, p.initialCredits(false), "v1: the receive count");
        assertEquals(16, p.creditLimit(false));
        byte[] v1 = RdmaProtocol.handshake(16384, 16);
        RdmaProtocol.Handshake old = RdmaProtocol.Handshake.parse(v1, v1.length);
        assertFalse(old.offersPooledCredits());
        assertFalse(old.pooledCredits(true), "a v1 peer: v1, whatever this side offers");
        byte[] padded = java.util.Arrays.copyOf(v1, 56); // IB's zero padding where the extension would be
        assertFalse(RdmaProtocol.Handshake.parse(padded, padded.length).pooledCredits(true));
        assertThrows(IllegalArgumentException.class,
                () -> RdmaProtocol.handshake(16384, 16, RdmaProtocol.FLAG_POOLED_CREDITS));
    }

    /**
     * A peer that offers pooled credits connects to a side that does not (without the shared receive queue option): it
     * gets v1's answer, no bit 2, and the connection carries data on v1's credits.
     */
    @Test
    void aPooledPeerGetsV1FromASideWithoutAPool() throws Exception {
        String got = connectRaw(RdmaProtocol.handshake(16384, 16, 0, 4, 64), new RawPeer() {
            @Override
            public String established(CompletionQueue cq, ByteBuffer recv) throws Exception {
                return receiveData(cq, recv);
            }
        });
        assertEquals(HELLO, got);
        RdmaProtocol.Handshake answer = RdmaProtocol.Handshake.parse(lastAcceptData, lastAcceptData.length);
        assertFalse(answer.offersPooledCredits(), "the server has no pool: it must not offer pooled credits");
        assertEquals(16, answer.initialCredits(false));
    }

    /** A pooled-credits extension that is missing or out of range is refused with reason 5 and what was wrong. */
    @Test
    void invalidPooledCreditsAreRejectedWithTheirReason() throws Exception {
        byte[] shortOne = java.util.Arrays.copyOf(RdmaProtocol.handshake(16384, 16), 16);
        ByteBuffer.wrap(shortOne).putShort(6, (short) RdmaProtocol.FLAG_POOLED_CREDITS);
        // RDMA CM pads private data with zeros (the emulated CM as IB does): the server reads an extension of zeros
        String reason = connectRaw(shortOne);
        assertTrue(reason.contains("invalid pooled credits: initial 0, limit 0"), reason);
        assertRejected(shortOne, "pooled-credits flag is set but the handshake has 16 bytes, not the 24");
        assertRejected(RdmaProtocol.handshake(16384, 16, 0, 2, 16), "initial 2, limit 16");
        assertRejected(RdmaProtocol.handshake(16384, 16, 0, 0, 0), "initial 0, limit 0");
        assertRejected(RdmaProtocol.handshake(16384, 16, 0, 17, 16), "initial 17, limit 16");
        assertRejected(RdmaProtocol.handshake(16384, 16, 0, 4, 65536), "initial 4, limit 65536");
        // hostile: values of 2^31 and more, which a signed comparison alone would let through one way or the other
        assertRejected(RdmaProtocol.handshake(16384, 16, 0, -1, -1), "initial 4294967295, limit 4294967295");
        assertRejected(RdmaProtocol.handshake(16384, 16, 0, 4, Integer.MIN_VALUE), "initial 4, limit 2147483648");
        assertRejected(RdmaProtocol.handshake(16384, 16, 0, Integer.MIN_VALUE, 16), "initial 2147483648, limit 16");
        reason = connectRaw(RdmaProtocol.handshake(16384, 16, 0, 4, -1));
        assertTrue(reason.contains("invalid pooled credits: initial 4, limit 4294967295 (need 3 <= initial <= limit "
                + "<= 65535)"), reason);
        assertEquals("ESTABLISHED", connectRaw(RdmaProtocol.handshake(16384, 16, 0, 4, 65535), null),
                "the largest limit is valid");
        assertEquals("ESTABLISHED", connectRaw(RdmaProtocol.handshake(16384, 16, 0, CreditWindow.FLOOR, 16), null),
                "a peer may start this side at the floor (this side starts its peers at POOLED_INITIAL)");
    }

    /**
     * The probe target (flag bit 3): address and rkey after the pooled extension's place, whether or not pooled credits
     * are offered; a handshake too short for it is refused with reason 5.
     */
    @Test
    void probeTargetExtensionIsParsed() throws Exception {
        byte[] v1 = RdmaProtocol.withProbeTarget(RdmaProtocol.handshake(16384, 16), 0x7f00_1234_5678L, 0x9876);
        assertEquals(RdmaProtocol.PROBE_HANDSHAKE_LENGTH, v1.length);
        RdmaProtocol.Handshake p = RdmaProtocol.Handshake.parse(v1, v1.length);
        assertTrue(p.offersProbeTarget());
        assertFalse(p.offersPooledCredits(), "the pooled extension's place holds zeros, its flag unset");
        assertEquals(0x7f00_1234_5678L, p.probeAddress);
        assertEquals(0x9876, p.probeRkey);
        byte[] pooled = RdmaProtocol.withProbeTarget(RdmaProtocol.handshake(16384, 16, 0, 4, 64), -2L, -3);
        RdmaProtocol.Handshake q = RdmaProtocol.Handshake.parse(pooled, pooled.length);
        assertTrue(q.offersProbeTarget() && q.offersPooledCredits());
        assertEquals(4, q.initialCredits(true));
        assertEquals(64, q.creditLimit(true));
        assertEquals(-2L, q.probeAddress);
        assertEquals(-3, q.probeRkey);
        byte[] plain = RdmaProtocol.handshake(16384, 16);
        assertFalse(RdmaProtocol.Handshake.parse(plain, plain.length).offersProbeTarget());
        byte[] cut = java.util.Arrays.copyOf(v1, RdmaProtocol.PROBE_HANDSHAKE_LENGTH - 1);
        assertRejected(cut, "probe-target flag is set but the handshake has 35 bytes, not the 36");
        assertEquals("ESTABLISHED", connectRaw(v1, null));
    }

    private static void assertRejected(byte[] handshake, String what) {
        RdmaProtocol.RdmaProtocolException e = assertThrows(RdmaProtocol.RdmaProtocolException.class,
                () -> RdmaProtocol.Handshake.parse(handshake, handshake.length));
        assertEquals(RdmaProtocol.REJECT_INVALID, e.reason, e.getMessage());
        assertTrue(e.getMessage().contains(what), e.getMessage());
    }

    /** Protocol v2's flag bits are read from the handshake; a v1 handshake (flags 0) offers no ring. */
    @Test
    void writeRingFlagIsParsed() throws Exception {
        byte[] v2 = RdmaProtocol.handshake(16384, 16, RdmaProtocol.FLAG_WRITE_RING);
        assertTrue(RdmaProtocol.Handshake.parse(v2, v2.length).offersWriteRing());
        byte[] v1 = RdmaProtocol.handshake(16384, 16);
        assertEquals(false, RdmaProtocol.Handshake.parse(v1, v1.length).offersWriteRing());
        // every bit but the ring's (and pooled credits' and the probe target's, which come with extensions)
        byte[] other = RdmaProtocol.handshake(16384, 16,
                0xfffe & ~RdmaProtocol.FLAG_POOLED_CREDITS & ~RdmaProtocol.FLAG_PROBE_TARGET);
        assertEquals(false, RdmaProtocol.Handshake.parse(other, other.length).offersWriteRing());
        assertEquals("ESTABLISHED", connectRaw(v2, null));
    }

    /**
     * A peer that never sends the greeting (docs/protocol.md): the accepted channel sends nothing, though it wrote in
     * channelActive, until the connecting side has taken its ESTABLISHED (on a real fabric: sent the RTU, or taken the
     * MPA reply); then it sends what it holds.
     */
    @Test
    void acceptedSideSendsOnlyOnceTheConnectingSideIsEstablished() throws Exception {
        String got = connectRaw(RdmaProtocol.handshake(16384, 16), new RawPeer() {
            @Override
            public void beforeEstablished(CompletionQueue cq) throws Exception {
                CompletionArray wc = new CompletionArray(4);
                long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(500);
                while (System.nanoTime() < end) {
                    assertEquals(0, cq.poll(wc, 4), "the accepted side sent before the connecting side was set up");
                    Thread.sleep(5);
                }
            }

            @Override
            public String established(CompletionQueue cq, ByteBuffer recv) throws Exception {
                return receiveData(cq, recv);
            }
        });
        assertEquals(HELLO, got);
    }

    /**
     * iWARP: soft-iWARP installs its receive path on an accepted connection only after it has sent the MPA reply, and
     * a frame that arrives in between stays unread in the socket until more data arrives (docs/protocol.md). A server
     * that speaks first, to a client that says nothing after its greeting, must still be heard: the connecting side's
     * zero-byte RDMA WRITE after the greeting (the nudge) is that data. The emulated fabric plays the window (it holds
     * the greeting until the client posts more); without the nudge the server never hears the greeting and the hello
     * never comes.
     */
    @Test
    void aServerThatSpeaksFirstIsHeardThoughTheGreetingWasHeldOnIwarp() throws Exception {
        InetAddress address = RdmaTestSupport.emulatedIwarpAddress();
        Channel iwarpServer = new ServerBootstrap().group(group).channel(RdmaServerSocketChannel.class)
                .childHandler(new HelloFirst()).bind(new InetSocketAddress(address, 0)).sync().channel();
        EmulatedFabric.defaultFabric().holdFirstArrivalOnAccept(true);
        try {
            CompletableFuture<String> hello = new CompletableFuture<>();
            Channel client = new Bootstrap().group(group).channel(RdmaSocketChannel.class)
                    .handler(new ChannelInboundHandlerAdapter() {
                        @Override
                        public void channelRead(ChannelHandlerContext ctx, Object msg) {
                            ByteBuf b = (ByteBuf) msg;
                            hello.complete(b.toString(StandardCharsets.US_ASCII));
                            b.release();
                        }
                    }).connect(iwarpServer.localAddress()).sync().channel();
            assertEquals(HELLO, hello.get(10, TimeUnit.SECONDS));
            client.close().sync();
        } finally {
            EmulatedFabric.defaultFabric().holdFirstArrivalOnAccept(false);
            iwarpServer.close().sync();
        }
    }

    /** The first message the raw peer receives, a DATA message: its payload. */
    private static String receiveData(CompletionQueue cq, ByteBuffer recv) throws Exception {
        long start = System.nanoTime();
        CompletionArray wc = new CompletionArray(4);
        int n;
        while ((n = cq.poll(wc, 4)) == 0) {
            assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(10), "nothing received within "
                    + "10 s of ESTABLISHED");
            Thread.sleep(1);
        }
        assertEquals(1, n);
        assertEquals(WcStatus.SUCCESS, wc.status(0), () -> WcStatus.name(wc.status(0)));
        assertEquals(RdmaProtocol.TYPE_DATA, recv.get(0));
        byte[] payload = new byte[wc.byteLen(0) - RdmaProtocol.HEADER_LENGTH];
        recv.get(RdmaProtocol.HEADER_LENGTH, payload);
        return new String(payload, StandardCharsets.US_ASCII);
    }

    /** After ESTABLISHED: reads from the client's CQ, with one receive of 16 KiB posted into {@code recv}. */
    private interface RawPeer {
        /** Before the connecting side takes its ESTABLISHED event (the connection is accepted by then, or soon). */
        default void beforeEstablished(CompletionQueue cq) throws Exception {
        }

        String established(CompletionQueue cq, ByteBuffer recv) throws Exception;
    }

    /**
     * Connects to the server at the verbs level with {@code privateData}: the reject reason the server sent (as
     * {@link RdmaProtocol#rejectMessage} reads it), or "ESTABLISHED".
     */
    private static String connectRaw(byte[] privateData) throws Exception {
        return connectRaw(privateData, null);
    }

    private static String connectRaw(byte[] privateData, RawPeer peer) throws Exception {
        VerbsProvider provider = EmulatedProvider.create();
        try (CmEventChannel channel = provider.createEventChannel(); EventWaiter waiter = provider.createWaiter()) {
            waiter.add(channel);
            CmId id = provider.createId(channel, null);
            CmEvent event = new CmEvent();
            ProtectionDomain pd = null;
            CompletionQueue cq = null;
            MemoryRegion mr = null;
            try {
                id.resolveAddress(null, (InetSocketAddress) server.localAddress(), 2000);
                assertEquals(CmEventType.ADDR_RESOLVED, next(channel, waiter, event).type());
                id.resolveRoute(2000);
                assertEquals(CmEventType.ROUTE_RESOLVED, next(channel, waiter, event).type());
                pd = id.device().allocPd();
                cq = id.device().createCq(64, null);
                QueuePair qp = id.createQp(pd, new QpInitAttributes(cq, cq, 16, 16, 1, 1, 0, false));
                ByteBuffer recv = ByteBuffer.allocateDirect(16384);
                mr = pd.registerMemory(recv, Access.LOCAL_WRITE);
                WorkRequestList wrs = new WorkRequestList(1, 1);
                wrs.setRecv(0, 1).addSge(0, mr.address(), 16384, mr.lkey());
                assertEquals(0, qp.postRecv(wrs, 0, 1));
                id.connect(new ConnectionParameters(privateData, 1, 1, 7, 7));
                if (peer != null) {
                    peer.beforeEstablished(cq);
                }
                next(channel, waiter, event);
                if (event.type() == CmEventType.ESTABLISHED) {
                    lastAcceptData = java.util.Arrays.copyOf(event.privateData(), event.privateDataLength());
                    return peer == null ? "ESTABLISHED" : peer.established(cq, recv);
                }
                assertEquals(CmEventType.REJECTED, event.type());
                String reason = RdmaProtocol.rejectMessage(event.privateData(), event.privateDataLength());
                assertNotNull(reason, "a netty-rdma reject carries its reason");
                return reason;
            } finally {
                id.close();
                if (mr != null) {
                    mr.close();
                }
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
