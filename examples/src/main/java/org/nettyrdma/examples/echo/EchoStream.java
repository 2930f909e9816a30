package org.nettyrdma.examples.echo;

import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.util.concurrent.Promise;
import org.nettyrdma.examples.Transport;

import java.net.InetSocketAddress;
import java.util.Arrays;
import java.util.Locale;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32C;

/**
 * A long echo stream with checksums, for links that lose, reorder or break: the client streams a known pattern to the
 * server for a byte count or a time, the server echoes it, the client checks every byte (and CRC32C of both
 * directions) and reports the throughput, or, when the connection fails, how long after the last byte it received
 * the failure was seen. Used by vm/two-host across two guests: {@code EchoStream server HOST PORT [--once]},
 * {@code EchoStream client HOST PORT (--bytes N | --seconds S) [--limit S]}.
 * Exit code: 0 intact, 3 the connection failed (reported with its cause), 4 nothing happened within --limit seconds
 * of the last byte (a hang), 2 usage.
 */
public final class EchoStream {
    static final int OK = 0;
    static final int FAILED = 3;
    static final int HUNG = 4;

    /** The stream's byte at position p is PATTERN[p % PATTERN.length]: a prime length, so a misplaced block shows. */
    private static final byte[] PATTERN = new byte[65521];
    private static final int MAX_WRITE = 65536;

    static {
        new SplittableRandom(13).nextBytes(PATTERN);
    }

    private EchoStream() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 3 || !("server".equals(args[0]) || "client".equals(args[0]))) {
            System.err.println("usage: EchoStream server HOST PORT [--once] [--limit S] [--emulated]\n"
                    + "       EchoStream client HOST PORT (--bytes N | --seconds S) [--limit S] [--emulated]");
            System.exit(2);
        }
        InetSocketAddress address = new InetSocketAddress(args[1], Integer.parseInt(args[2]));
        long bytes = Long.MAX_VALUE;
        double seconds = Double.MAX_VALUE;
        double limitSeconds = 120;
        for (int i = 3; i < args.length; i++) {
            switch (args[i]) {
                case "--bytes": bytes = Long.parseLong(args[++i]); break;
                case "--seconds": seconds = Double.parseDouble(args[++i]); break;
                case "--limit": limitSeconds = Double.parseDouble(args[++i]); break;
                case "--once": case "--emulated": break;
                default:
                    System.err.println("EchoStream: unknown argument " + args[i]);
                    System.exit(2);
            }
        }
        Transport transport = Transport.rdma(Arrays.asList(args).contains("--emulated"));
        EventLoopGroup group = transport.newGroup(1);
        int rc;
        try {
            long limitNs = (long) (limitSeconds * 1e9);
            if ("server".equals(args[0])) {
                rc = serve(transport, group, address, Arrays.asList(args).contains("--once"), limitNs);
            } else {
                rc = stream(transport, group, address, bytes, (long) Math.min(seconds * 1e9, Long.MAX_VALUE),
                        limitNs);
            }
        } finally {
            group.shutdownGracefully(0, 2, TimeUnit.SECONDS);
        }
        System.exit(rc);
    }

    /**
     * Serves echo connections at {@code address}; with {@code once}, returns when the first one has ended:
     * {@link #OK} closed by the peer, {@link #FAILED} failed, {@link #HUNG} nothing for {@code limitNs} after its
     * last byte. Without {@code once}, serves until the process is stopped.
     */
    static int serve(Transport transport, EventLoopGroup group, InetSocketAddress address, boolean once,
                     long limitNs) throws InterruptedException {
        Promise<Integer> first = group.next().newPromise();
        Channel server = transport.serverBootstrap(group)
                .childHandler(new ChannelInitializer<Channel>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        ch.pipeline().addLast(new ServerHandler(first));
                    }
                })
                .bind(address).sync().channel();
        say("server: listening on " + server.localAddress() + " over " + transport);
        try {
            if (!once) {
                server.closeFuture().sync();
                return OK;
            }
            return waitFor(first, () -> ServerHandler.lastActivityNs, limitNs, "server");
        } finally {
            server.close().sync();
        }
    }

    /**
     * Streams to the echo server at {@code address} until {@code bytes} were sent or {@code durationNs} passed, then
     * waits for the last echo: {@link #OK} every byte came back intact, {@link #FAILED} the connection failed or the
     * echo differed, {@link #HUNG} nothing happened for {@code limitNs}.
     */
    static int stream(Transport transport, EventLoopGroup group, InetSocketAddress address, long bytes,
                      long durationNs, long limitNs) throws InterruptedException {
        Promise<Integer> done = group.next().newPromise();
        ClientHandler handler = new ClientHandler(bytes, durationNs, done);
        Channel channel;
        try {
            channel = transport.bootstrap(group).handler(handler).connect(address).sync().channel();
        } catch (Exception e) {
            say("client: FAILED: cannot connect to " + address + ": " + e);
            return FAILED;
        }
        say("client: connected " + channel.localAddress() + " -> " + channel.remoteAddress() + " over " + transport);
        try {
            return waitFor(done, () -> handler.lastActivityNs, limitNs, "client");
        } finally {
            channel.close().await(5, TimeUnit.SECONDS);
        }
    }

    /** Waits for {@code result}, giving up when nothing happened for {@code limitNs} since the last activity. */
    private static int waitFor(Promise<Integer> result, java.util.function.LongSupplier lastActivityNs, long limitNs,
                               String side) throws InterruptedException {
        while (!result.await(200, TimeUnit.MILLISECONDS)) {
            long last = lastActivityNs.getAsLong();
            if (last != 0 && System.nanoTime() - last > limitNs) {
                say(side + ": HUNG: nothing happened for " + (System.nanoTime() - last) / 1_000_000
                        + " ms since the last byte received, and the connection has not failed");
                result.trySuccess(HUNG); // the close that follows is not reported as a failure
                return HUNG;
            }
        }
        return result.getNow();
    }

    static void say(String line) {
        System.out.println(String.format(Locale.ROOT, "[%.3f] %s", System.currentTimeMillis() / 1000.0, line));
        System.out.flush();
    }

    private static String mbps(long bytes, long ns) {
        return String.format(Locale.ROOT, "%.2f MB/s", ns == 0 ? 0 : bytes * 1e3 / ns);
    }

    /** Echoes, honouring writability; reports how the connection ended and how long after its last byte. */
    private static final class ServerHandler extends ChannelInboundHandlerAdapter {
        static volatile long lastActivityNs;
        private final Promise<Integer> ended;
        private long bytes;
        private Throwable cause;

        ServerHandler(Promise<Integer> ended) {
            this.ended = ended;
        }

        @Override
        public void channelActive(ChannelHandlerContext ctx) {
            lastActivityNs = System.nanoTime();
            say("server: connection from " + ctx.channel().remoteAddress());
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            lastActivityNs = System.nanoTime();
            bytes += ((ByteBuf) msg).readableBytes();
            ctx.write(msg, ctx.voidPromise());
        }

        @Override
        public void channelReadComplete(ChannelHandlerContext ctx) {
            ctx.flush();
            if (!ctx.channel().isWritable()) {
                ctx.channel().config().setAutoRead(false);
            }
        }

        @Override
        public void channelWritabilityChanged(ChannelHandlerContext ctx) {
            ctx.channel().config().setAutoRead(ctx.channel().isWritable());
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            if (this.cause == null) {
                this.cause = cause;
            }
            ctx.close();
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            long sinceMs = (System.nanoTime() - lastActivityNs) / 1_000_000;
            if (cause == null) {
                say("server: connection from " + ctx.channel().remoteAddress() + " closed by the peer after "
                        + bytes + " bytes echoed");
                ended.trySuccess(OK);
            } else {
                say("server: FAILED: connection from " + ctx.channel().remoteAddress() + " failed " + sinceMs
                        + " ms after the last byte received (" + bytes + " bytes echoed): " + cause);
                ended.trySuccess(FAILED);
            }
        }
    }

    /** Streams the pattern while writable; checks every echoed byte against it. */
    private static final class ClientHandler extends ChannelInboundHandlerAdapter {
        private final long limitBytes;
        private final long durationNs;
        private final Promise<Integer> done;
        private final SplittableRandom sizes = new SplittableRandom(17);
        private final CRC32C sentCrc = new CRC32C();
        private final CRC32C receivedCrc = new CRC32C();
        volatile long lastActivityNs;
        private long startNs;
        private long lastReportNs;
        private long sent;
        private long received;
        private boolean stopped;
        private Throwable cause;

        ClientHandler(long limitBytes, long durationNs, Promise<Integer> done) {
            this.limitBytes = limitBytes;
            this.durationNs = durationNs;
            this.done = done;
        }

        @Override
        public void channelActive(ChannelHandlerContext ctx) {
            startNs = lastReportNs = lastActivityNs = System.nanoTime();
            writeMore(ctx);
        }

        @Override
        public void channelWritabilityChanged(ChannelHandlerContext ctx) {
            writeMore(ctx);
        }

        private void writeMore(ChannelHandlerContext ctx) {
            while (!stopped && ctx.channel().isWritable()) {
                if (sent >= limitBytes || System.nanoTime() - startNs >= durationNs) {
                    stopped = true;
                    say("client: sent " + sent + " bytes, waiting for the rest of the echo");
                    break;
                }
                int n = (int) Math.min(1 + sizes.nextInt(MAX_WRITE), limitBytes - sent);
                ByteBuf buf = ctx.alloc().buffer(n);
                int offset = (int) (sent % PATTERN.length);
                for (int left = n; left > 0; ) {
                    int chunk = Math.min(left, PATTERN.length - offset);
                    buf.writeBytes(PATTERN, offset, chunk);
                    sentCrc.update(PATTERN, offset, chunk);
                    left -= chunk;
                    offset = 0;
                }
                sent += n;
                ctx.write(buf, ctx.voidPromise());
            }
            ctx.flush();
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf in = (ByteBuf) msg;
            try {
                long now = System.nanoTime();
                lastActivityNs = now;
                int n = in.readableBytes();
                int offset = (int) (received % PATTERN.length);
                for (int i = in.readerIndex(), end = i + n; i < end; i++) {
                    if (in.getByte(i) != PATTERN[offset]) {
                        cause = new IllegalStateException("the echo differs from what was sent at byte "
                                + (received + i - in.readerIndex()));
                        ctx.close();
                        return;
                    }
                    if (++offset == PATTERN.length) {
                        offset = 0;
                    }
                }
                receivedCrc.update(in.nioBuffer());
                received += n;
                if (now - lastReportNs > 2_000_000_000L) {
                    lastReportNs = now;
                    say("client: " + received + " bytes echoed intact, " + mbps(received, now - startNs));
                }
                if (stopped && received == sent) {
                    long ns = now - startNs;
                    boolean same = sentCrc.getValue() == receivedCrc.getValue();
                    say(String.format(Locale.ROOT, "client: %s: %d bytes echoed intact in %.1f s, %s each way, "
                                    + "crc32c sent %08x received %08x", same ? "OK" : "FAILED", received, ns / 1e9,
                            mbps(received, ns), sentCrc.getValue(), receivedCrc.getValue()));
                    done.trySuccess(same ? OK : FAILED);
                    ctx.close();
                }
            } finally {
                in.release();
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            if (this.cause == null) {
                this.cause = cause;
            }
            ctx.close();
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            if (done.isDone()) {
                return;
            }
            long sinceMs = (System.nanoTime() - lastActivityNs) / 1_000_000;
            say("client: FAILED: the connection " + (cause == null ? "was closed by the peer" : "failed") + " "
                    + sinceMs + " ms after the last byte received (" + received + " of " + sent
                    + " bytes echoed intact before)" + (cause == null ? "" : ": " + cause));
            done.trySuccess(FAILED);
        }
    }
}
