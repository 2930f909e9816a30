package org.nettyrdma.benchmarks;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelOption;
import io.netty.channel.WriteBufferWaterMark;
import io.netty.channel.EventLoop;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.util.ReferenceCountUtil;
import io.netty.util.concurrent.DefaultThreadFactory;
import org.nettyrdma.channel.RdmaChannelOption;
import org.nettyrdma.channel.RdmaIoHandler;
import org.nettyrdma.channel.RdmaIoHandlerConfig;
import org.nettyrdma.channel.RdmaServerSocketChannel;
import org.nettyrdma.channel.RdmaSocketChannel;

import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Fairness of one event loop: {@code N} ping-pong connections (one 64 B message echoed at a time each) and one
 * firehose connection (messages written flat out while the channel is writable, discarded by the server), every client
 * channel on one client event loop and every server channel on one server event loop. It measures the ping-pong round
 * trips (p50, p99, p99.9, max over all connections) without the firehose, then with it, and the firehose's MB/s, and
 * counts the round trips of the slowest connection: a starved connection shows as a p99 and max far above the run
 * without the firehose, or as a connection with few round trips.
 *
 * <pre>
 * java -cp benchmarks/target/benchmarks.jar org.nettyrdma.benchmarks.FairnessBenchmark \
 *     [--connections 100] [--seconds 5] [--firehose-size 65536] [--firehose-buffers 16] [--firehose-water-mark 65536]
 *     [--provider emulated] [--host 127.0.0.1]
 * </pre>
 * {@code --firehose-buffers} is the firehose connection's {@code RECEIVE_BUFFER_COUNT} (its credits) on both ends,
 * {@code --firehose-water-mark} its high write-buffer water mark: with the defaults it has one 64 KiB write in flight;
 * raised, it keeps as many SENDs in flight as its credits allow.
 * <pre>
 * </pre>
 * The event loops take their settings from {@link RdmaIoHandlerConfig}'s system properties
 * ({@code -Dorg.nettyrdma.adaptiveBusyPoll=true} and so on).
 */
public final class FairnessBenchmark {
    private static final int PING_SIZE = 64;
    private static final int MAX_SAMPLES = 1 << 23;

    private final int connections;
    private final double seconds;
    private final int firehoseSize;
    private final String provider;
    private final String host;
    private final int firehoseBuffers;
    private final int firehoseHighWaterMark;

    /** Round-trip samples, written by the client loop only (every client channel is on it). */
    private final long[] samples = new long[MAX_SAMPLES];
    private int sampleCount;
    private boolean recording;
    private final AtomicLong firehoseBytes = new AtomicLong();

    private FairnessBenchmark(int connections, double seconds, int firehoseSize, String provider, String host,
                              int firehoseBuffers, int firehoseHighWaterMark) {
        this.firehoseBuffers = firehoseBuffers;
        this.firehoseHighWaterMark = firehoseHighWaterMark;
        this.connections = connections;
        this.seconds = seconds;
        this.firehoseSize = firehoseSize;
        this.provider = provider;
        this.host = host;
    }

    public static void main(String[] args) throws Exception {
        int connections = 100;
        double seconds = 5;
        int firehoseSize = 65536;
        String provider = RdmaIoHandlerConfig.PROVIDER_EMULATED;
        String host = "127.0.0.1";
        int firehoseBuffers = 16;
        int firehoseHighWaterMark = 64 * 1024;
        for (int i = 0; i < args.length; i++) {
            String value = i + 1 < args.length ? args[i + 1] : null;
            switch (args[i]) {
                case "--connections" -> connections = Integer.parseInt(value);
                case "--seconds" -> seconds = Double.parseDouble(value);
                case "--firehose-size" -> firehoseSize = Integer.parseInt(value);
                case "--provider" -> provider = value;
                case "--host" -> host = value;
                case "--firehose-buffers" -> firehoseBuffers = Integer.parseInt(value);
                case "--firehose-water-mark" -> firehoseHighWaterMark = Integer.parseInt(value);
                default -> throw new IllegalArgumentException("unknown argument " + args[i] + " (--connections N, "
                        + "--seconds S, --firehose-size BYTES, --provider emulated|native, --host IP, --firehose-buffers N, --firehose-water-mark BYTES)");
            }
            i++;
        }
        new FairnessBenchmark(connections, seconds, firehoseSize, provider, host, firehoseBuffers,
                firehoseHighWaterMark).run();
    }

    private void run() throws Exception {
        RdmaIoHandlerConfig config = new RdmaIoHandlerConfig().setProvider(provider);
        EventLoopGroup serverGroup = new MultiThreadIoEventLoopGroup(1, new DefaultThreadFactory("fair-server"),
                RdmaIoHandler.newFactory(config));
        EventLoopGroup clientGroup = new MultiThreadIoEventLoopGroup(1, new DefaultThreadFactory("fair-client"),
                RdmaIoHandler.newFactory(config));
        try {
            Channel echo = new ServerBootstrap().group(serverGroup).channel(RdmaServerSocketChannel.class)
                    .childHandler(EchoHandler.INSTANCE).bind(new InetSocketAddress(host, 0)).sync().channel();
            Channel discard = new ServerBootstrap().group(serverGroup).channel(RdmaServerSocketChannel.class)
                    .childOption(RdmaChannelOption.RECEIVE_BUFFER_COUNT, firehoseBuffers)
                    .childHandler(new Discard()).bind(new InetSocketAddress(host, 0)).sync().channel();
            EventLoop clientLoop = clientGroup.next();
            List<Ping> pings = new ArrayList<>();
            for (int i = 0; i < connections; i++) {
                Ping p = new Ping();
                pings.add(p);
                p.channel = new Bootstrap().group(clientLoop).channel(RdmaSocketChannel.class).handler(p)
                        .connect(echo.localAddress()).sync().channel();
            }
            System.out.printf(Locale.ROOT, "fairness: %d ping-pong connections (%d B) and 1 firehose (%d B messages, %d receive buffers, "
                    + "high water mark %d B), "
                    + "one client and one server event loop, %s provider, adaptiveBusyPoll=%s busyPollNanos=%d "
                    + "busyPollMaxNanos=%d, %.1f s per phase%n", connections, PING_SIZE, firehoseSize, firehoseBuffers,
                    firehoseHighWaterMark, provider,
                    config.isAdaptiveBusyPoll(), config.getBusyPollNanos(), config.getBusyPollMaxNanos(), seconds);
            phase("warm-up, no firehose", clientLoop, pings, false);

            phase("ping-pong alone", clientLoop, pings, true);
            Firehose firehose = new Firehose();
            Channel fire = new Bootstrap().group(clientLoop).channel(RdmaSocketChannel.class).handler(firehose)
                    .option(RdmaChannelOption.RECEIVE_BUFFER_COUNT, firehoseBuffers)
                    .option(ChannelOption.WRITE_BUFFER_WATER_MARK,
                            new WriteBufferWaterMark(firehoseHighWaterMark / 2, firehoseHighWaterMark))
                    .connect(discard.localAddress()).sync().channel();
            Thread.sleep(500);
            long before = firehoseBytes.get();
            long t0 = System.nanoTime();
            phase("ping-pong with the firehose", clientLoop, pings, true);
            double mbps = (firehoseBytes.get() - before) / ((System.nanoTime() - t0) / 1e9) / 1e6;
            System.out.printf(Locale.ROOT, "  firehose meanwhile: %.1f MB/s received by the server%n", mbps);
            firehose.stopped = true;
            fire.close().sync();
            for (Ping p : pings) {
                p.channel.close().sync();
            }
        } finally {
            clientGroup.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
            serverGroup.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
        }
    }

    /** Runs every ping-pong connection for {@link #seconds}, then prints (if {@code print}) what it measured. */
    private void phase(String name, EventLoop clientLoop, List<Ping> pings, boolean print)
            throws Exception {
        clientLoop.submit(() -> {
            sampleCount = 0;
            recording = true;
            for (Ping p : pings) {
                p.roundTrips = 0;
                p.start();
            }
        }).sync();
        Thread.sleep((long) (seconds * 1000));
        long[] result = clientLoop.submit(() -> {
            recording = false;
            long min = Long.MAX_VALUE;
            long total = 0;
            for (Ping p : pings) {
                p.running = false;
                min = Math.min(min, p.roundTrips);
                total += p.roundTrips;
            }
            return new long[] {min, total};
        }).get();
        // let the messages in flight come back before the next phase
        Thread.sleep(200);
        if (!print) {
            return;
        }
        long[] s = Arrays.copyOf(samples, sampleCount);
        Arrays.sort(s);
        System.out.printf(Locale.ROOT, "%-28s round trips %9d (slowest connection %7d)  p50 %8.1f µs  p99 %8.1f µs  "
                + "p99.9 %8.1f µs  max %9.1f µs%n", name, result[1], result[0], pct(s, 0.50), pct(s, 0.99),
                pct(s, 0.999), s.length == 0 ? 0 : s[s.length - 1] / 1e3);
    }

    private static double pct(long[] sorted, double p) {
        if (sorted.length == 0) {
            return 0;
        }
        int i = (int) Math.ceil(p * sorted.length) - 1;
        return sorted[Math.max(0, Math.min(sorted.length - 1, i))] / 1e3;
    }

    /** A ping-pong connection: one 64 B message out, the echo back, again. */
    private final class Ping extends ChannelInboundHandlerAdapter {
        Channel channel;
        boolean running;
        long roundTrips;
        private int received;
        private long sentNs;

        void start() {
            running = true;
            send();
        }

        private void send() {
            ByteBuf b = channel.alloc().directBuffer(PING_SIZE);
            b.writeZero(PING_SIZE);
            received = 0;
            sentNs = System.nanoTime();
            channel.writeAndFlush(b, channel.voidPromise());
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            received += ((ByteBuf) msg).readableBytes();
            ReferenceCountUtil.release(msg);
            if (received < PING_SIZE) {
                return;
            }
            if (received > PING_SIZE) {
                throw new IllegalStateException("echo of " + received + " bytes, sent " + PING_SIZE);
            }
            long rtt = System.nanoTime() - sentNs;
            roundTrips++;
            if (recording && sampleCount < MAX_SAMPLES) {
                samples[sampleCount++] = rtt;
            }
            if (running) {
                send();
            }
        }
    }

    /** Writes messages while the channel is writable, until it closes. */
    private final class Firehose extends ChannelInboundHandlerAdapter {
        /** Set before the channel is closed: an RDMA channel stays active while its close waits for its sends. */
        volatile boolean stopped;

        @Override
        public void channelActive(ChannelHandlerContext ctx) {
            fill(ctx);
        }

        @Override
        public void channelWritabilityChanged(ChannelHandlerContext ctx) {
            fill(ctx);
        }

        private void fill(ChannelHandlerContext ctx) {
            Channel ch = ctx.channel();
            boolean wrote = false;
            while (!stopped && ch.isActive() && ch.isWritable()) {
                ByteBuf b = ctx.alloc().directBuffer(firehoseSize);
                b.writerIndex(firehoseSize); // the contents do not matter: the server discards them
                ctx.write(b, ctx.voidPromise());
                wrote = true;
            }
            if (wrote) {
                ctx.flush();
            }
        }
    }

    @ChannelHandler.Sharable
    private final class Discard extends ChannelInboundHandlerAdapter {
        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            firehoseBytes.addAndGet(((ByteBuf) msg).readableBytes());
            ReferenceCountUtil.release(msg);
        }
    }
}
