package org.nettyrdma.shuffle;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelOutboundBuffer;
import io.netty.channel.ChannelOutboundHandlerAdapter;
import io.netty.channel.ChannelPromise;
import io.netty.channel.DefaultFileRegion;
import io.netty.channel.FileRegion;
import io.netty.channel.embedded.EmbeddedChannel;
import io.netty.util.ReferenceCountUtil;
import io.netty.util.ReferenceCounted;
import org.apache.spark.network.buffer.FileSegmentManagedBuffer;
import org.apache.spark.network.buffer.ManagedBuffer;
import org.apache.spark.network.buffer.NettyManagedBuffer;
import org.apache.spark.network.buffer.NioManagedBuffer;
import org.apache.spark.network.protocol.ChunkFetchFailure;
import org.apache.spark.network.protocol.ChunkFetchSuccess;
import org.apache.spark.network.protocol.Message;
import org.apache.spark.network.protocol.MessageEncoder;
import org.apache.spark.network.protocol.RpcRequest;
import org.apache.spark.network.protocol.StreamChunkId;
import org.apache.spark.network.util.TransportConf;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.channels.Channels;
import java.nio.channels.WritableByteChannel;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.function.Predicate;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@link MessageWithHeaderSplitter} on an {@link EmbeddedChannel} under Spark's own {@code MessageEncoder}: what it
 * splits (a file block's {@code MessageWithHeader} into its header and its {@code DefaultFileRegion}, a ByteBuf body
 * likewise), byte for byte; the references of every part (the message's {@code deallocate} once, after the body's
 * write; nothing leaked: the module's tests run Netty's leak detector at paranoid); failed writes; and what it passes
 * through unchanged. Over a real RDMA pair: {@link MessageWithHeaderSplitFetchTest}.
 */
class MessageWithHeaderSplitterTest {
    private static final int BLOCK = 40_000;
    private static File file;
    private static byte[] fileBytes;
    private static TransportConf conf;

    @BeforeAll
    static void writeFile() throws IOException {
        file = File.createTempFile("mwh-split", ".data");
        fileBytes = new byte[3 * BLOCK];
        new Random(5).nextBytes(fileBytes);
        Files.write(file.toPath(), fileBytes);
        conf = SparkNetworkConf.of(Security.NONE).build();
    }

    @AfterAll
    static void deleteFile() {
        file.delete();
    }

    @Test
    void aFileBlockIsWrittenAsItsHeaderThenItsDefaultFileRegion() throws IOException {
        byte[] expected = unsplit(new ChunkFetchSuccess(new StreamChunkId(7, 3), block(BLOCK, BLOCK)));
        CountingBuffer body = new CountingBuffer(block(BLOCK, BLOCK));
        Channel ch = new Channel();
        ChannelFuture written = ch.writeAndFlush(new ChunkFetchSuccess(new StreamChunkId(7, 3), body));

        assertTrue(written.isSuccess(), () -> "write failed: " + written.cause());
        ByteBuf header = assertInstanceOf(ByteBuf.class, ch.readOutbound());
        FileRegion region = assertInstanceOf(FileRegion.class, ch.readOutbound());
        assertNull(ch.readOutbound(), "two writes, nothing else");
        assertSame(DefaultFileRegion.class, region.getClass(), "the body as itself");
        assertEquals(BLOCK, region.position());
        assertEquals(BLOCK, region.count());
        assertArrayEquals(expected, concat(ByteBufUtil.getBytes(header), drain(region)), "byte for byte");

        FileRegion message = ch.message();
        assertEquals(0, message.refCnt(), "the message released once both parts were written");
        assertEquals(1, body.releases, "its deallocate ran once, releasing the ManagedBuffer");
        assertEquals(1, header.refCnt(), "only the embedded channel's queue holds the header");
        assertEquals(1, region.refCnt(), "only the embedded channel's queue holds the region");
        header.release();
        region.release();
        assertEquals(0, header.refCnt());
        assertEquals(0, region.refCnt());
        assertFalse(ch.finish());
    }

    @Test
    void aByteBufBodyIsWrittenAsItself() throws IOException {
        byte[] payload = new byte[5000];
        new Random(9).nextBytes(payload);
        ByteBuf expectedBuf = PooledByteBufAllocator.DEFAULT.directBuffer().writeBytes(payload);
        byte[] expected = unsplit(new ChunkFetchSuccess(new StreamChunkId(1, 0), new NettyManagedBuffer(expectedBuf)));
        assertEquals(0, expectedBuf.refCnt(), "the NettyManagedBuffer's reference is the message's");

        ByteBuf buf = PooledByteBufAllocator.DEFAULT.directBuffer().writeBytes(payload);
        Channel ch = new Channel();
        ChannelFuture written = ch.writeAndFlush(new ChunkFetchSuccess(new StreamChunkId(1, 0),
                new NettyManagedBuffer(buf)));

        assertTrue(written.isSuccess(), () -> "write failed: " + written.cause());
        ByteBuf header = assertInstanceOf(ByteBuf.class, ch.readOutbound());
        ByteBuf body = assertInstanceOf(ByteBuf.class, ch.readOutbound());
        assertNull(ch.readOutbound());
        assertArrayEquals(expected, concat(ByteBufUtil.getBytes(header), ByteBufUtil.getBytes(body)));
        assertEquals(0, ch.message().refCnt());
        assertEquals(1, buf.refCnt(), "only the queued body (a duplicate) holds the buffer");
        header.release();
        body.release();
        assertEquals(0, buf.refCnt());
        assertEquals(0, header.refCnt());
        assertFalse(ch.finish());
    }

    @Test
    void anRpcWithAHeapBodyIsSplitToo() throws IOException {
        byte[] rpc = "FetchShuffleBlocks, as the reducer sends it".getBytes();
        byte[] expected = unsplit(new RpcRequest(42, new NioManagedBuffer(ByteBuffer.wrap(rpc))));
        Channel ch = new Channel();
        assertTrue(ch.writeAndFlush(new RpcRequest(42, new NioManagedBuffer(ByteBuffer.wrap(rpc)))).isSuccess());
        ByteBuf header = ch.readOutbound();
        ByteBuf body = ch.readOutbound();
        assertArrayEquals(expected, concat(ByteBufUtil.getBytes(header), ByteBufUtil.getBytes(body)));
        assertEquals(0, ch.message().refCnt());
        header.release();
        body.release();
        assertEquals(0, body.refCnt());
        assertFalse(ch.finish());
    }

    /** The body's write fails when the channel writes it (after the header's succeeded), as a transport's would. */
    @Test
    void aBodyThatFailsAtTheFlushFailsTheWriteAndEverythingIsReleasedOnce() {
        IOException cause = new IOException("the body's write failed");
        ChannelFuture written = assertBodyFailed(new Channel(m -> false, m -> m instanceof FileRegion ? cause : null));
        assertSame(cause, written.cause());
    }

    /** The channel refuses the body at once (its filterOutboundMessage throws), as the RDMA channel refuses a type. */
    @Test
    void aBodyRefusedAtOnceFailsTheWrite() {
        ChannelFuture written = assertBodyFailed(new Channel(m -> m instanceof FileRegion, m -> null));
        assertInstanceOf(UnsupportedOperationException.class, written.cause());
    }

    /**
     * Writes a file block on {@code ch}, which fails its body: the header written, the body not, every part and the
     * ManagedBuffer released once (the body by the failed write and by the message). Returns the write's future.
     */
    private static ChannelFuture assertBodyFailed(Channel ch) {
        CountingBuffer body = new CountingBuffer(block(0, BLOCK));
        ChannelFuture written = ch.writeAndFlush(new ChunkFetchSuccess(new StreamChunkId(1, 1), body));
        assertTrue(written.isDone() && !written.isSuccess(), "the write failed");
        ByteBuf header = ch.readOutbound();
        assertNull(ch.readOutbound(), "the header was written, the body was not");
        FileRegion message = ch.message();
        assertEquals(0, message.refCnt());
        assertEquals(1, body.releases);
        assertEquals(0, ch.body(message).refCnt(), "released by the failed write and by the message, once each");
        assertEquals(1, header.refCnt(), "held by the channel's queue only");
        header.release();
        assertFalse(ch.finish());
        return written;
    }

    /** The header refused at once: its body must not follow (the peer would take the body's bytes for a frame). */
    @Test
    void aRefusedHeaderIsNotFollowedByItsBody() {
        CountingBuffer body = new CountingBuffer(block(0, BLOCK));
        Channel ch = new Channel(m -> m instanceof ByteBuf, m -> null);
        ChannelFuture written = ch.writeAndFlush(new ChunkFetchSuccess(new StreamChunkId(1, 1), body));

        assertInstanceOf(UnsupportedOperationException.class, written.cause());
        assertNull(ch.readOutbound(), "nothing written");
        FileRegion message = ch.message();
        assertEquals(0, message.refCnt());
        assertEquals(1, body.releases);
        assertEquals(0, ch.header(message).refCnt());
        assertEquals(0, ch.body(message).refCnt());
        assertFalse(ch.finish());
    }

    @Test
    void aBodyOfAnotherRegionClassPassesThrough() throws IOException {
        CountingBuffer body = new CountingBuffer(block(0, BLOCK)) {
            @Override
            public Object convertToNetty() {
                return new DefaultFileRegion(file, 0, BLOCK) { }; // a subclass may override transferTo
            }
        };
        assertPassesThrough(new Channel(), new ChunkFetchSuccess(new StreamChunkId(2, 0), body), BLOCK);
        assertEquals(1, body.releases);
    }

    @Test
    void anEmptyBodyPassesThrough() throws IOException {
        CountingBuffer body = new CountingBuffer(block(0, 0));
        assertPassesThrough(new Channel(), new ChunkFetchSuccess(new StreamChunkId(2, 0), body), 0);
        assertEquals(1, body.releases);
    }

    @Test
    void aMessageWithoutBodyPassesThrough() {
        Channel ch = new Channel();
        assertTrue(ch.writeAndFlush(new ChunkFetchFailure(new StreamChunkId(3, 0), "gone")).isSuccess());
        ByteBuf frame = ch.readOutbound();
        assertNull(ch.readOutbound());
        assertSame(frame, ch.captured.get(0), "the encoder's ByteBuf, as it was");
        frame.release();
        assertFalse(ch.finish());
    }

    /** A message something else already began to transfer is written whole. */
    @Test
    void aPartlyTransferredMessagePassesThrough() throws IOException {
        byte[] expected = unsplit(new ChunkFetchSuccess(new StreamChunkId(4, 0), block(0, BLOCK)));
        EmbeddedChannel encoder = new EmbeddedChannel(MessageEncoder.INSTANCE);
        assertTrue(encoder.writeOutbound(new ChunkFetchSuccess(new StreamChunkId(4, 0), block(0, BLOCK))));
        FileRegion message = encoder.readOutbound();
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        WritableByteChannel fiveBytes = new WritableByteChannel() {
            @Override
            public int write(ByteBuffer src) {
                int n = Math.min(5, src.remaining());
                for (int i = 0; i < n; i++) {
                    out.write(src.get());
                }
                return n;
            }

            @Override
            public boolean isOpen() {
                return true;
            }

            @Override
            public void close() {
            }
        };
        assertEquals(5, message.transferTo(fiveBytes, 0));

        EmbeddedChannel ch = new EmbeddedChannel();
        MessageWithHeaderSplitter.addTo(ch.pipeline());
        assertTrue(ch.writeAndFlush(message).isSuccess());
        assertSame(message, ch.readOutbound());
        assertNull(ch.readOutbound());
        out.write(drain(message));
        assertArrayEquals(expected, out.toByteArray(), "the first five bytes before, the rest through the channel");
        message.release();
        assertFalse(encoder.finish());
        assertFalse(ch.finish());
    }

    /** Something between it and the channel (Spark's SASL or AES encryption) gets the whole message. */
    @Test
    void notAtTheHeadItPassesEverythingThrough() throws IOException {
        Channel ch = new Channel();
        ch.pipeline().addFirst("encryption-stand-in", new ChannelOutboundHandlerAdapter());
        CountingBuffer body = new CountingBuffer(block(BLOCK, BLOCK));
        assertPassesThrough(ch, new ChunkFetchSuccess(new StreamChunkId(5, 0), body), BLOCK);
        assertEquals(1, body.releases);
    }

    @Test
    void sparksFieldsAreReachableAndAMissingOneIsReported() throws Exception {
        assertTrue(MessageWithHeaderSplitter.isAvailable(), () -> "unavailable: "
                + MessageWithHeaderSplitter.unavailabilityCause());
        assertNull(MessageWithHeaderSplitter.unavailabilityCause());
        Class<?> type = Class.forName(MessageWithHeaderSplitter.MESSAGE_CLASS);
        assertEquals(2, MessageWithHeaderSplitter.lookUp(type, "header", "body").length);
        assertThrows(NoSuchFieldException.class, () -> MessageWithHeaderSplitter.lookUp(type, "header", "payload"));
    }

    @Test
    void rdmaPipelinesHaveItAndTcpOnesDoNot() {
        ShuffleTransport rdma = ShuffleTestSupport.rdma();
        boolean switchedOff = "false".equals(System.getProperty(MessageWithHeaderSplitter.PROPERTY));
        assertEquals(!switchedOff, rdma.splitsMessages(), "RDMA splits unless " + MessageWithHeaderSplitter.PROPERTY
                + "=false");
        assertTrue(rdma.splittingMessages(true).splitsMessages());
        assertFalse(rdma.splittingMessages(false).splitsMessages());
        assertFalse(ShuffleTransport.nio().splitsMessages());
        EmbeddedChannel ch = new EmbeddedChannel();
        ShuffleTransport.nio().splittingMessages(true).completePipeline(ch);
        assertTrue(ch.pipeline().first() instanceof MessageWithHeaderSplitter);
        assertFalse(ch.finish());
    }

    private static void assertPassesThrough(Channel ch, Message m, long bodyBytes) throws IOException {
        assertTrue(ch.writeAndFlush(m).isSuccess());
        FileRegion out = ch.readOutbound();
        assertNull(ch.readOutbound());
        assertSame(ch.message(), out, "the MessageWithHeader itself");
        assertEquals(8 + 1 + 12 + bodyBytes, drain(out).length);
        assertTrue(out.release());
        assertFalse(ch.finish());
    }

    /** The bytes Spark's encoder writes for {@code m}, unsplit (its MessageWithHeader's transferTo). */
    private static byte[] unsplit(Message m) throws IOException {
        EmbeddedChannel ch = new EmbeddedChannel(MessageEncoder.INSTANCE);
        assertTrue(ch.writeOutbound(m));
        FileRegion message = ch.readOutbound();
        byte[] bytes = drain(message);
        message.release();
        assertFalse(ch.finish());
        return bytes;
    }

    private static byte[] drain(FileRegion region) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        WritableByteChannel target = Channels.newChannel(out);
        while (region.transferred() < region.count()) {
            region.transferTo(target, region.transferred());
        }
        return out.toByteArray();
    }

    private static byte[] concat(byte[] a, byte[] b) {
        byte[] all = new byte[a.length + b.length];
        System.arraycopy(a, 0, all, 0, a.length);
        System.arraycopy(b, 0, all, a.length, b.length);
        return all;
    }

    private static FileSegmentManagedBuffer block(long offset, long length) {
        return new FileSegmentManagedBuffer(conf, file, offset, length);
    }

    /**
     * An EmbeddedChannel with Spark's encoder under the splitter, recording what the encoder wrote; it can refuse
     * messages at once ({@code refuse}: its filterOutboundMessage throws) or fail them when it writes them
     * ({@code fail}: the cause, or null to write).
     */
    private static final class Channel extends EmbeddedChannel {
        final List<Object> captured = new ArrayList<>();
        private final Predicate<Object> refuse;
        private final java.util.function.Function<Object, Throwable> fail;

        Channel() {
            this(m -> false, m -> null);
        }

        Channel(Predicate<Object> refuse, java.util.function.Function<Object, Throwable> fail) {
            this.refuse = refuse;
            this.fail = fail;
            pipeline().addLast(new ChannelOutboundHandlerAdapter() {
                @Override
                public void write(ChannelHandlerContext ctx, Object msg, ChannelPromise promise) {
                    captured.add(msg);
                    ctx.write(msg, promise);
                }
            });
            pipeline().addLast(MessageEncoder.INSTANCE);
            MessageWithHeaderSplitter.addTo(pipeline());
        }

        /** The one MessageWithHeader Spark's encoder wrote. */
        FileRegion message() {
            assertEquals(1, captured.size(), () -> "one message encoded: " + captured);
            return (FileRegion) captured.get(0);
        }

        ByteBuf header(FileRegion message) {
            return (ByteBuf) field(message, "header");
        }

        ReferenceCounted body(FileRegion message) {
            return (ReferenceCounted) field(message, "body");
        }

        private static Object field(Object message, String name) {
            try {
                java.lang.reflect.Field f = message.getClass().getDeclaredField(name);
                f.setAccessible(true);
                return f.get(message);
            } catch (ReflectiveOperationException e) {
                throw new AssertionError(e);
            }
        }

        @Override
        protected Object filterOutboundMessage(Object msg) {
            if (refuse.test(msg)) {
                throw new UnsupportedOperationException("refused: " + msg);
            }
            return msg;
        }

        @Override
        protected void doWrite(ChannelOutboundBuffer in) {
            for (Object m = in.current(); m != null; m = in.current()) {
                Throwable cause = fail.apply(m);
                if (cause != null) {
                    in.remove(cause);
                } else {
                    ReferenceCountUtil.retain(m);
                    handleOutboundMessage(m);
                    in.remove();
                }
            }
        }
    }

    /** A ManagedBuffer that counts its releases (its deallocate's: once), around Spark's own. */
    private static class CountingBuffer extends ManagedBuffer {
        final ManagedBuffer inner;
        int releases;

        CountingBuffer(ManagedBuffer inner) {
            this.inner = inner;
        }

        @Override
        public long size() {
            return inner.size();
        }

        @Override
        public ByteBuffer nioByteBuffer() throws IOException {
            return inner.nioByteBuffer();
        }

        @Override
        public InputStream createInputStream() throws IOException {
            return inner.createInputStream();
        }

        @Override
        public ManagedBuffer retain() {
            throw new AssertionError("not retained by this path");
        }

        @Override
        public ManagedBuffer release() {
            releases++;
            inner.release();
            return this;
        }

        @Override
        public Object convertToNetty() throws IOException {
            return inner.convertToNetty();
        }

        @Override
        public Object convertToNettyForSsl() throws IOException {
            return inner.convertToNettyForSsl();
        }
    }
}
