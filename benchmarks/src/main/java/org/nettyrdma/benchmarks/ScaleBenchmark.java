package org.nettyrdma.benchmarks;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.util.concurrent.DefaultThreadFactory;
import org.nettyrdma.channel.RdmaByteBufAllocator;
import org.nettyrdma.channel.RdmaCounters;
import org.nettyrdma.channel.RdmaIoHandler;
import org.nettyrdma.channel.RdmaIoHandlerConfig;
import org.nettyrdma.channel.RdmaServerSocketChannel;
import org.nettyrdma.channel.RdmaSocketChannel;

import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * Many connections to one server (issue 11's scale target): {@code N} clients connect, then every one echoes
 * {@code --bytes} of checked data through the server at once; the registered memory of the server's and the clients'
 * event loops ({@link RdmaIoHandler#counters}: receive buffers, or the receives reserved in a shared receive queue, send
 * staging, rings) and of the process's registered allocator (what is really pinned: every receive buffer, posted or
 * spare, server and clients together) is printed when all are connected and idle, at its peak during the echoes
 * (sampled every 20 ms), and again after {@code --settle} seconds of idleness.
 *
 * <pre>
 * java -cp benchmarks/target/benchmarks.jar org.nettyrdma.benchmarks.ScaleBenchmark \
 *     [--connections 10000] [--bytes 4096] [--server-loops 0] [--client-loops 8] [--connects-at-once 256]
 *     [--settle 3] [--provider emulated] [--host 127.0.0.1]
 * </pre>
 * {@code --server-loops 0} is Netty's default (twice the cores). The loops take their settings from
 * {@link RdmaIoHandlerConfig}'s system properties ({@code -Dorg.nettyrdma.sharedReceiveQueue=true} and so on).
 */
public final class ScaleBenchmark {
    private static final int SAMPLE_MILLIS = 20;

    public static void main(String[] args) throws Exception {
        int connections = 10_000;
        int bytes = 4096;
        int serverLoops = 0;
        int clientLoops = 8;
        int atOnce = 256;
        double settle = 3;
        String provider = RdmaIoHandlerConfig.PROVIDER_EMULATED;
        String host = "127.0.0.1";
        for (int i = 0; i < args.length; i += 2) {
            String value = i + 1 < args.length ? args[i + 1] : null;
            switch (args[i]) {
                case "--connections" -> connections = Integer.parseInt(value);
                case "--bytes" -> bytes = Integer.parseInt(value);
                case "--server-loops" -> serverLoops = Integer.parseInt(value);
                case "--client-loops" -> clientLoops = Integer.parseInt(value);
                case "--connects-at-once" -> atOnce = Integer.parseInt(value);
                case "--settle" -> settle = Double.parseDouble(value);
                case "--provider" -> provider = value;
                case "--host" -> host = value;
                default -> throw new IllegalArgumentException("unknown argument " + args[i] + " (--connections N, "
                        + "--bytes B, --server-loops N, --client-loops N, --connects-at-once N, --settle S, "
                        + "--provider P, --host H)");
            }
        }
        RdmaIoHandlerConfig config = new RdmaIoHandlerConfig().setProvider(provider);
        EventLoopGroup serverGroup = new MultiThreadIoEventLoopGroup(serverLoops,
                new DefaultThreadFactory("scale-server"), RdmaIoHandler.newFactory(config));
        EventLoopGroup clientGroup = new MultiThreadIoEventLoopGroup(clientLoops,
                new DefaultThreadFactory("scale-client"), RdmaIoHandler.newFactory(config));
        try {
            run(serverGroup, clientGroup, connections, bytes, atOnce, settle, host, config);
        } finally {
            clientGroup.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
            serverGroup.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
        }
    }

    private static void run(EventLoopGroup serverGroup, EventLoopGroup clientGroup, int connections, int bytes,
                            int atOnce, double settle, String host, RdmaIoHandlerConfig config) throws Exception {
        Channel server = new ServerBootstrap().group(serverGroup).channel(RdmaServerSocketChannel.class)
                .childHandler(EchoHandler.INSTANCE).bind(new InetSocketAddress(host, 0)).sync().channel();
        System.out.printf(Locale.ROOT, "%d connections to one server, %d bytes echoed each; server loops %s, client "
                + "loops %s; shared receive queue %s%n", connections, bytes, loops(serverGroup), loops(clientGroup),
                config.getSharedReceiveQueue() == null ? "by device (auto)" : config.getSharedReceiveQueue());
        long start = System.nanoTime();
        List<Channel> clients = new ArrayList<>(connections);
        List<EchoCheck> checks = new ArrayList<>(connections);
        int failed = 0;
        String firstFailure = null;
        for (int from = 0; from < connections; from += atOnce) {
            List<ChannelFuture> wave = new ArrayList<>();
            for (int i = from; i < Math.min(connections, from + atOnce); i++) {
                EchoCheck check = new EchoCheck(bytes, i);
                checks.add(check);
                wave.add(new Bootstrap().group(clientGroup).channel(RdmaSocketChannel.class).handler(check)
                        .connect(server.localAddress()));
            }
            for (ChannelFuture f : wave) {
                if (f.awaitUninterruptibly(60_000) && f.isSuccess()) {
                    clients.add(f.channel());
                } else {
                    failed++;
                    firstFailure = firstFailure != null ? firstFailure : String.valueOf(f.cause());
                }
            }
        }
        double connectSeconds = (System.nanoTime() - start) / 1e9;
        System.out.printf(Locale.ROOT, "connected %d, failed %d in %.1f s%s%n", clients.size(), failed,
                connectSeconds, firstFailure == null ? "" : " (first: " + firstFailure + ")");
        Thread.sleep(500); // the handshakes' last messages
        print("idle, all connected", serverGroup, clientGroup, clients.size());

        long echoStart = System.nanoTime();
        for (EchoCheck c : checks) {
            c.start();
        }
        Peak peak = new Peak(serverGroup, clientGroup);
        int done = 0;
        int wrong = 0;
        String firstWrong = null;
        for (EchoCheck c : checks) {
            if (c.channel == null) {
                continue;
            }
            while (!c.done.isDone()) {
                peak.sample();
                Thread.sleep(SAMPLE_MILLIS);
                if (System.nanoTime() - echoStart > TimeUnit.MINUTES.toNanos(5)) {
                    break;
                }
            }
            if (c.done.isDone() && !c.done.isCompletedExceptionally()) {
                done++;
            } else {
                wrong++;
                firstWrong = firstWrong != null ? firstWrong : c.state();
            }
        }
        peak.sample();
        System.out.printf(Locale.ROOT, "echoed %d, wrong or unfinished %d in %.1f s%s%n", done, wrong,
                (System.nanoTime() - echoStart) / 1e9, firstWrong == null ? "" : " (first: " + firstWrong + ")");
        System.out.printf(Locale.ROOT, "%-28s server loops %9.1f MiB, client loops %9.1f MiB (%.1f / %.1f KiB a "
                + "connection)%n", "peak during the echoes", mib(peak.server), mib(peak.client),
                kib(peak.server) / Math.max(1, clients.size()), kib(peak.client) / Math.max(1, clients.size()));
        Thread.sleep((long) (settle * 1000));
        print("idle again after " + settle + " s", serverGroup, clientGroup, clients.size());
        for (Channel c : clients) {
            c.close();
        }
        for (Channel c : clients) {
            c.closeFuture().awaitUninterruptibly(10_000);
        }
        server.close().sync();
        if (failed > 0 || wrong > 0) {
            System.exit(1);
        }
    }

    private static String loops(EventLoopGroup group) {
        int n = 0;
        for (Object ignored : group) {
            n++;
        }
        return String.valueOf(n);
    }

    private static void print(String when, EventLoopGroup serverGroup, EventLoopGroup clientGroup, int connections) {
        RdmaCounters s = RdmaIoHandler.counters(serverGroup);
        RdmaCounters c = RdmaIoHandler.counters(clientGroup);
        System.out.printf(Locale.ROOT, "%-28s server loops %9.1f MiB, client loops %9.1f MiB (%.1f / %.1f KiB a "
                + "connection); queue pairs %d / %d; registered allocator %9.1f MiB (both ends)%n", when,
                mib(s.registeredBytes()), mib(c.registeredBytes()), kib(s.registeredBytes()) / Math.max(1, connections),
                kib(c.registeredBytes()) / Math.max(1, connections), s.queuePairs(), c.queuePairs(),
                mib(RdmaByteBufAllocator.DEFAULT.registeredBytes()));
    }

    private static double mib(long bytes) {
        return bytes / 1048576.0;
    }

    private static double kib(long bytes) {
        return bytes / 1024.0;
    }

    /** The most registered bytes the loops' counters showed. */
    private static final class Peak {
        private final EventLoopGroup serverGroup;
        private final EventLoopGroup clientGroup;
        long server;
        long client;

        Peak(EventLoopGroup serverGroup, EventLoopGroup clientGroup) {
            this.serverGroup = serverGroup;
            this.clientGroup = clientGroup;
        }

        void sample() {
            server = Math.max(server, RdmaIoHandler.counters(serverGroup).registeredBytes());
            client = Math.max(client, RdmaIoHandler.counters(clientGroup).registeredBytes());
        }
    }

    /** Writes its bytes (a pattern of its index) when {@link #start}ed and checks the echo byte by byte. */
    private static final class EchoCheck extends ChannelInboundHandlerAdapter {
        private final int bytes;
        private final int seed;
        final CompletableFuture<Void> done = new CompletableFuture<>();
        volatile Channel channel;
        private int received;

        EchoCheck(int bytes, int seed) {
            this.bytes = bytes;
            this.seed = seed;
        }

        private byte expected(int offset) {
            return (byte) (offset * 31 + seed);
        }

        @Override
        public void channelActive(ChannelHandlerContext ctx) {
            channel = ctx.channel();
        }

        void start() {
            Channel ch = channel;
            if (ch == null) {
                return;
            }
            ch.eventLoop().execute(() -> {
                ByteBuf b = ch.alloc().directBuffer(bytes);
                for (int i = 0; i < bytes; i++) {
                    b.writeByte(expected(i));
                }
                ch.writeAndFlush(b);
            });
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf b = (ByteBuf) msg;
            try {
                for (int i = b.readerIndex(); i < b.writerIndex(); i++, received++) {
                    if (received >= bytes || b.getByte(i) != expected(received)) {
                        done.completeExceptionally(new IllegalStateException("wrong byte at " + received));
                        return;
                    }
                }
                if (received == bytes) {
                    done.complete(null);
                }
            } finally {
                b.release();
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            done.completeExceptionally(cause);
            ctx.close();
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            done.completeExceptionally(new IllegalStateException("closed after " + received + " bytes"));
        }

        String state() {
            return "received " + received + " of " + bytes + (done.isCompletedExceptionally() ? ", failed: "
                    + done.handle((v, t) -> String.valueOf(t)).join() : "");
        }
    }
}
