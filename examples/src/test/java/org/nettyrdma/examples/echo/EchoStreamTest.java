package org.nettyrdma.examples.echo;

import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.util.ReferenceCountUtil;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.nettyrdma.examples.Transport;

import java.net.InetSocketAddress;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * EchoStream (vm/two-host's stream across two guests) on the emulated provider: an intact stream, a server that
 * drops the connection mid-stream, a server that goes silent (a hang) and a corrupted echo are each reported as such.
 */
class EchoStreamTest {
    private final Transport transport = Transport.rdma(true);
    private EventLoopGroup group;
    private ExecutorService executor;

    @BeforeEach
    void start() {
        group = transport.newGroup(2);
        executor = Executors.newSingleThreadExecutor();
    }

    @AfterEach
    void stop() {
        executor.shutdownNow();
        group.shutdownGracefully(0, 1, TimeUnit.SECONDS).syncUninterruptibly();
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aStreamComesBackIntactAndTheServerSeesItClosed() throws Exception {
        InetSocketAddress address = new InetSocketAddress("127.0.0.1", 19301);
        Future<Integer> server = executor.submit(
                () -> EchoStream.serve(transport, group, List.of(address), true, TimeUnit.SECONDS.toNanos(30)));
        Thread.sleep(500); // serve() binds on the executor; an emulated bind takes milliseconds
        assertEquals(EchoStream.OK, EchoStream.stream(transport, group, address, 1 << 20, Long.MAX_VALUE,
                TimeUnit.SECONDS.toNanos(30)));
        assertEquals(EchoStream.OK, server.get(30, TimeUnit.SECONDS));
        assertEquals(EchoStream.OK, EchoStream.released(group, 10_000), "resources left after the stream");
    }

    /** The end-of-run check counts what a connection holds: with one open, it reports a leak. */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void resourcesStillHeldAreReported() throws Exception {
        Channel server = transport.serverBootstrap(group).childHandler(new ChannelInboundHandlerAdapter())
                .bind(new InetSocketAddress("127.0.0.1", 19305)).sync().channel();
        Channel client = transport.bootstrap(group).handler(new ChannelInboundHandlerAdapter())
                .connect(server.localAddress()).sync().channel();
        try {
            assertEquals(EchoStream.FAILED, EchoStream.released(group, 200), "an open connection was not counted");
        } finally {
            client.close().sync();
            server.close().sync();
        }
        assertEquals(EchoStream.OK, EchoStream.released(group, 10_000), "resources left after the close");
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aConnectionDroppedMidStreamIsAFailure() throws Exception {
        assertEquals(EchoStream.FAILED, againstServer(new ChannelInboundHandlerAdapter() {
            private long bytes;

            @Override
            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                bytes += ((ByteBuf) msg).readableBytes();
                if (bytes > 256 << 10) {
                    ReferenceCountUtil.release(msg);
                    ctx.close();
                } else {
                    ctx.writeAndFlush(msg);
                }
            }
        }, TimeUnit.SECONDS.toNanos(30)));
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aServerThatGoesSilentIsAHang() throws Exception {
        assertEquals(EchoStream.HUNG, againstServer(new ChannelInboundHandlerAdapter() {
            @Override
            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                ReferenceCountUtil.release(msg); // reads, never answers, never closes
            }
        }, TimeUnit.SECONDS.toNanos(2)));
        // the hung connection, described and closed abortively, leaves nothing behind
        assertEquals(EchoStream.OK, EchoStream.released(group, 10_000));
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aCorruptedEchoIsAFailure() throws Exception {
        assertEquals(EchoStream.FAILED, againstServer(new ChannelInboundHandlerAdapter() {
            private long bytes;

            @Override
            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                ByteBuf buf = (ByteBuf) msg;
                if (bytes < 100_000 && bytes + buf.readableBytes() >= 100_000) {
                    int i = buf.readerIndex() + (int) (100_000 - bytes) - 1;
                    buf.setByte(i, ~buf.getByte(i));
                }
                bytes += buf.readableBytes();
                ctx.writeAndFlush(msg);
            }
        }, TimeUnit.SECONDS.toNanos(30)));
    }

    /** Streams 8 MiB to a server running {@code handler}; returns EchoStream's verdict. */
    private int againstServer(ChannelInboundHandlerAdapter handler, long limitNs) throws Exception {
        InetSocketAddress address = new InetSocketAddress("127.0.0.1", 19302);
        Channel server = transport.serverBootstrap(group).childHandler(new ChannelInitializer<Channel>() {
            @Override
            protected void initChannel(Channel ch) {
                ch.pipeline().addLast(handler);
            }
        }).bind(address).sync().channel();
        try {
            return EchoStream.stream(transport, group, address, 8 << 20, Long.MAX_VALUE, limitNs);
        } finally {
            server.close().sync();
        }
    }
}
