package org.nettyrdma.examples;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.epoll.Epoll;
import io.netty.handler.codec.ByteToMessageDecoder;
import io.netty.util.concurrent.Promise;
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.Logger;
import org.nettyrdma.channel.Rdma;
import org.nettyrdma.channel.RdmaIoHandlerConfig;
import org.nettyrdma.examples.echo.EchoServerHandler;

import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;

/** The README demo: ping-pong latency and streaming throughput of the same Netty handlers over RDMA, NIO, epoll. */
public final class TransportDemo {
    private static final Logger logger = LogManager.getLogger(TransportDemo.class);
    private static final int[] SIZES = {64, 4096, 65536};
    private static final int PING_SIZE = 64;
    private static final long PING_WARMUP_NS = TimeUnit.MILLISECONDS.toNanos(2000);
    private static final long PING_MEASURE_NS = TimeUnit.MILLISECONDS.toNanos(1000);
    /** Streams of 1 MiB, doubled while a run is short, warm up; their last rate sizes the measured runs. */
    private static final long STREAM_WARMUP_NS = TimeUnit.MILLISECONDS.toNanos(400);
    private static final long STREAM_RUN_NS = TimeUnit.MILLISECONDS.toNanos(250);
    private static final int STREAM_RUNS = 3;
    private static final long RUN_TIMEOUT_S = 20;
    /** Byte {@code i} of every stream is {@code PATTERN[i % PERIOD]} (a prime, so no message size divides it). */
    private static final int PERIOD = 65537;
    private static final int MAX_MESSAGE = 65536;
    private static final ByteBuf PATTERN;
    /** The first byte a client sends: the server echoes, or verifies and acknowledges a stream of a given length. */
    private static final byte ECHO = 1;
    private static final byte SINK = 2;

    static {
        ByteBuf pattern = Unpooled.directBuffer(PERIOD + MAX_MESSAGE);
        SplittableRandom random = new SplittableRandom(42);
        for (int i = 0; i < PERIOD; i++) {
            pattern.writeByte(random.nextInt());
        }
        pattern.writeBytes(pattern, 0, MAX_MESSAGE); // so that any message is one contiguous slice of it
        PATTERN = Unpooled.unreleasableBuffer(pattern.asReadOnly());
    }

    private static final AtomicLong VERIFIED_BYTES = new AtomicLong();

    private TransportDemo() {
    }

    public static void main(String[] args) {
        List<String> argList = Arrays.asList(args);
        boolean emulated = argList.contains("--emulated");
        String address = argList.stream().filter(a -> !a.startsWith("--")).findFirst().orElse(null);
        PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);

        List<Transport> transports = new ArrayList<>();
        String host = "127.0.0.1";
        if (!emulated && address != null && Transport.nativeRdmaOn(address)) {
            host = address;
            out.println("RDMA: native provider (rdma-core)");
            transports.add(Transport.rdma(RdmaIoHandlerConfig.PROVIDER_NATIVE));
        } else {
            out.println("RDMA: emulated provider (in-process, no network) - " + (emulated ? "asked for (--emulated)"
                    : !Rdma.isAvailable() ? "native RDMA unavailable: " + oneLine(Rdma.unavailabilityCause())
                    : "for native RDMA, give the address of an RDMA interface (see `rdma link show`)"));
            transports.add(Transport.rdma(RdmaIoHandlerConfig.PROVIDER_EMULATED));
        }
        transports.add(Transport.nio());
        if (Epoll.isAvailable()) {
            transports.add(Transport.epoll());
        } else {
            out.println("epoll: skipped - " + oneLine(Epoll.unavailabilityCause()));
        }
        out.println("One process; per transport a server and a client event loop (one thread each) on " + host
                + ", the same handlers on each.");
        out.println();
        out.println((" ".repeat(18) + center("64 B ping-pong", 17) + ' ' + center("streaming, MB/s", 26))
                .stripTrailing());
        out.printf(Locale.ROOT, "%-17s %8s %8s %8s %8s %8s%n", "transport", "p50 µs", "p99 µs", "64 B", "4 KiB",
                "64 KiB");
        boolean failed = false;
        for (Transport transport : transports) {
            try {
                out.println(measure(transport, host));
            } catch (Exception e) {
                failed = true;
                out.printf(Locale.ROOT, "%-17s failed: %s%n", transport, e);
                logger.error("{} failed", transport, e);
            }
        }
        out.println();
        out.printf(Locale.ROOT, "p50/p99: round trips of one 64 B message echoed by the server, after %d ms of warm-up"
                + "%n", TimeUnit.NANOSECONDS.toMillis(PING_WARMUP_NS));
        out.printf(Locale.ROOT, "MB/s:    10^6 bytes/s the server received, written as messages of that size while the"
                + " channel is writable;%n         the median of %d runs of ~%d ms after %d ms of warm-up%n",
                STREAM_RUNS, TimeUnit.NANOSECONDS.toMillis(STREAM_RUN_NS),
                TimeUnit.NANOSECONDS.toMillis(STREAM_WARMUP_NS));
        out.printf(Locale.ROOT, "verified: all %.1f MB echoed or streamed, byte by byte against the sender's pattern%n",
                VERIFIED_BYTES.get() / 1e6);
        System.exit(failed ? 1 : 0);
    }

    /** One table row: ping-pong, then a stream of each size, over a fresh server and client on {@code transport}. */
    private static String measure(Transport transport, String host) throws Exception {
        EventLoopGroup serverGroup = transport.newGroup(1);
        EventLoopGroup clientGroup = transport.newGroup(1);
        try {
            Channel server = transport.serverBootstrap(serverGroup)
                    .childHandler(new ChannelInitializer<Channel>() {
                        @Override
                        protected void initChannel(Channel ch) {
                            ch.pipeline().addLast(new ModeDecoder());
                        }
                    })
                    .bind(host, 0).sync().channel();
            InetSocketAddress address = (InetSocketAddress) server.localAddress();

            long[] rttNs = run(transport, clientGroup, address, PingPong::new);
            Arrays.sort(rttNs);
            StringBuilder row = new StringBuilder(String.format(Locale.ROOT, "%-17s %8.1f %8.1f", transport,
                    percentile(rttNs, 0.50) / 1e3, percentile(rttNs, 0.99) / 1e3));
            for (int size : SIZES) {
                long bytes = size * (long) ((1 << 20) / size + 1);
                long warmUntilNs = System.nanoTime() + STREAM_WARMUP_NS;
                long elapsedNs;
                do {
                    elapsedNs = stream(transport, clientGroup, address, size, bytes);
                    if (elapsedNs < STREAM_RUN_NS / 2) {
                        bytes *= 2;
                    }
                } while (System.nanoTime() - warmUntilNs < 0);
                bytes = Math.max(1, (long) ((double) bytes * STREAM_RUN_NS / elapsedNs / size)) * size;
                double[] megabytesPerSecond = new double[STREAM_RUNS];
                for (int i = 0; i < STREAM_RUNS; i++) {
                    megabytesPerSecond[i] = bytes * 1e3 / stream(transport, clientGroup, address, size, bytes);
                }
                Arrays.sort(megabytesPerSecond);
                row.append(String.format(Locale.ROOT, " %8.1f", megabytesPerSecond[STREAM_RUNS / 2]));
            }
            server.close().sync();
            return row.toString();
        } finally {
            clientGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).syncUninterruptibly();
            serverGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).syncUninterruptibly();
        }
    }

    private static long stream(Transport transport, EventLoopGroup group, InetSocketAddress address, int size,
                               long bytes) throws Exception {
        long elapsedNs = run(transport, group, address, done -> new Streamer(size, bytes, done));
        VERIFIED_BYTES.addAndGet(bytes);
        return elapsedNs;
    }

    /** Connects a client with the handler {@code handlerFor} makes, and waits for the result it promises. */
    private static <T> T run(Transport transport, EventLoopGroup group, InetSocketAddress address,
                             Function<Promise<T>, ChannelHandler> handlerFor) throws Exception {
        Promise<T> done = group.next().newPromise();
        Channel channel = transport.bootstrap(group).handler(handlerFor.apply(done)).connect(address).sync().channel();
        try {
            if (!done.await(RUN_TIMEOUT_S, TimeUnit.SECONDS)) {
                throw new TimeoutException("no result within " + RUN_TIMEOUT_S + " s");
            }
            return done.sync().getNow();
        } finally {
            channel.close().sync();
        }
    }

    /** Whether {@code in}'s readable bytes are the pattern's bytes at stream position {@code position}. */
    private static boolean matches(ByteBuf in, long position) {
        int n = in.readableBytes();
        for (int done = 0; done < n; ) {
            int offset = (int) ((position + done) % PERIOD);
            int length = Math.min(n - done, PATTERN.capacity() - offset);
            if (!ByteBufUtil.equals(in, in.readerIndex() + done, PATTERN, offset, length)) {
                return false;
            }
            done += length;
        }
        return true;
    }

    private static ByteBuf message(ChannelHandlerContext ctx, long position, int size) {
        return ctx.alloc().buffer(size).writeBytes(PATTERN, (int) (position % PERIOD), size);
    }

    private static long percentile(long[] sorted, double p) {
        return sorted[Math.min(sorted.length - 1, Math.max(0, (int) Math.ceil(p * sorted.length) - 1))];
    }

    private static String center(String s, int width) {
        int left = (width - s.length()) / 2;
        return " ".repeat(left) + s + " ".repeat(width - s.length() - left);
    }

    private static String oneLine(Throwable t) {
        return t == null ? "" : String.valueOf(t.getMessage()).replaceAll("\\s*\\R\\s*", " ");
    }

    /** Server: reads the mode byte (and a stream's length), then hands the connection to the echo or the sink. */
    private static final class ModeDecoder extends ByteToMessageDecoder {
        @Override
        protected void decode(ChannelHandlerContext ctx, ByteBuf in, List<Object> out) {
            byte mode = in.getByte(in.readerIndex());
            if (mode == ECHO) {
                in.skipBytes(1);
                ctx.pipeline().addAfter(ctx.name(), null, EchoServerHandler.INSTANCE);
            } else if (mode == SINK && in.readableBytes() >= 9) {
                in.skipBytes(1);
                ctx.pipeline().addAfter(ctx.name(), null, new Sink(in.readLong()));
            } else if (mode == SINK) {
                return;
            } else {
                throw new IllegalStateException("unknown mode " + mode);
            }
            ctx.pipeline().remove(this); // passes on what follows the header
        }
    }

    /** Server: checks every byte of a stream, and acknowledges its length when all of it arrived. */
    private static final class Sink extends ChannelInboundHandlerAdapter {
        private final long length;
        private long received;

        Sink(long length) {
            this.length = length;
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf in = (ByteBuf) msg;
            try {
                if (received + in.readableBytes() > length || !matches(in, received)) {
                    logger.error("{}: stream corrupted in bytes {}..{}", ctx.channel(), received,
                            received + in.readableBytes());
                    ctx.close();
                    return;
                }
                received += in.readableBytes();
            } finally {
                in.release();
            }
            if (received == length) {
                ctx.writeAndFlush(ctx.alloc().buffer(8).writeLong(received));
            }
        }
    }

    /** Client: sends one 64 B message, waits until the echo is back whole and checked, repeats; times each. */
    private static final class PingPong extends ChannelInboundHandlerAdapter {
        private final Promise<long[]> done;
        private final long[] rttNs = new long[1 << 20];
        private int samples;
        private long measureFromNs;
        private long measureUntilNs;
        private long sentNs;
        private long position;
        private int due;

        PingPong(Promise<long[]> done) {
            this.done = done;
        }

        @Override
        public void channelActive(ChannelHandlerContext ctx) {
            ctx.write(ctx.alloc().buffer(1).writeByte(ECHO), ctx.voidPromise());
            measureFromNs = System.nanoTime() + PING_WARMUP_NS;
            measureUntilNs = measureFromNs + PING_MEASURE_NS;
            ping(ctx);
        }

        private void ping(ChannelHandlerContext ctx) {
            due = PING_SIZE;
            sentNs = System.nanoTime();
            ctx.writeAndFlush(message(ctx, position, PING_SIZE), ctx.voidPromise());
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf in = (ByteBuf) msg;
            int n = in.readableBytes();
            boolean ok = n <= due && matches(in, position);
            in.release();
            if (!ok) {
                done.tryFailure(new IOException("echo corrupted in bytes " + position + ".." + (position + n)));
                ctx.close();
                return;
            }
            position += n;
            due -= n;
            if (due > 0) {
                return;
            }
            long nowNs = System.nanoTime();
            if (nowNs - measureFromNs >= 0) {
                rttNs[samples++] = nowNs - sentNs;
            }
            if (nowNs - measureUntilNs >= 0 || samples == rttNs.length) {
                VERIFIED_BYTES.addAndGet(position);
                done.trySuccess(Arrays.copyOf(rttNs, samples));
            } else {
                ping(ctx);
            }
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            done.tryFailure(new IOException("connection closed during the ping-pong"));
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            done.tryFailure(cause);
            ctx.close();
        }
    }

    /** Client: writes {@code length} bytes in {@code size}-byte messages while writable; promises the time to ack. */
    private static final class Streamer extends ChannelInboundHandlerAdapter {
        private final int size;
        private final long length;
        private final Promise<Long> done;
        private long startNs;
        private long written;
        private boolean writing;
        private long ack;
        private int ackBytes;

        Streamer(int size, long length, Promise<Long> done) {
            this.size = size;
            this.length = length;
            this.done = done;
        }

        @Override
        public void channelActive(ChannelHandlerContext ctx) {
            startNs = System.nanoTime();
            ctx.write(ctx.alloc().buffer(9).writeByte(SINK).writeLong(length), ctx.voidPromise());
            writeMore(ctx);
        }

        @Override
        public void channelWritabilityChanged(ChannelHandlerContext ctx) {
            writeMore(ctx);
        }

        private void writeMore(ChannelHandlerContext ctx) {
            if (writing) { // write() and flush() may fire channelWritabilityChanged
                return;
            }
            writing = true;
            while (written < length && ctx.channel().isWritable()) {
                ByteBuf m = message(ctx, written, size);
                written += size;
                ctx.write(m, ctx.voidPromise());
            }
            ctx.flush();
            writing = false;
            if (written < length && ctx.channel().isWritable()) {
                ctx.executor().execute(() -> writeMore(ctx));
            }
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf in = (ByteBuf) msg;
            while (in.isReadable() && ackBytes < 8) {
                ack = ack << 8 | in.readUnsignedByte();
                ackBytes++;
            }
            in.release();
            if (ackBytes == 8) {
                long elapsedNs = System.nanoTime() - startNs;
                if (ack == length) {
                    done.trySuccess(elapsedNs);
                } else {
                    done.tryFailure(new IOException("the server acknowledged " + ack + " bytes, not " + length));
                }
            }
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            done.tryFailure(new IOException("the server closed the connection before it acknowledged the stream"
                    + " (corrupted? see its log)"));
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            done.tryFailure(new IOException("streaming failed after " + written + " bytes were written ("
                    + cause + "); did the server find it corrupted? see its log", cause));
            ctx.close();
        }
    }
}
