package org.nettyrdma.channel;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.DefaultFileRegion;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.FileRegion;
import io.netty.channel.socket.ChannelOutputShutdownException;
import io.netty.channel.socket.DuplexChannel;
import io.netty.util.AbstractReferenceCounted;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.nettyrdma.channel.RdmaTestSupport.ExceptionRecorder;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.WritableByteChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * {@link FileRegion} writes as file servers, HTTP static files and Spark's shuffle send them: {@link DefaultFileRegion}
 * and custom regions mixed with buffers, arriving whole and in order; a close right after the write; a region that
 * fails part-way. Netty's own {@code SocketFileRegionTest} runs in the testsuite package.
 */
class RdmaTransportFileRegionTest {
    private static final int FILE_BYTES = 3 << 20;
    private EventLoopGroup serverGroup;
    private EventLoopGroup clientGroup;
    private byte[] content;
    private Path file;

    @TempDir
    Path dir;

    @BeforeEach
    void setUp() throws IOException {
        serverGroup = RdmaTestSupport.newGroup(1, "region-server");
        clientGroup = RdmaTestSupport.newGroup(1, "region-client");
        content = new byte[FILE_BYTES];
        new Random(42).nextBytes(content);
        file = dir.resolve("content.bin");
        Files.write(file, content);
    }

    @AfterEach
    void tearDown() throws InterruptedException {
        RdmaTestSupport.shutdown(clientGroup, serverGroup);
    }

    /** Collects what a connection receives until it ends. */
    private static final class Collector extends ChannelInboundHandlerAdapter {
        final ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        final CompletableFuture<byte[]> done = new CompletableFuture<>();

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf buf = (ByteBuf) msg;
            synchronized (bytes) {
                byte[] b = new byte[buf.readableBytes()];
                buf.readBytes(b);
                bytes.write(b, 0, b.length);
            }
            buf.release();
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            synchronized (bytes) {
                done.complete(bytes.toByteArray());
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            ctx.fireExceptionCaught(cause); // to the test's ExceptionRecorder
            ctx.close();
        }
    }

    private Channel server(Collector collector, ExceptionRecorder errors) throws InterruptedException {
        return RdmaTestSupport.serverBootstrap(serverGroup, serverGroup)
                .childHandler(new ChannelInitializer<Channel>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        ch.pipeline().addLast(collector, errors);
                    }
                }).bind(RdmaTestSupport.anyPort()).sync().channel();
    }

    private Channel client(Channel server) throws InterruptedException {
        return RdmaTestSupport.clientBootstrap(clientGroup).handler(new ChannelInboundHandlerAdapter())
                .connect(server.localAddress()).sync().channel();
    }

    private DefaultFileRegion fileRegion(long position, long count) throws IOException {
        return new DefaultFileRegion(new RandomAccessFile(file.toFile(), "r").getChannel(), position, count);
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void buffersFileRegionsAndCustomRegionsArriveWholeAndInOrder() throws Exception {
        Collector collector = new Collector();
        ExceptionRecorder errors = new ExceptionRecorder();
        Channel server = server(collector, errors);
        Channel client = client(server);
        Random random = new Random(7);
        ByteArrayOutputStream expected = new ByteArrayOutputStream();
        List<ChannelFuture> writes = new ArrayList<>();
        List<FileRegion> regions = new ArrayList<>();
        int[] sizes = {0, 1, 100, 16_379, 16_380, 16_381, 65_536, 200_000, 1 << 20};
        for (int i = 0; i < 60; i++) {
            int size = sizes[random.nextInt(sizes.length)];
            int position = random.nextInt(FILE_BYTES - size + 1);
            Object msg;
            switch (random.nextInt(3)) {
                case 0:
                    msg = Unpooled.wrappedBuffer(content, position, size);
                    break;
                case 1:
                    msg = fileRegion(position, size);
                    break;
                default:
                    // transfers at most 777 bytes a call, as a region over a slow source might
                    msg = new ArrayRegion(content, position, size, 777, Integer.MAX_VALUE);
                    break;
            }
            if (msg instanceof FileRegion) {
                regions.add((FileRegion) msg);
            }
            expected.write(content, position, size);
            writes.add(random.nextInt(4) == 0 ? client.writeAndFlush(msg) : client.write(msg));
        }
        client.flush();
        RdmaTestSupport.awaitAll(writes, 30_000, "the writes");
        for (ChannelFuture f : writes) {
            assertTrue(f.isSuccess(), () -> "write failed: " + RdmaTestSupport.describe(f.cause()));
        }
        client.close().sync();
        byte[] got = RdmaTestSupport.await(collector.done, 30_000, "the server's end of stream",
                () -> collector.bytes.size() + " bytes received");
        assertEquals(expected.size(), got.length, "bytes received");
        assertArrayEquals(expected.toByteArray(), got, "the bytes received, in order");
        for (FileRegion r : regions) {
            assertEquals(0, r.refCnt(), "a completed region is released");
        }
        assertTrue(errors.exceptions.isEmpty(), () -> "server exceptions: " + errors.exceptions);
        server.close().sync();
    }

    /**
     * DefaultFileRegions are read from their file straight into staging (counted in {@code fileReadBytes}), custom
     * regions through their transferTo: one at a non-zero position larger than a SEND, one of a File not opened
     * before its write (opened by it, closed with its release), with a custom region and buffers between them.
     */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void defaultFileRegionsAreReadFromTheirFileIntoStaging() throws Exception {
        assumeTrue(FileRegionReader.isAvailable(), () -> "DefaultFileRegions go through transferTo here: "
                + FileRegionReader.unavailabilityCause());
        Collector collector = new Collector();
        ExceptionRecorder errors = new ExceptionRecorder();
        Channel server = server(collector, errors);
        Channel client = client(server);
        int large = (1 << 20) + 5;
        DefaultFileRegion atPosition = fileRegion(11, large);
        DefaultFileRegion ofAFile = new DefaultFileRegion(file.toFile(), 100_003, 200_000);
        assertFalse(ofAFile.isOpen(), "not opened before its write");
        ArrayRegion custom = new ArrayRegion(content, 5000, 100_000, 777, Integer.MAX_VALUE);
        List<ChannelFuture> writes = new ArrayList<>();
        writes.add(client.write(Unpooled.wrappedBuffer(content, 0, 10)));
        writes.add(client.write(atPosition));
        writes.add(client.write(custom));
        writes.add(client.write(Unpooled.wrappedBuffer(content, 20, 30)));
        writes.add(client.writeAndFlush(ofAFile));
        RdmaTestSupport.awaitAll(writes, 30_000, "the writes");
        for (ChannelFuture f : writes) {
            assertTrue(f.isSuccess(), () -> "write failed: " + RdmaTestSupport.describe(f.cause()));
        }
        RdmaCounters counters = ((RdmaSocketChannel) client).counters();
        assertEquals(large + 200_000, counters.fileReadBytes(),
                "the DefaultFileRegions' bytes, read from their file (and no custom region's): " + counters);
        client.close().sync();
        byte[] got = RdmaTestSupport.await(collector.done, 30_000, "the server's end of stream",
                () -> collector.bytes.size() + " bytes received");
        ByteArrayOutputStream expected = new ByteArrayOutputStream();
        expected.write(content, 0, 10);
        expected.write(content, 11, large);
        expected.write(content, 5000, 100_000);
        expected.write(content, 20, 30);
        expected.write(content, 100_003, 200_000);
        assertArrayEquals(expected.toByteArray(), got, "the bytes received, in order");
        assertEquals(0, atPosition.refCnt(), "a completed region is released");
        assertEquals(0, ofAFile.refCnt(), "a completed region is released");
        assertFalse(ofAFile.isOpen(), "the file a region opened is closed with its release");
        assertTrue(errors.exceptions.isEmpty(), () -> "server exceptions: " + errors.exceptions);
        server.close().sync();
    }

    /**
     * A file truncated under a DefaultFileRegion, as epoll's sendfile path sees it: what the file still has arrives,
     * then the region's write fails with an IOException that says so, and the channel closes.
     */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aFileTruncatedUnderARegionFailsItsWriteAndClosesTheChannel() throws Exception {
        Collector collector = new Collector();
        ExceptionRecorder errors = new ExceptionRecorder();
        Channel server = server(collector, errors);
        Channel client = client(server);
        DefaultFileRegion region = fileRegion(1000, FILE_BYTES - 1000);
        int left = (1 << 20) + 7;
        try (FileChannel writer = FileChannel.open(file, StandardOpenOption.WRITE)) {
            writer.truncate(left);
        }
        ChannelFuture first = client.write(Unpooled.wrappedBuffer(content, 0, 1000));
        ChannelFuture broken = client.writeAndFlush(region);
        assertTrue(broken.await(30, TimeUnit.SECONDS), "the region's write completes");
        assertTrue(first.isSuccess(), () -> "the write before: " + RdmaTestSupport.describe(first.cause()));
        assertFalse(broken.isSuccess(), "the write of a region whose file was truncated");
        assertTrue(broken.cause() instanceof IOException, () -> RdmaTestSupport.describe(broken.cause()));
        if (FileRegionReader.isAvailable()) {
            String message = broken.cause().getMessage();
            assertTrue(message.contains("truncated") && message.contains("ended at byte " + left), message);
        }
        assertTrue(client.closeFuture().await(10, TimeUnit.SECONDS), "the client closes");
        byte[] got = RdmaTestSupport.await(collector.done, 30_000, "the server's end of stream",
                () -> collector.bytes.size() + " bytes received");
        assertTrue(got.length <= left, "bytes received: " + got.length);
        assertArrayEquals(Arrays.copyOf(content, got.length), got, "what arrived is the stream's start");
        assertEquals(0, region.refCnt(), "the failed region is released");
        server.close().sync();
    }

    /**
     * {@code shutdownOutput()} right behind a region's write, whose file was truncated under the part not posted yet:
     * the shutdown takes that part along by reading it from the file (as a socket's send buffer holds it,
     * {@code CloseLinger}), the read fails, and the write fails with the read's cause, naming the truncation (not
     * with the {@code ChannelOutputShutdownException} that writes after it get); the peer gets the stream's start and
     * its end, the region is released, and the channel closes once the peer has closed too.
     */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aRegionWhoseFileWasTruncatedBeforeShutdownOutputTookItAlongFailsItsWrite() throws Exception {
        Collector collector = new Collector();
        ExceptionRecorder errors = new ExceptionRecorder();
        Channel server = server(collector, errors);
        Channel client = client(server);
        client.config().setOption(ChannelOption.SO_SNDBUF, 2 * FILE_BYTES); // the shutdown takes the whole region
        DefaultFileRegion region = fileRegion(0, FILE_BYTES);
        int left = (1 << 20) + 7; // beyond what one credit window carries: read after the shutdown
        // in one task of the loop: the write posts what the credits allow, the file is truncated under the rest, and
        // the shutdown takes the rest along
        ChannelFuture broken = RdmaTestSupport.onLoop(client, () -> {
            ChannelFuture write = client.writeAndFlush(region);
            try (FileChannel writer = FileChannel.open(file, StandardOpenOption.WRITE)) {
                writer.truncate(left);
            }
            ((DuplexChannel) client).shutdownOutput();
            return write;
        });
        assertTrue(broken.await(30, TimeUnit.SECONDS), "the region's write completes");
        assertTrue(broken.cause() instanceof IOException && !(broken.cause() instanceof ChannelOutputShutdownException),
                () -> "the write of a region whose file was truncated fails with the cause: "
                        + RdmaTestSupport.describe(broken.cause()));
        if (FileRegionReader.isAvailable()) {
            String message = broken.cause().getMessage();
            assertTrue(message.contains("truncated") && message.contains("ended at byte " + left), message);
        }
        assertEquals(left, region.transferred(), "the shutdown read the region's file up to where it ends now");
        assertTrue(client.closeFuture().await(10, TimeUnit.SECONDS), "the client closes after the server did");
        byte[] got = RdmaTestSupport.await(collector.done, 30_000, "the server's end of stream",
                () -> collector.bytes.size() + " bytes received");
        assertTrue(got.length <= left, "bytes received: " + got.length);
        assertArrayEquals(Arrays.copyOf(content, got.length), got, "what arrived is the stream's start");
        assertTrue(errors.exceptions.isEmpty(), () -> "the server saw an orderly end: " + errors.exceptions);
        assertEquals(0, region.refCnt(), "the failed region is released");
        server.close().sync();
    }

    /** As over TCP: a close right after the write sends the region when it fits the send buffer, else fails it. */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void closeRightAfterAFileRegionSendsItWithinTheSendBufferOrFailsIt() throws Exception {
        // the first fits in SO_SNDBUF (2 MiB); of the second at most a send window is posted when the close comes; the
        // third fits too, a region of a File, not opened before its write
        for (int count : new int[] {(1 << 20) + 5, FILE_BYTES, (1 << 20) + 3}) {
            boolean ofAFile = count == (1 << 20) + 3;
            Collector collector = new Collector();
            ExceptionRecorder errors = new ExceptionRecorder();
            Channel server = server(collector, errors);
            Channel client = client(server);
            client.config().setOption(ChannelOption.SO_SNDBUF, 2 << 20);
            DefaultFileRegion region = ofAFile ? new DefaultFileRegion(file.toFile(), 11, count) : fileRegion(11, count);
            // write and close in one task of the loop: nothing is sent between them, however slow this thread is
            ChannelFuture write = RdmaTestSupport.onLoop(client, () -> {
                ChannelFuture w = client.writeAndFlush(region);
                client.close();
                return w;
            });
            assertTrue(write.await(30, TimeUnit.SECONDS), "the write completes");
            byte[] got = RdmaTestSupport.await(collector.done, 30_000, "the server's end of stream",
                    () -> collector.bytes.size() + " bytes received");
            byte[] sent = Arrays.copyOfRange(content, 11, 11 + count);
            if (count <= (2 << 20)) {
                assertTrue(write.isSuccess(), () -> "a region that fits in SO_SNDBUF fails: "
                        + RdmaTestSupport.describe(write.cause()));
                assertArrayEquals(sent, got, "a region whose write succeeded arrives whole");
            } else {
                assertFalse(write.isSuccess(), "a region larger than SO_SNDBUF, closed right after its write");
                assertTrue(got.length < count, "a failed write did not arrive whole");
                assertArrayEquals(Arrays.copyOf(sent, got.length), got, "what arrived of a failed write is its start");
            }
            assertEquals(0, region.refCnt(), "the region is released");
            assertFalse(region.isOpen(), "the region's file is closed");
            assertTrue(errors.exceptions.isEmpty(), () -> "server exceptions: " + errors.exceptions);
            server.close().sync();
        }
    }

    /** A region that throws part-way: its write fails with that cause, the channel closes, what came first arrives. */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aRegionThatFailsPartWayFailsItsWriteAndClosesTheChannel() throws Exception {
        Collector collector = new Collector();
        ExceptionRecorder errors = new ExceptionRecorder();
        Channel server = server(collector, errors);
        Channel client = client(server);
        ChannelFuture first = client.write(Unpooled.wrappedBuffer(content, 0, 1000));
        ArrayRegion failing = new ArrayRegion(content, 1000, 500_000, 4096, 100_000);
        ChannelFuture broken = client.write(failing);
        ChannelFuture after = client.writeAndFlush(Unpooled.wrappedBuffer(content, 501_000, 1000));
        assertTrue(after.await(30, TimeUnit.SECONDS), "the write after the failing region completes");
        assertTrue(first.isSuccess(), () -> "the write before: " + RdmaTestSupport.describe(first.cause()));
        assertFalse(broken.isSuccess(), "the failing region's write");
        assertFalse(after.isSuccess(), "the write after a failed region");
        assertTrue(client.closeFuture().await(10, TimeUnit.SECONDS), "the client closes");
        byte[] got = RdmaTestSupport.await(collector.done, 30_000, "the server's end of stream",
                () -> collector.bytes.size() + " bytes received");
        assertTrue(got.length >= 1000 && got.length <= 1000 + 100_000, "bytes received: " + got.length);
        assertArrayEquals(Arrays.copyOf(content, got.length), got, "what arrived is the stream's start");
        assertEquals(0, failing.refCnt(), "the failed region is released");
        server.close().sync();
    }

    /**
     * A region that writes more than it counts, as encrypting or framing regions do (Spark's SASL encryption): each
     * chunk goes out as its length (4 bytes) and its bytes, and {@code transferred()} moves only once a whole frame is
     * written. Frames larger than a SEND are written across several; the write completes when the last arrives.
     */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aRegionThatWritesMoreThanItCountsArrivesWhole() throws Exception {
        Collector collector = new Collector();
        ExceptionRecorder errors = new ExceptionRecorder();
        Channel server = server(collector, errors);
        Channel client = client(server);
        ByteArrayOutputStream expected = new ByteArrayOutputStream();
        List<ChannelFuture> writes = new ArrayList<>();
        int offset = 0;
        for (int chunk : new int[] {1000, 40_000, 16_380, 3, 40_000, 1000}) {
            int count = 100_003;
            // the last two: their count() shrinks as they take bytes into a frame (Spark's SASL encryption of a buffer)
            FramingRegion region = new FramingRegion(content, offset, count, chunk, writes.size() >= 8);
            expected.write(region.wire());
            writes.add(client.write(region));
            writes.add(client.write(Unpooled.wrappedBuffer(content, offset, 77)));
            expected.write(content, offset, 77);
            offset += count;
        }
        // and one taken along by a close: it fits in SO_SNDBUF
        FramingRegion last = new FramingRegion(content, offset, 300_000, 50_000, true);
        expected.write(last.wire());
        writes.add(client.writeAndFlush(last));
        client.close();
        RdmaTestSupport.awaitAll(writes, 30_000, "the writes");
        for (ChannelFuture f : writes) {
            assertTrue(f.isSuccess(), () -> "write failed: " + RdmaTestSupport.describe(f.cause()));
        }
        byte[] got = RdmaTestSupport.await(collector.done, 30_000, "the server's end of stream",
                () -> collector.bytes.size() + " bytes received");
        assertTrue(errors.exceptions.isEmpty(), () -> "server exceptions: " + errors.exceptions + " after "
                + got.length + " of " + expected.size() + " bytes");
        assertEquals(expected.size(), got.length, "bytes received");
        assertArrayEquals(expected.toByteArray(), got, "the bytes received, in order");
        server.close().sync();
    }

    /**
     * Counts {@code count} bytes of {@code data}; writes each chunk as a 4-byte length and the chunk. A shrinking one's
     * {@code count()} is the bytes it has not yet taken into a frame.
     */
    private static final class FramingRegion extends ArrayRegion {
        private final int chunk;
        private final boolean shrinking;
        private ByteBuffer frame;
        private long taken;

        FramingRegion(byte[] data, int offset, int count, int chunk, boolean shrinking) {
            super(data, offset, count, Integer.MAX_VALUE, Integer.MAX_VALUE);
            this.chunk = chunk;
            this.shrinking = shrinking;
        }

        @Override
        public long count() {
            return shrinking ? super.count() - taken : super.count();
        }

        byte[] wire() {
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            for (int at = 0; at < super.count(); at += chunk) {
                int n = (int) Math.min(chunk, super.count() - at);
                out.write(n >>> 24);
                out.write(n >>> 16);
                out.write(n >>> 8);
                out.write(n);
                out.write(data, offset + at, n);
            }
            return out.toByteArray();
        }

        @Override
        public long transferTo(WritableByteChannel target, long position) throws IOException {
            assertEquals(transferred, position, "transferTo position");
            if (frame == null) {
                int n = (int) Math.min(chunk, super.count() - position);
                frame = ByteBuffer.allocate(4 + n).putInt(n).put(data, offset + (int) position, n).flip();
                taken += n;
            }
            int written = target.write(frame);
            if (!frame.hasRemaining()) {
                transferred += frame.capacity() - 4;
                frame = null;
            }
            return written;
        }
    }

    /** A custom region over an array: at most {@code perCall} bytes a transferTo, an IOException at {@code failAt}. */
    private static class ArrayRegion extends AbstractReferenceCounted implements FileRegion {
        final byte[] data;
        final int offset;
        private final int count;
        private final int perCall;
        private final int failAt;
        long transferred;

        ArrayRegion(byte[] data, int offset, int count, int perCall, int failAt) {
            this.data = data;
            this.offset = offset;
            this.count = count;
            this.perCall = perCall;
            this.failAt = failAt;
        }

        @Override
        public long position() {
            return 0;
        }

        @Override
        @Deprecated
        public long transfered() {
            return transferred;
        }

        @Override
        public long transferred() {
            return transferred;
        }

        @Override
        public long count() {
            return count;
        }

        @Override
        public long transferTo(WritableByteChannel target, long position) throws IOException {
            assertEquals(transferred, position, "transferTo position");
            if (position >= failAt) {
                throw new IOException("the source failed at " + position);
            }
            int n = (int) Math.min(perCall, Math.min(count - position, failAt - position));
            int written = target.write(ByteBuffer.wrap(data, offset + (int) position, n));
            transferred += written;
            return written;
        }

        @Override
        public FileRegion retain() {
            super.retain();
            return this;
        }

        @Override
        public FileRegion retain(int increment) {
            super.retain(increment);
            return this;
        }

        @Override
        public FileRegion touch() {
            return this;
        }

        @Override
        public FileRegion touch(Object hint) {
            return this;
        }

        @Override
        protected void deallocate() {
        }
    }
}
