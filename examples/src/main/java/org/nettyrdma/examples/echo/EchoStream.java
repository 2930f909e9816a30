package org.nettyrdma.examples.echo;

import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.util.concurrent.Promise;
import org.nettyrdma.channel.RdmaByteBufAllocator;
import org.nettyrdma.channel.RdmaCounters;
import org.nettyrdma.channel.RdmaIoHandler;
import org.nettyrdma.channel.RdmaSocketChannel;
import org.nettyrdma.examples.Transport;

import java.io.File;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.zip.CRC32C;

/**
 * A long echo stream with checksums, for links that lose, reorder or break: the client streams a known pattern to the
 * server for a byte count or a time, the server echoes it, the client checks every byte (and CRC32C of both
 * directions) and reports the throughput, or, when the connection fails, how long after the last byte it received
 * the failure was seen; a line "RESULT PASS|FAILED|HUNG|CLOSED ..." per connection. It also runs the echo example's
 * server and client (EchoServer, EchoClient) in the same JVM: vm/two-host uses it across two guests, where a JVM
 * takes half a minute to start. See {@code main}'s usage.
 * At the end a line "RESOURCES released|LEAKED ...": no queue pair, registered connection memory or buffer may be
 * left once the connections have ended, however they ended.
 * Exit code: 0 intact, 3 the connection failed (reported with its cause) or resources were left, 4 nothing happened
 * within --limit seconds of the last byte (a hang), 2 usage.
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
        String usage = "usage: EchoStream server [--stream ADDR:PORT,...] [--echo ADDR:PORT,...] [--once] [--limit S]\n"
                + "       EchoStream client [--stream ADDR:PORT,...] [--echo ADDR:PORT,...] (--bytes N | --seconds S)"
                + " [--parallel] [--limit S]\n"
                + "  --stream: EchoStream servers or connections; --echo: the echo example's EchoServer or EchoClient,"
                + " in this JVM; add --emulated for the in-process provider";
        if (args.length < 1 || !("server".equals(args[0]) || "client".equals(args[0]))) {
            System.err.println(usage);
            System.exit(2);
        }
        List<InetSocketAddress> streams = new ArrayList<>();
        List<InetSocketAddress> echoes = new ArrayList<>();
        long bytes = Long.MAX_VALUE;
        double seconds = Double.MAX_VALUE;
        double limitSeconds = 120;
        boolean once = false;
        boolean parallel = false;
        boolean emulated = false;
        for (int i = 1; i < args.length; i++) {
            switch (args[i]) {
                case "--stream":
                    streams.addAll(addresses(args[++i]));
                    break;
                case "--echo":
                    echoes.addAll(addresses(args[++i]));
                    break;
                case "--bytes":
                    bytes = Long.parseLong(args[++i]);
                    break;
                case "--seconds":
                    seconds = Double.parseDouble(args[++i]);
                    break;
                case "--limit":
                    limitSeconds = Double.parseDouble(args[++i]);
                    break;
                case "--once":
                    once = true;
                    break;
                case "--parallel":
                    parallel = true;
                    break;
                case "--emulated":
                    emulated = true;
                    break;
                default:
                    System.err.println("EchoStream: unknown argument " + args[i] + "\n" + usage);
                    System.exit(2);
            }
        }
        Transport transport = Transport.rdma(emulated);
        EventLoopGroup group = transport.newGroup(1);
        int rc = OK;
        try {
            long limitNs = (long) (limitSeconds * 1e9);
            if ("server".equals(args[0])) {
                for (InetSocketAddress address : echoes) {
                    say("server: echo example on " + EchoServer.start(transport, group, address).localAddress());
                }
                rc = serve(transport, group, streams, once, limitNs);
            } else {
                for (InetSocketAddress address : echoes) {
                    try {
                        EchoClient.run(transport, group, address);
                        say("RESULT PASS echo example " + address + ": every byte matches");
                    } catch (Exception e) {
                        say("RESULT FAIL echo example " + address + ": " + e);
                        rc = Math.max(rc, FAILED);
                    }
                }
                long durationNs = (long) Math.min(seconds * 1e9, Long.MAX_VALUE);
                rc = Math.max(rc, streams(transport, group, streams, bytes, durationNs, limitNs, parallel));
            }
            rc = Math.max(rc, released(group, 10_000));
        } finally {
            group.shutdownGracefully(0, 2, TimeUnit.SECONDS);
        }
        System.exit(rc);
    }

    /**
     * Once every connection has ended (intact, failed or hung): no queue pair is left, no registered memory of a
     * connection, no buffer of the allocator in use — also after a link that went down or a peer that vanished. A line
     * "RESOURCES released ..." or "RESOURCES LEAKED ..."; FAILED if something is still held {@code millis} later.
     */
    static int released(EventLoopGroup group, long millis) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(millis);
        for (;;) {
            RdmaCounters c = RdmaIoHandler.counters(group);
            long inUse = RdmaByteBufAllocator.DEFAULT.bytesInUse();
            if (c.queuePairs() == 0 && c.registeredBytes() == 0 && inUse == 0) {
                say("RESOURCES released: no queue pair, no registered connection memory, no buffer in use");
                return OK;
            }
            if (System.nanoTime() - deadline > 0) {
                say("RESOURCES LEAKED " + millis + " ms after the last connection ended: " + c.queuePairs() + " queue pairs, "
                        + c.registeredBytes() + " B registered by connections, " + inUse + " B of buffers in use"
                        + " (teardowns that went on without their loop: " + c.slowTeardowns() + ")");
                describeThreads("LEAKED"); // a QP or CM id the kernel does not let go shows on a teardown thread
                return FAILED;
            }
            Thread.sleep(50);
        }
    }

    /** "10.0.0.1:7,fd00::1:7": the port after the last colon. */
    private static List<InetSocketAddress> addresses(String list) {
        List<InetSocketAddress> result = new ArrayList<>();
        for (String a : list.split(",")) {
            int colon = a.lastIndexOf(':');
            result.add(new InetSocketAddress(a.substring(0, colon), Integer.parseInt(a.substring(colon + 1))));
        }
        return result;
    }

    /** Streams to each address, one after the other or all at once; the worst verdict. */
    private static int streams(Transport transport, EventLoopGroup group, List<InetSocketAddress> addresses,
                               long bytes, long durationNs, long limitNs, boolean parallel) throws Exception {
        int[] verdicts = new int[addresses.size()];
        Thread[] threads = new Thread[addresses.size()];
        for (int i = 0; i < threads.length; i++) {
            int index = i;
            threads[i] = new Thread(() -> {
                try {
                    verdicts[index] = stream(transport, group, addresses.get(index), bytes, durationNs, limitNs);
                } catch (InterruptedException e) {
                    verdicts[index] = FAILED;
                }
            }, "stream-" + addresses.get(i));
            threads[i].start();
            if (!parallel) {
                threads[i].join();
            }
        }
        int rc = OK;
        for (int i = 0; i < threads.length; i++) {
            threads[i].join();
            rc = Math.max(rc, verdicts[i]);
        }
        return rc;
    }

    /**
     * Serves echo connections at each of {@code addresses}; with {@code once}, returns when the first connection of
     * each has ended, with the worst verdict: {@link #OK} closed by the peer, {@link #FAILED} failed, {@link #HUNG}
     * nothing for {@code limitNs} after its last byte. Without {@code once}, serves until the process is stopped.
     */
    static int serve(Transport transport, EventLoopGroup group, List<InetSocketAddress> addresses, boolean once,
                     long limitNs) throws InterruptedException {
        List<Channel> servers = new ArrayList<>();
        List<Promise<Integer>> firsts = new ArrayList<>();
        List<AtomicLong> lastActivity = new ArrayList<>();
        try {
            for (InetSocketAddress address : addresses) {
                Promise<Integer> first = group.next().newPromise();
                AtomicLong last = new AtomicLong();
                servers.add(transport.serverBootstrap(group)
                        .childHandler(new ChannelInitializer<Channel>() {
                            @Override
                            protected void initChannel(Channel ch) {
                                ch.pipeline().addLast(new ServerHandler(first, last));
                            }
                        })
                        .bind(address).sync().channel());
                firsts.add(first);
                lastActivity.add(last);
                say("server: listening on " + address + " over " + transport);
            }
            if (!once) {
                Thread.sleep(Long.MAX_VALUE);
            }
            int rc = OK;
            for (int i = 0; i < addresses.size(); i++) {
                int verdict = waitFor(firsts.get(i), lastActivity.get(i)::get, limitNs,
                        "server " + addresses.get(i));
                rc = Math.max(rc, verdict);
            }
            return rc;
        } finally {
            for (Channel server : servers) {
                server.close().sync();
            }
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
            say("RESULT FAILED stream " + address + ": cannot connect: " + e);
            return FAILED;
        }
        say("client: connected " + channel.localAddress() + " -> " + channel.remoteAddress() + " over " + transport);
        try {
            int verdict = waitFor(done, () -> handler.lastActivityNs, limitNs, "stream " + address);
            if (verdict == HUNG) {
                describeHang(channel);
                // given up: an abortive close, as a reset, not an orderly one that waits CLOSE_TIMEOUT_MILLIS for a
                // peer that takes nothing (the resources check after it would count that wait as a leak)
                channel.config().setOption(ChannelOption.SO_LINGER, 0);
            }
            return verdict;
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
                say("RESULT HUNG " + side + ": nothing happened for " + (System.nanoTime() - last) / 1_000_000
                        + " ms since the last byte received, and the connection has not failed");
                result.trySuccess(HUNG); // the close that follows is not reported as a failure
                return HUNG;
            }
        }
        return result.getNow();
    }

    /**
     * After a hang, what a reader of the log needs to tell a silent peer from a stuck event loop: whether the channel's
     * loop still runs tasks, the channel's counters, and the stack of every event loop thread.
     */
    private static void describeHang(Channel channel) throws InterruptedException {
        long start = System.nanoTime();
        io.netty.util.concurrent.Future<String> state = channel.eventLoop().submit(() ->
                channel instanceof RdmaSocketChannel ? ((RdmaSocketChannel) channel).describeState() : "");
        boolean ran = state.await(2, TimeUnit.SECONDS);
        say("HANG " + channel + ": active " + channel.isActive() + ", its event loop "
                + (ran ? "ran a task in " + (System.nanoTime() - start) / 1_000 + " us: " + state.getNow()
                        : "did not run a task within 2 s")
                + (channel instanceof RdmaSocketChannel ? ", " + ((RdmaSocketChannel) channel).counters() : ""));
        describeThreads("HANG");
    }

    /**
     * The Java stack of each event-loop and teardown thread (the transport destroys QPs and CM ids on
     * {@code netty-rdma-teardown} threads), then kernel stacks ({@link #kernelStacks}): lines starting with
     * {@code prefix}.
     */
    private static void describeThreads(String prefix) {
        for (Map.Entry<Thread, StackTraceElement[]> e : Thread.getAllStackTraces().entrySet()) {
            String name = e.getKey().getName();
            if (name.toLowerCase(Locale.ROOT).contains("eventloop") || name.startsWith("netty-rdma-teardown")) {
                StringBuilder stack = new StringBuilder(prefix + " thread " + name + " " + e.getKey().getState());
                for (StackTraceElement frame : e.getValue()) {
                    stack.append("\n    at ").append(frame);
                }
                say(stack.toString());
            }
        }
        kernelStacks(prefix);
    }

    /**
     * The kernel stack of each of this process's threads that sleeps uninterruptibly (state D), or is an event loop's or
     * a teardown thread's, where Linux shows it (root): a verbs call that does not return shows there.
     */
    private static void kernelStacks(String prefix) {
        File[] tasks = new File("/proc/self/task").listFiles();
        for (File task : tasks == null ? new File[0] : tasks) {
            try {
                String stat = new String(Files.readAllBytes(task.toPath().resolve("stat")), StandardCharsets.US_ASCII);
                int end = stat.lastIndexOf(')');
                String name = stat.substring(stat.indexOf('(') + 1, Math.max(end, stat.indexOf('(') + 1));
                char state = end > 0 && stat.length() > end + 2 ? stat.charAt(end + 2) : '?';
                if (state == 'D' || name.startsWith("multiThreadIo") || name.startsWith("netty-rdma-tea")) {
                    say(prefix + " task " + task.getName() + " (" + name + ") state " + state + ", kernel stack:\n"
                            + new String(Files.readAllBytes(task.toPath().resolve("stack")), StandardCharsets.US_ASCII));
                }
            } catch (IOException | RuntimeException e) {
                say(prefix + " task " + task.getName() + ": " + e);
            }
        }
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
        private final AtomicLong lastActivityNs;
        private final Promise<Integer> ended;
        private long bytes;
        private Throwable cause;

        ServerHandler(Promise<Integer> ended, AtomicLong lastActivityNs) {
            this.ended = ended;
            this.lastActivityNs = lastActivityNs;
        }

        @Override
        public void channelActive(ChannelHandlerContext ctx) {
            lastActivityNs.set(System.nanoTime());
            say("server: connection from " + ctx.channel().remoteAddress() + " to " + ctx.channel().localAddress());
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            lastActivityNs.set(System.nanoTime());
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
            long sinceMs = (System.nanoTime() - lastActivityNs.get()) / 1_000_000;
            if (ended.isDone()) {
                return; // after HUNG: the close is ours
            }
            if (cause == null) {
                say("RESULT CLOSED server " + ctx.channel().localAddress() + ": the connection from "
                        + ctx.channel().remoteAddress() + " was closed by the peer after " + bytes + " bytes echoed");
                ended.trySuccess(OK);
            } else {
                say("RESULT FAILED server " + ctx.channel().localAddress() + ": the connection from "
                        + ctx.channel().remoteAddress() + " failed " + sinceMs + " ms after the last byte received ("
                        + bytes + " bytes echoed): " + cause);
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
                    say("client: stream " + ctx.channel().remoteAddress() + ": " + received + " bytes echoed intact, "
                            + mbps(received, now - startNs));
                }
                if (stopped && received == sent) {
                    long ns = now - startNs;
                    boolean same = sentCrc.getValue() == receivedCrc.getValue();
                    say(String.format(Locale.ROOT, "RESULT %s stream %s: %d bytes echoed intact in %.1f s, %s each way, "
                                    + "crc32c sent %08x received %08x", same ? "PASS" : "FAILED",
                            ctx.channel().remoteAddress(), received, ns / 1e9, mbps(received, ns),
                            sentCrc.getValue(), receivedCrc.getValue()));
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
            say("RESULT FAILED stream " + ctx.channel().remoteAddress() + ": the connection "
                    + (cause == null ? "was closed by the peer" : "failed") + " " + sinceMs + " ms after the last byte received (" + received + " of " + sent
                    + " bytes echoed intact before)" + (cause == null ? "" : ": " + cause));
            done.trySuccess(FAILED);
        }
    }
}
