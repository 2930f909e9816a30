package org.nettyrdma.shuffle;

import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.EventLoopGroup;
import org.junit.jupiter.api.Test;

import java.io.ByteArrayOutputStream;
import java.net.InetSocketAddress;
import java.util.Arrays;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The transport's side of Spark's SASL encryption ({@code spark.authenticate.enableSaslEncryption}): a FileRegion that
 * writes more bytes than its count ({@link ExpandingFileRegion}) must reach the peer whole, as over NIO. Its last chunk
 * here is 3 plain bytes, 15 framed: a writer that gives the region no more room than {@code count() - transferred()}
 * takes 3, 2 and 1 bytes of it (one byte of progress each), sees {@code transferred() == count()} and drops the rest.
 */
class ExpandingFileRegionTest {

    @Test
    void expandingRegionArrivesWholeOverNio() throws Exception {
        sendAndCheck(ShuffleTransport.nio(), "127.0.0.1");
    }

    @Test
    void expandingRegionArrivesWholeOverRdma() throws Exception {
        sendAndCheck(ShuffleTestSupport.rdma(), ShuffleTestSupport.address());
    }

    private static void sendAndCheck(ShuffleTransport transport, String host) throws Exception {
        byte[] plain = new byte[3 * 1000 + 3];
        new Random(5).nextBytes(plain);
        byte[] expected = ExpandingFileRegion.wireBytes(plain, 1000);
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
            assertTrue(client.writeAndFlush(new ExpandingFileRegion(plain, 1000)).await(10, TimeUnit.SECONDS),
                    "the write did not complete");
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
