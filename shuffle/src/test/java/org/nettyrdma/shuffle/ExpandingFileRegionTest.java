package org.nettyrdma.shuffle;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.EventLoopGroup;
import org.junit.jupiter.api.Test;

import java.io.ByteArrayOutputStream;
import java.net.InetSocketAddress;
import java.util.Arrays;
import java.util.Random;
import java.util.function.Consumer;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;

/**
 * The transport's side of Spark's SASL encryption ({@code spark.authenticate.enableSaslEncryption}): a FileRegion that
 * writes more bytes than its count ({@link ExpandingFileRegion}) must reach the peer whole, as over NIO. Its last chunk
 * here is 3 plain bytes, 15 framed: a writer that gives the region no more room than {@code count() - transferred()}
 * takes 3, 2 and 1 bytes of it (one byte of progress each), sees {@code transferred() == count()} and drops the rest.
 * And regions whose {@code count()} shrinks as they are written ({@link ShrinkingFileRegion}, as Spark's
 * {@code EncryptedMessage} of a ByteBuf): each must still be sent once, whole, in order.
 */
class ExpandingFileRegionTest {

    @Test
    void expandingRegionArrivesWholeOverNio() throws Exception {
        sendAndCheck(ShuffleTransport.nio(), "127.0.0.1");
    }

    @Test
    void expandingRegionArrivesWholeOverRdma() throws Exception {
        ShuffleTestSupport.assumeOwnServices("its own server and client of regions");
        sendAndCheck(ShuffleTestSupport.rdma(), ShuffleTestSupport.address());
    }

    @Test
    void shrinkingRegionsArriveWholeAndInOrderOverNio() throws Exception {
        sendShrinking(ShuffleTransport.nio(), "127.0.0.1");
    }

    @Test
    void shrinkingRegionsArriveWholeAndInOrderOverRdma() throws Exception {
        ShuffleTestSupport.assumeOwnServices("its own server and client of regions");
        sendShrinking(ShuffleTestSupport.rdma(), ShuffleTestSupport.address());
    }

    /**
     * 200 {@link ShrinkingFileRegion}s of 21 bytes (the size of Spark's chunk request), each written and flushed on its
     * own, the later ones while the first are still in flight: every byte arrives, in order.
     */
    private static void sendShrinking(ShuffleTransport transport, String host) throws Exception {
        int regions = 200;
        byte[] all = new byte[regions * 21];
        new Random(8).nextBytes(all);
        sendAndCheck(transport, host, all, client -> {
            for (int i = 0; i < regions; i++) {
                client.writeAndFlush(new ShrinkingFileRegion(Unpooled.wrappedBuffer(all, i * 21, 21)));
            }
        });
    }

    private static void sendAndCheck(ShuffleTransport transport, String host) throws Exception {
        byte[] plain = new byte[3 * 1000 + 3];
        new Random(5).nextBytes(plain);
        sendAndCheck(transport, host, ExpandingFileRegion.wireBytes(plain, 1000),
                client -> client.writeAndFlush(new ExpandingFileRegion(plain, 1000)));
    }

    /** Connects, runs {@code writes} on the client's event loop, and checks that the server gets {@code expected}. */
    private static void sendAndCheck(ShuffleTransport transport, String host, byte[] expected,
                                     Consumer<Channel> writes) throws Exception {
        ByteArrayOutputStream received = new ByteArrayOutputStream();
        CompletableFuture<byte[]> done = new CompletableFuture<>();
        EventLoopGroup group = transport.newGroup(2, "expanding-region");
        try {
            Channel server = transport.serverBootstrap(group, group)
                    .childHandler(new ChannelInboundHandlerAdapter() {
                        @Override
                        public void channelRead(ChannelHandlerContext ctx, Object msg) {
                            ByteBuf buf = (ByteBuf) msg;
                            byte[] bytes = new byte[buf.readableBytes()];
                            buf.readBytes(bytes).release();
                            received.write(bytes, 0, bytes.length);
                            if (received.size() >= expected.length) {
                                done.complete(received.toByteArray());
                            }
                        }
                    })
                    .bind(new InetSocketAddress(host, 0)).sync().channel();
            Channel client = transport.bootstrap(group).handler(new ChannelInboundHandlerAdapter())
                    .connect(server.localAddress()).sync().channel();
            client.eventLoop().submit(() -> writes.accept(client)).sync();
            byte[] got;
            try {
                got = done.get(10, TimeUnit.SECONDS);
            } catch (TimeoutException e) {
                got = received.toByteArray();
            }
            assertArrayEquals(expected, got, transport + ": " + got.length + " of " + expected.length
                    + " bytes arrived; first difference at " + Arrays.mismatch(expected, got));
            client.close().sync();
            server.close().sync();
        } finally {
            group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
    }
}
