package org.nettyrdma.channel;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.parallel.Execution;
import org.junit.jupiter.api.parallel.ExecutionMode;
import org.junit.jupiter.api.parallel.Isolated;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32C;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * When a write succeeds (docs/protocol.md, "Sending"): bytes copied into the connection's staging settle as their SEND
 * is posted, as a socket's write succeeds once the kernel copied it; a buffer sent with no copy settles at its SEND's
 * completion (the device reads it until then), and so does everything written after it. Bytes arrive whole and in
 * order either way.
 */
@Isolated("transport-level checks: global allocator counts, throughput, time bounds")
@Execution(ExecutionMode.SAME_THREAD)
class RdmaTransportWriteCompletionTest {
    private EventLoopGroup group;
    private Channel server;
    private Channel client;
    private Channel accepted;
    private final Received received = new Received();

    @BeforeEach
    void setUp() throws Exception {
        group = RdmaTestSupport.newGroup(2, "write-completion", null,
                RdmaTestSupport.ownReceivesConfig()); // counts the peer's 16 credits
        CompletableFuture<Channel> child = new CompletableFuture<>();
        server = RdmaTestSupport.serverBootstrap(group, group)
                .childOption(ChannelOption.AUTO_READ, false)
                .childHandler(new ChannelInboundHandlerAdapter() {
                    @Override
                    public void channelActive(ChannelHandlerContext ctx) {
                        ctx.pipeline().addLast(received);
                        child.complete(ctx.channel());
                    }
                })
                .bind(RdmaTestSupport.anyPort()).sync().channel();
        client = RdmaTestSupport.clientBootstrap(group).handler(new ChannelInboundHandlerAdapter())
                .connect(server.localAddress()).sync().channel();
        accepted = RdmaTestSupport.await(child, 10_000, "accepted channel", () -> "");
    }

    @AfterEach
    void tearDown() throws InterruptedException {
        for (Channel c : new Channel[] {client, accepted, server}) {
            if (c != null) {
                c.close().await(5, TimeUnit.SECONDS);
            }
        }
        RdmaTestSupport.shutdown(group);
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aCopiedWriteSucceedsWhenPostedAZeroCopyOneAtItsCompletion() throws Exception {
        ByteBuf heap = Unpooled.buffer(100).writeZero(100);
        ByteBuf registered = RdmaByteBufAllocator.DEFAULT.directBuffer(8192).writeZero(8192);
        ByteBuf after = Unpooled.buffer(100).writeZero(100);
        boolean[] doneAtPost = new boolean[3];
        List<ChannelFuture> futures = RdmaTestSupport.onLoop(client, () -> {
            // all in one loop task: no completion can have been polled meanwhile
            List<ChannelFuture> fs = List.of(client.writeAndFlush(heap), client.write(registered),
                    client.writeAndFlush(after));
            for (int i = 0; i < 3; i++) {
                doneAtPost[i] = fs.get(i).isSuccess();
            }
            return fs;
        });
        assertTrue(doneAtPost[0], "a 100-byte heap write, copied into staging, did not succeed when posted");
        assertFalse(doneAtPost[1], "a zero-copy write succeeded before its SEND completed");
        assertFalse(doneAtPost[2], "a copied write succeeded before the zero-copy write in front of it");
        // the registered buffer and the write after it wait for the completion; then all three succeed, in order
        for (ChannelFuture f : futures) {
            assertTrue(f.await(10, TimeUnit.SECONDS) && f.isSuccess(), () -> "write: " + f.cause());
        }
        assertEquals(0, registered.refCnt(), "the zero-copy buffer was not released after its completion");
        accepted.config().setAutoRead(true);
        RdmaTestSupport.awaitCondition("8392 bytes received", () -> received.bytes == 8392, 10_000,
                () -> received.bytes + " bytes received");
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aChannelClosingBehindZeroCopySendsIsNotWritable() throws Exception {
        ByteBuf registered = RdmaByteBufAllocator.DEFAULT.directBuffer(8192).writeZero(8192);
        boolean[] state = new boolean[3];
        ChannelFuture write = RdmaTestSupport.onLoop(client, () -> {
            ChannelFuture f = client.writeAndFlush(registered);
            client.close();
            // the close waits for the zero-copy SEND's completion: still active, but no longer writable
            state[0] = client.isActive();
            state[1] = client.isWritable();
            state[2] = f.isDone();
            return f;
        });
        assertTrue(state[0] && !state[2], "the close did not wait for the zero-copy send: active " + state[0]
                + ", write done " + state[2]);
        assertFalse(state[1], "writable after close(), while the close waits for sends in flight");
        assertTrue(write.await(10, TimeUnit.SECONDS) && write.isSuccess(), () -> "write: " + write.cause());
        assertTrue(client.closeFuture().await(10, TimeUnit.SECONDS), "the close did not complete");
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void copiedWritesBeyondThePeersCreditsWaitAndTheChannelTurnsUnwritable() throws Exception {
        int writes = 64;
        int size = 16 * 1024;
        CRC32C sent = new CRC32C();
        List<ChannelFuture> futures = new ArrayList<>();
        for (int i = 0; i < writes; i++) {
            byte[] data = new byte[size];
            for (int j = 0; j < size; j++) {
                data[j] = (byte) (i * 31 + j);
            }
            sent.update(data);
            futures.add(client.write(Unpooled.wrappedBuffer(data)));
        }
        client.flush();
        // the peer reads nothing: the SENDs its receives take settle, the rest waits for credits
        int receives = accepted.config().getOption(RdmaChannelOption.RECEIVE_BUFFER_COUNT);
        RdmaTestSupport.awaitCondition("the writes that fit the peer's receives succeeded", () -> succeeded(futures)
                >= (receives - 1) * (size - 4L) / size - 1, 10_000, () -> succeeded(futures) + " succeeded");
        Thread.sleep(200);
        long ok = succeeded(futures);
        assertTrue(ok < writes, ok + " of " + writes + " writes succeeded while the peer read nothing");
        assertFalse(client.isWritable(), "writable with " + (writes - ok) + " writes of 16 KiB waiting");
        accepted.config().setAutoRead(true);
        for (ChannelFuture f : futures) {
            assertTrue(f.await(20, TimeUnit.SECONDS) && f.isSuccess(), () -> "write: " + f.cause());
        }
        RdmaTestSupport.awaitCondition("all bytes received", () -> received.bytes == (long) writes * size, 20_000,
                () -> received.bytes + " bytes received");
        assertEquals(sent.getValue(), received.crc.getValue(), "received bytes differ");
        assertTrue(client.isWritable());
    }

    private static long succeeded(List<ChannelFuture> futures) {
        return futures.stream().filter(ChannelFuture::isSuccess).count();
    }

    /** Counts and checksums what arrives. */
    private static final class Received extends ChannelInboundHandlerAdapter {
        final CRC32C crc = new CRC32C();
        volatile long bytes;

        @Override
        public boolean isSharable() {
            return true;
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf buf = (ByteBuf) msg;
            RdmaTestSupport.crc(crc, buf);
            bytes += buf.readableBytes();
            buf.release();
        }
    }
}
