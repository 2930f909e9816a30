package org.nettyrdma.channel;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.WriteBufferWaterMark;
import io.netty.handler.codec.ByteToMessageDecoder;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.DefaultHttpRequest;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpChunkedInput;
import io.netty.handler.codec.http.HttpClientCodec;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpObjectAggregator;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpServerCodec;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.handler.stream.ChunkedInput;
import io.netty.handler.stream.ChunkedWriteHandler;
import io.netty.util.ReferenceCountUtil;
import io.netty.util.internal.SystemPropertyUtil;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.parallel.Execution;
import org.junit.jupiter.api.parallel.ExecutionMode;
import org.junit.jupiter.api.parallel.Isolated;
import org.nettyrdma.channel.RdmaTestSupport.ExceptionRecorder;
import org.nettyrdma.channel.RdmaTestSupport.Kind;
import org.nettyrdma.channel.RdmaTestSupport.Pattern;
import org.nettyrdma.channel.RdmaTestSupport.StreamReader;
import org.nettyrdma.channel.RdmaTestSupport.StreamWriter;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.LongSupplier;
import java.util.function.Supplier;
import java.util.zip.CRC32C;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Pipelines that hold what they receive (issue 9): aggregators, decoders that cumulate, handlers that keep buffers, and
 * a consumer that stops reading. A receive buffer lent to the pipeline must not stop the connection: each of these
 * moves far more than the receive buffers of a connection hold (16 x 16 KiB by default), and all of it must arrive,
 * byte-exact, while the pipeline holds it. The slow consumer checks the other side: a reader that does not read still
 * stops the writer, and nothing grows meanwhile. A stalled connection fails the test within
 * {@link RdmaTestSupport#stallMillis()} (nothing moved), not at the time limit.
 */
@Isolated("transport-level checks: global allocator counts, time bounds")
@Execution(ExecutionMode.SAME_THREAD)
class RdmaTransportPipelineTest {
    private static final long ONE_MIB = 1L << 20;
    private static final long SIXTEEN_MIB = 16L << 20;
    private static final long SIXTY_FOUR_MIB = 64L << 20;
    /** The bytes of one write (a chunk of an HTTP body or of a frame). */
    private static final int CHUNK = 64 << 10;
    /** A close that the peer can't take (no credits) turns abortive this soon, so a failed test ends quickly. */
    private static final int CLOSE_TIMEOUT_MILLIS = 2_000;
    private static final int LOW_WATER = 256 << 10;
    private static final int HIGH_WATER = 512 << 10;
    /** What ChannelOutboundBuffer adds to each entry's size in its pending-bytes count. */
    private static final int ENTRY_OVERHEAD =
            SystemPropertyUtil.getInt("io.netty.transport.outboundBufferEntrySizeOverhead", 96);

    private EventLoopGroup serverGroup;
    private EventLoopGroup clientGroup;
    private final List<Channel> channels = new java.util.concurrent.CopyOnWriteArrayList<>();

    @BeforeEach
    void setUp() {
        serverGroup = RdmaTestSupport.newGroup(1, "pipeline-server");
        clientGroup = RdmaTestSupport.newGroup(1, "pipeline-client");
    }

    @AfterEach
    void tearDown() throws InterruptedException {
        try {
            // closing tears the pipelines down: what their handlers still hold is released in handlerRemoved
            for (Channel ch : channels) {
                ch.close().await(3 * CLOSE_TIMEOUT_MILLIS, TimeUnit.MILLISECONDS);
            }
        } finally {
            RdmaTestSupport.shutdown(clientGroup, serverGroup);
        }
    }

    // --- HTTP: HttpServerCodec + HttpObjectAggregator hold the whole body until it is complete

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void httpPostOfOneMebibyteThroughAnAggregator() throws Exception {
        postThroughAggregator(ONE_MIB, 30_000);
    }

    @Test
    @Timeout(value = 240, unit = TimeUnit.SECONDS)
    void httpPostOfSixtyFourMebibytesThroughAnAggregator() throws Exception {
        postThroughAggregator(RdmaTestSupport.scaledBytes(SIXTY_FOUR_MIB, 1), 180_000);
    }

    private void postThroughAggregator(long size, long limitMillis) throws Exception {
        Pattern pattern = Pattern.standard();
        ExceptionRecorder serverErrors = new ExceptionRecorder();
        AtomicReference<RdmaSocketChannel> child = new AtomicReference<>();
        Channel server = bind(new ChannelInitializer<Channel>() {
            @Override
            protected void initChannel(Channel ch) {
                child.set((RdmaSocketChannel) ch);
                ch.pipeline().addLast(new HttpServerCodec(), new HttpObjectAggregator(Integer.MAX_VALUE),
                        new BodyDigest(pattern), serverErrors);
            }
        });
        ResponseRecorder response = new ResponseRecorder();
        RdmaSocketChannel client = connect(server, new ChannelInitializer<Channel>() {
            @Override
            protected void initChannel(Channel ch) {
                ch.pipeline().addLast(new HttpClientCodec(), new HttpObjectAggregator(1 << 20),
                        new ChunkedWriteHandler(), response);
            }
        });
        PatternInput body = new PatternInput(pattern, size);
        Supplier<String> state = () -> "body " + body.offset + "/" + size + " written, client " + client.counters()
                + ", client pendingWriteBytes=" + RdmaTestSupport.pendingWriteBytes(client) + ", server child "
                + counters(child.get()) + ", client exceptions=" + response.exceptions + ", server exceptions="
                + serverErrors.exceptions;

        long start = System.nanoTime();
        HttpRequest request = new DefaultHttpRequest(HttpVersion.HTTP_1_1, HttpMethod.POST, "/digest");
        request.headers().set(HttpHeaderNames.HOST, "localhost");
        HttpUtil.setContentLength(request, size);
        client.write(request);
        client.writeAndFlush(new HttpChunkedInput(body));
        String answer = RdmaTestSupport.awaitMoving(response.answer, progress(client, child),
                limitMillis, "no response to the " + mib(size) + " POST (HttpObjectAggregator on the server)", state);
        System.out.printf("[RdmaTransportPipelineTest] %s POST through HttpObjectAggregator answered in %.2f s%n",
                mib(size), (System.nanoTime() - start) / 1e9);

        assertEquals("200 OK length=" + size + " crc32c=" + Long.toHexString(body.crc.getValue()) + " mismatch=-1",
                answer, () -> "the server's digest of the body; " + state.get());
        assertTrue(response.exceptions.isEmpty() && serverErrors.exceptions.isEmpty(), state);
    }

    /** Answers a request with the length and CRC32C of its body and where it first differs from the pattern (-1). */
    static final class BodyDigest extends SimpleChannelInboundHandler<FullHttpRequest> {
        private final Pattern pattern;

        BodyDigest(Pattern pattern) {
            this.pattern = pattern;
        }

        @Override
        protected void channelRead0(ChannelHandlerContext ctx, FullHttpRequest request) {
            ByteBuf body = request.content();
            CRC32C crc = new CRC32C();
            RdmaTestSupport.crc(crc, body);
            String digest = "length=" + body.readableBytes() + " crc32c=" + Long.toHexString(crc.getValue())
                    + " mismatch=" + pattern.mismatch(body, 0);
            FullHttpResponse response = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.OK,
                    Unpooled.copiedBuffer(digest, StandardCharsets.US_ASCII));
            HttpUtil.setContentLength(response, response.content().readableBytes());
            ctx.writeAndFlush(response);
        }
    }

    /** The client's view of one response: "status text" ("200 OK length=..."). */
    static final class ResponseRecorder extends SimpleChannelInboundHandler<FullHttpResponse> {
        final CompletableFuture<String> answer = new CompletableFuture<>();
        final List<Throwable> exceptions = new java.util.concurrent.CopyOnWriteArrayList<>();

        @Override
        protected void channelRead0(ChannelHandlerContext ctx, FullHttpResponse response) {
            answer.complete(response.status() + " " + response.content().toString(StandardCharsets.US_ASCII));
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) throws Exception {
            answer.completeExceptionally(new AssertionError("the connection closed before the response"));
            super.channelInactive(ctx);
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            exceptions.add(cause);
            answer.completeExceptionally(cause);
        }
    }

    /** An HTTP body of {@code size} pattern bytes in chunks of {@link #CHUNK}, with its CRC32C. */
    static final class PatternInput implements ChunkedInput<ByteBuf> {
        private final Pattern pattern;
        private final long size;
        final CRC32C crc = new CRC32C();
        volatile long offset;

        PatternInput(Pattern pattern, long size) {
            this.pattern = pattern;
            this.size = size;
        }

        @Override
        public boolean isEndOfInput() {
            return offset == size;
        }

        @Override
        public void close() {
        }

        @Deprecated
        @Override
        public ByteBuf readChunk(ChannelHandlerContext ctx) {
            return readChunk(ctx.alloc());
        }

        @Override
        public ByteBuf readChunk(ByteBufAllocator allocator) {
            if (offset == size) {
                return null;
            }
            int n = (int) Math.min(CHUNK, size - offset);
            ByteBuf chunk = allocator.directBuffer(n);
            pattern.writeTo(chunk, offset, n);
            RdmaTestSupport.crc(crc, chunk);
            offset += n;
            return chunk;
        }

        @Override
        public long length() {
            return size;
        }

        @Override
        public long progress() {
            return offset;
        }
    }

    // --- a handler that keeps every buffer it receives until the whole message is there

    @Test
    @Timeout(value = 240, unit = TimeUnit.SECONDS)
    void handlerThatRetainsEveryBufferGetsSixtyFourMebibytes() throws Exception {
        long total = RdmaTestSupport.scaledBytes(SIXTY_FOUR_MIB, 1);
        Pattern pattern = Pattern.standard();
        ExceptionRecorder serverErrors = new ExceptionRecorder();
        AtomicReference<RdmaSocketChannel> child = new AtomicReference<>();
        RetainAll retainer = new RetainAll(pattern, total);
        Channel server = bind(new ChannelInitializer<Channel>() {
            @Override
            protected void initChannel(Channel ch) {
                child.set((RdmaSocketChannel) ch);
                ch.pipeline().addLast(retainer, serverErrors);
            }
        });
        StreamWriter writer = new StreamWriter(total, pattern, RdmaTestSupport.mixedPlan(256 << 10), 11);
        LineRecorder reply = new LineRecorder();
        long start = System.nanoTime(); // the writer starts at channelActive
        RdmaSocketChannel client = connect(server, new ChannelInitializer<Channel>() {
            @Override
            protected void initChannel(Channel ch) {
                ch.pipeline().addLast(writer, reply);
            }
        });
        Supplier<String> state = () -> writer.state() + ", server holds " + retainer.held.size() + " buffers, "
                + retainer.received + "/" + total + " bytes, client " + client.counters()
                + ", client pendingWriteBytes=" + RdmaTestSupport.pendingWriteBytes(client) + ", server child "
                + counters(child.get()) + ", server exceptions=" + serverErrors.exceptions + ", client exceptions="
                + reply.exceptions;

        String answer = RdmaTestSupport.awaitMoving(reply.line, progress(client, child), 180_000, "the server, which "
                + "keeps every buffer until all " + mib(total) + " are there, never had them all", state);
        System.out.printf("[RdmaTransportPipelineTest] %s retained by the server in %.2f s (%d buffers)%n", mib(total),
                (System.nanoTime() - start) / 1e9, retainer.buffers);
        assertEquals("received=" + total + " mismatch=-1 crc32c=" + Long.toHexString(writer.crc.getValue()), answer,
                () -> "the server's check of the retained bytes; " + state.get());
        RdmaTestSupport.await(writer.done, 10_000, "the client's writes completed", state);
        assertTrue(writer.exceptions.isEmpty() && reply.exceptions.isEmpty() && serverErrors.exceptions.isEmpty(),
                state);
    }

    /**
     * Keeps every buffer it reads (no release) until {@code total} bytes are there, then checks them against the
     * pattern, releases them all and answers "received=N mismatch=M crc32c=C\n".
     */
    static final class RetainAll extends ChannelInboundHandlerAdapter {
        private final Pattern pattern;
        private final long total;
        final List<ByteBuf> held = new java.util.concurrent.CopyOnWriteArrayList<>();
        volatile long received;
        volatile long buffers;

        RetainAll(Pattern pattern, long total) {
            this.pattern = pattern;
            this.total = total;
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf buf = (ByteBuf) msg;
            held.add(buf);
            received += buf.readableBytes();
            buffers++;
            if (received < total) {
                return;
            }
            long offset = 0;
            long mismatch = -1;
            CRC32C crc = new CRC32C();
            for (ByteBuf b : held) {
                long m = pattern.mismatch(b, offset);
                if (m >= 0 && mismatch < 0) {
                    mismatch = offset + m;
                }
                RdmaTestSupport.crc(crc, b);
                offset += b.readableBytes();
            }
            releaseAll();
            ctx.writeAndFlush(Unpooled.copiedBuffer("received=" + received + " mismatch=" + mismatch + " crc32c="
                    + Long.toHexString(crc.getValue()) + "\n", StandardCharsets.US_ASCII));
        }

        private void releaseAll() {
            for (ByteBuf b : held) {
                ReferenceCountUtil.release(b);
            }
            held.clear();
        }

        @Override
        public void handlerRemoved(ChannelHandlerContext ctx) {
            releaseAll();
        }
    }

    // --- ByteToMessageDecoder with the composite cumulator: a frame's buffers stay in the cumulation until it is whole

    @Test
    @Timeout(value = 240, unit = TimeUnit.SECONDS)
    void compositeCumulatorDecodesSixteenMebibyteFrames() throws Exception {
        int frameSize = (int) RdmaTestSupport.scaledBytes(SIXTEEN_MIB, CHUNK);
        int frames = 4;
        Pattern pattern = Pattern.standard();
        ExceptionRecorder serverErrors = new ExceptionRecorder();
        AtomicReference<RdmaSocketChannel> child = new AtomicReference<>();
        FrameChecker checker = new FrameChecker(pattern, frameSize, frames);
        Channel server = bind(new ChannelInitializer<Channel>() {
            @Override
            protected void initChannel(Channel ch) {
                child.set((RdmaSocketChannel) ch);
                ch.pipeline().addLast(new LengthPrefixedDecoder(), checker, serverErrors);
            }
        });
        FrameWriter writer = new FrameWriter(pattern, frameSize, frames);
        LineRecorder reply = new LineRecorder();
        long start = System.nanoTime(); // the writer starts at channelActive
        RdmaSocketChannel client = connect(server, new ChannelInitializer<Channel>() {
            @Override
            protected void initChannel(Channel ch) {
                ch.pipeline().addLast(writer, reply);
            }
        });
        Supplier<String> state = () -> "client wrote " + writer.frame + " frames + " + writer.offset + " bytes, server "
                + "decoded " + checker.frames + " frames, client " + client.counters() + ", client pendingWriteBytes="
                + RdmaTestSupport.pendingWriteBytes(client) + ", server child " + counters(child.get())
                + ", server exceptions=" + serverErrors.exceptions + ", client exceptions=" + reply.exceptions;

        String answer = RdmaTestSupport.awaitMoving(reply.line, progress(client, child), 180_000, "the "
                + "ByteToMessageDecoder (COMPOSITE_CUMULATOR) never had all " + frames + " frames of "
                + mib(frameSize), state);
        System.out.printf("[RdmaTransportPipelineTest] %d frames of %s through COMPOSITE_CUMULATOR in %.2f s%n", frames,
                mib(frameSize), (System.nanoTime() - start) / 1e9);
        assertEquals("frames=" + frames + " mismatches=[]", answer, () -> "the server's check of the frames; "
                + state.get());
        assertTrue(reply.exceptions.isEmpty() && serverErrors.exceptions.isEmpty(), state);
    }

    /** Frames of a 4-byte length and that many bytes; cumulates by composition, not by copying. */
    static final class LengthPrefixedDecoder extends ByteToMessageDecoder {
        LengthPrefixedDecoder() {
            setCumulator(COMPOSITE_CUMULATOR);
        }

        @Override
        protected void decode(ChannelHandlerContext ctx, ByteBuf in, List<Object> out) {
            if (in.readableBytes() < 4) {
                return;
            }
            int length = in.getInt(in.readerIndex());
            if (in.readableBytes() - 4 < length) {
                return;
            }
            in.skipBytes(4);
            out.add(in.readRetainedSlice(length));
        }
    }

    /** Checks each frame against the pattern (frame i: stream bytes [i * size, (i + 1) * size)); answers at the end. */
    static final class FrameChecker extends ChannelInboundHandlerAdapter {
        private final Pattern pattern;
        private final int frameSize;
        private final int expected;
        private final List<String> mismatches = new ArrayList<>();
        volatile int frames;

        FrameChecker(Pattern pattern, int frameSize, int expected) {
            this.pattern = pattern;
            this.frameSize = frameSize;
            this.expected = expected;
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf frame = (ByteBuf) msg;
            try {
                if (frame.readableBytes() != frameSize) {
                    mismatches.add("frame " + frames + ": " + frame.readableBytes() + " bytes");
                } else {
                    long m = pattern.mismatch(frame, (long) frames * frameSize);
                    if (m >= 0) {
                        mismatches.add("frame " + frames + " at " + m);
                    }
                }
            } finally {
                frame.release();
            }
            if (++frames == expected) {
                ctx.writeAndFlush(Unpooled.copiedBuffer("frames=" + frames + " mismatches=" + mismatches + "\n",
                        StandardCharsets.US_ASCII));
            }
        }
    }

    /** Writes {@code frames} length-prefixed frames of pattern bytes, in chunks, while the channel is writable. */
    static final class FrameWriter extends ChannelInboundHandlerAdapter {
        private final Pattern pattern;
        private final int frameSize;
        private final int frames;
        volatile int frame;
        volatile int offset;

        FrameWriter(Pattern pattern, int frameSize, int frames) {
            this.pattern = pattern;
            this.frameSize = frameSize;
            this.frames = frames;
        }

        @Override
        public void channelActive(ChannelHandlerContext ctx) throws Exception {
            writeMore(ctx);
            super.channelActive(ctx);
        }

        @Override
        public void channelWritabilityChanged(ChannelHandlerContext ctx) throws Exception {
            if (ctx.channel().isWritable()) {
                writeMore(ctx);
            }
            super.channelWritabilityChanged(ctx);
        }

        private void writeMore(ChannelHandlerContext ctx) {
            boolean wrote = false;
            while (frame < frames && ctx.channel().isWritable()) {
                if (offset == 0) {
                    ctx.write(Unpooled.buffer(4).writeInt(frameSize));
                }
                int n = Math.min(CHUNK, frameSize - offset);
                ByteBuf chunk = ctx.alloc().directBuffer(n);
                pattern.writeTo(chunk, (long) frame * frameSize + offset, n);
                ctx.write(chunk);
                wrote = true;
                offset += n;
                if (offset == frameSize) {
                    offset = 0;
                    frame++;
                }
            }
            if (wrote) {
                ctx.flush();
            }
        }
    }

    // --- a handler that keeps some buffers: the rest of the message must still come

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void handlerThatKeepsFourteenBuffersGetsTheRestOfTheMessage() throws Exception {
        int kept = 14;
        int writeSize = 1024;
        int total = 64 << 10;
        Pattern pattern = Pattern.standard();
        ExceptionRecorder serverErrors = new ExceptionRecorder();
        AtomicReference<RdmaSocketChannel> child = new AtomicReference<>();
        KeepFirst keeper = new KeepFirst(pattern, kept, total);
        Channel server = bind(new ChannelInitializer<Channel>() {
            @Override
            protected void initChannel(Channel ch) {
                child.set((RdmaSocketChannel) ch);
                ch.pipeline().addLast(keeper, serverErrors);
            }
        });
        LineRecorder reply = new LineRecorder();
        RdmaSocketChannel client = connect(server, reply);
        Supplier<String> state = () -> "server keeps " + keeper.held.size() + " buffers, received " + keeper.received
                + "/" + total + " bytes in " + keeper.reads + " reads, client " + client.counters()
                + ", client pendingWriteBytes=" + RdmaTestSupport.pendingWriteBytes(client) + ", server child "
                + counters(child.get()) + ", server exceptions=" + serverErrors.exceptions + ", client exceptions="
                + reply.exceptions;

        // 64 writes of 1 KiB, each flushed on its own: each is a message of its own while the credits last
        RdmaTestSupport.onLoop(client, () -> {
            for (int offset = 0; offset < total; offset += writeSize) {
                ByteBuf b = RdmaTestSupport.newBuffer(Kind.DIRECT, pattern, offset, writeSize, null);
                client.writeAndFlush(b);
            }
            return null;
        });
        String answer = RdmaTestSupport.awaitMoving(reply.line, progress(client, child), 30_000, "the rest of a "
                + "64 KiB message to a server that keeps its first " + kept + " buffers of 1 KiB did not arrive",
                state);
        // (with pooled credits the window starts at 4: the writes waiting for credits go out in fewer, larger messages)
        assertEquals("received=" + total + " mismatch=-1 kept=" + Math.min(kept, keeper.reads), answer,
                () -> "the server's check; " + state.get());
        assertTrue(reply.exceptions.isEmpty() && serverErrors.exceptions.isEmpty(), state);
    }

    /** Keeps the first {@code keep} buffers it reads, releases the others; checks all; answers when all are there. */
    static final class KeepFirst extends ChannelInboundHandlerAdapter {
        private final Pattern pattern;
        private final int keep;
        private final long total;
        final List<ByteBuf> held = new java.util.concurrent.CopyOnWriteArrayList<>();
        volatile long received;
        volatile int reads;
        private long mismatch = -1;

        KeepFirst(Pattern pattern, int keep, long total) {
            this.pattern = pattern;
            this.keep = keep;
            this.total = total;
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf buf = (ByteBuf) msg;
            reads++;
            long m = pattern.mismatch(buf, received);
            if (m >= 0 && mismatch < 0) {
                mismatch = received + m;
            }
            received += buf.readableBytes();
            if (held.size() < keep) {
                held.add(buf);
            } else {
                buf.release();
            }
            if (received == total) {
                ctx.writeAndFlush(Unpooled.copiedBuffer("received=" + received + " mismatch=" + mismatch + " kept="
                        + held.size() + "\n", StandardCharsets.US_ASCII));
            }
        }

        @Override
        public void handlerRemoved(ChannelHandlerContext ctx) {
            for (ByteBuf b : held) {
                ReferenceCountUtil.release(b);
            }
            held.clear();
        }
    }

    // --- a consumer that stops reading: the writer stops, nothing grows, then everything arrives

    @Test
    @Timeout(value = 180, unit = TimeUnit.SECONDS)
    void slowConsumerStopsTheWriterWithoutGrowthThenGetsEverything() throws Exception {
        long total = Math.max(8 * ONE_MIB, RdmaTestSupport.scaledBytes(4 * SIXTEEN_MIB, 1));
        int maxWrite = 64 << 10;
        long memoryBound = 3 * ONE_MIB;
        Pattern pattern = Pattern.standard();
        StreamReader reader = new StreamReader(total, pattern);
        ExceptionRecorder serverErrors = new ExceptionRecorder();
        AtomicReference<RdmaSocketChannel> child = new AtomicReference<>();
        Channel server = RdmaTestSupport.serverBootstrap(serverGroup, serverGroup)
                .childOption(ChannelOption.AUTO_READ, false)
                .childOption(RdmaChannelOption.CLOSE_TIMEOUT_MILLIS, CLOSE_TIMEOUT_MILLIS)
                .childHandler(new ChannelInitializer<Channel>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        child.set((RdmaSocketChannel) ch);
                        channels.add(ch);
                        ch.pipeline().addLast(reader, serverErrors);
                    }
                }).bind(RdmaTestSupport.anyPort()).sync().channel();
        channels.add(server);
        long baselineBytes = RdmaByteBufAllocator.DEFAULT.bytesInUse();
        StreamWriter writer = new StreamWriter(total, pattern, RdmaTestSupport.mixedPlan(maxWrite), 23);
        RdmaSocketChannel client = connect(server, writer);
        Supplier<String> state = () -> writer.state() + ", " + reader.state() + ", client writable="
                + client.isWritable() + ", client pendingWriteBytes=" + RdmaTestSupport.pendingWriteBytes(client)
                + ", client " + client.counters() + ", server child " + counters(child.get())
                + ", allocator bytesInUse=" + RdmaByteBufAllocator.DEFAULT.bytesInUse() + " (baseline " + baselineBytes
                + "), server exceptions=" + serverErrors.exceptions;

        // 1. the server does not read: the client turns unwritable and stops writing
        RdmaTestSupport.awaitCondition("the client turned unwritable while the server does not read",
                () -> !client.isWritable(), 20_000, state);
        long[] last = {writer.written};
        long[] since = {System.nanoTime()};
        RdmaTestSupport.awaitCondition("the client stopped writing while the server does not read", () -> {
            long w = writer.written;
            if (w != last[0]) {
                last[0] = w;
                since[0] = System.nanoTime();
            }
            return System.nanoTime() - since[0] > TimeUnit.SECONDS.toNanos(1);
        }, 20_000, state);
        assertTrue(writer.written < total, () -> "everything was written while the server did not read: "
                + state.get());

        // 2. a few seconds without reading: nothing grows
        long writtenAtStop = writer.written;
        long receivedAtStop = counters(child.get()).bytesReceived();
        long maxPending = 0;
        long maxInUse = 0;
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(3);
        while (System.nanoTime() - end < 0) {
            maxPending = Math.max(maxPending, RdmaTestSupport.pendingWriteBytes(client));
            maxInUse = Math.max(maxInUse, RdmaByteBufAllocator.DEFAULT.bytesInUse() - baselineBytes);
            Thread.sleep(20);
        }
        assertFalse(client.isWritable(), () -> "the client turned writable though the server does not read: "
                + state.get());
        assertEquals(writtenAtStop, writer.written, () -> "the client went on writing while the server did not read: "
                + state.get());
        assertEquals(receivedAtStop, counters(child.get()).bytesReceived(),
                () -> "the server went on receiving while it did not read: " + state.get());
        assertEquals(0, reader.reads, "the server read with autoRead off");
        long pendingBound = HIGH_WATER + maxWrite + ENTRY_OVERHEAD;
        long maxPendingSeen = maxPending;
        assertTrue(maxPending <= pendingBound, () -> "the client's outbound buffer held " + maxPendingSeen
                + " bytes, more than the high water mark and one write (" + pendingBound + "): " + state.get());
        long maxInUseSeen = maxInUse;
        assertTrue(maxInUse <= memoryBound, () -> "RdmaByteBufAllocator.DEFAULT held up to " + maxInUseSeen
                + " bytes more than before the stream while the server did not read (bound " + memoryBound
                + "): something buffers without bound; " + state.get());

        System.out.printf("[RdmaTransportPipelineTest] slow consumer: the client stopped at %d of %d bytes; for 3 s its "
                + "outbound buffer held at most %d bytes, the allocator at most %d more than before%n", writtenAtStop,
                total, maxPending, maxInUse);

        // 3. the server reads again: every byte arrives, once, in order
        child.get().config().setAutoRead(true);
        long received = RdmaTestSupport.awaitMoving(reader.done, progress(client, child), 120_000,
                "the whole stream after autoRead=true", state);
        assertEquals(total, received);
        RdmaTestSupport.await(writer.done, 10_000, "the client's writes completed", state);
        assertEquals(writer.crc.getValue(), reader.crc.getValue(), "CRC32C, written vs received");
        assertEquals(total, counters(child.get()).bytesReceived(), "server child bytesReceived");
        assertTrue(writer.exceptions.isEmpty() && reader.exceptions.isEmpty() && serverErrors.exceptions.isEmpty(),
                state);
    }

    // --- fixture

    private Channel bind(ChannelInitializer<Channel> childInit) throws InterruptedException {
        Channel server = RdmaTestSupport.serverBootstrap(serverGroup, serverGroup)
                .childOption(RdmaChannelOption.CLOSE_TIMEOUT_MILLIS, CLOSE_TIMEOUT_MILLIS)
                .childHandler(new ChannelInitializer<Channel>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        channels.add(ch);
                        ch.pipeline().addLast(childInit);
                    }
                }).bind(RdmaTestSupport.anyPort()).sync().channel();
        channels.add(server);
        return server;
    }

    private RdmaSocketChannel connect(Channel server, io.netty.channel.ChannelHandler handler)
            throws InterruptedException {
        RdmaSocketChannel client = (RdmaSocketChannel) RdmaTestSupport.clientBootstrap(clientGroup)
                .option(ChannelOption.WRITE_BUFFER_WATER_MARK, new WriteBufferWaterMark(LOW_WATER, HIGH_WATER))
                .option(RdmaChannelOption.CLOSE_TIMEOUT_MILLIS, CLOSE_TIMEOUT_MILLIS)
                .handler(handler)
                .connect(server.localAddress()).sync().channel();
        channels.add(0, client);
        return client;
    }

    /** Bytes received on both ends: what {@link RdmaTestSupport#awaitMoving} watches. */
    private static LongSupplier progress(RdmaSocketChannel client, AtomicReference<RdmaSocketChannel> child) {
        return () -> client.counters().bytesReceived() + counters(child.get()).bytesReceived();
    }

    private static final RdmaCounters NO_COUNTERS = new RdmaCounters();

    private static RdmaCounters counters(RdmaSocketChannel ch) {
        return ch == null ? NO_COUNTERS : ch.counters();
    }

    private static String mib(long bytes) {
        return bytes % ONE_MIB == 0 ? bytes / ONE_MIB + " MiB" : bytes + "-byte";
    }

    /** Collects what arrives as ASCII up to the first newline. */
    static final class LineRecorder extends ChannelInboundHandlerAdapter {
        final CompletableFuture<String> line = new CompletableFuture<>();
        final List<Throwable> exceptions = new java.util.concurrent.CopyOnWriteArrayList<>();
        private final StringBuilder text = new StringBuilder();

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf buf = (ByteBuf) msg;
            try {
                text.append(buf.toString(StandardCharsets.US_ASCII));
            } finally {
                buf.release();
            }
            int nl = text.indexOf("\n");
            if (nl >= 0) {
                line.complete(text.substring(0, nl));
            }
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) throws Exception {
            line.completeExceptionally(new AssertionError("the connection closed before the answer (got \"" + text
                    + "\")"));
            super.channelInactive(ctx);
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            exceptions.add(cause);
            line.completeExceptionally(cause);
        }
    }
}
