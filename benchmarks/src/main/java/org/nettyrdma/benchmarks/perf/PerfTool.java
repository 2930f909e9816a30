package org.nettyrdma.benchmarks.perf;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.util.concurrent.EventExecutor;
import org.nettyrdma.channel.Rdma;
import org.nettyrdma.channel.RdmaIoHandlerConfig;

import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * A perftest-style tool through Netty: the latency (ping-pong) and bandwidth (one-way streaming) of fixed-size
 * messages over the RDMA transport, Netty epoll and NIO over TCP, and Netty's in-JVM {@code local} transport, with
 * the same handlers ({@link PerfClientHandler}, {@link PerfServerHandler}) on each: only the event loops' factory and
 * the channel classes differ ({@link PerfTransport}). {@code --help} lists the options; docs/performance.md says what
 * each figure means.
 */
public final class PerfTool {
    /** Latency samples kept per connection at most (8 bytes each). */
    private static final long MAX_SAMPLES = 5_000_000;
    /** A warm-up round in duration mode doubles its count until it takes this long. */
    private static final long CALIBRATION_ROUND_NS = TimeUnit.MILLISECONDS.toNanos(50);
    private static final long FIRST_CALIBRATION_COUNT = 64;
    private static final com.sun.management.ThreadMXBean THREADS = threadBean();
    private static final com.sun.management.OperatingSystemMXBean OS = osBean();

    private PerfTool() {
    }

    public static void main(String[] args) {
        PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
        System.exit(run(out, System.err, args));
    }

    /**
     * Runs the tool as its {@code main} does, printing the table to {@code out} and progress and errors to
     * {@code err}.
     *
     * @return the exit status: 0, 1 when a transport failed, 2 for a bad command line
     */
    static int run(PrintStream out, PrintStream err, String... args) {
        PerfOptions o;
        try {
            o = PerfOptions.parse(args);
        } catch (IllegalArgumentException e) {
            err.println(e.getMessage());
            err.println(PerfOptions.USAGE);
            return 2;
        }
        if (o.help) {
            out.println(PerfOptions.USAGE);
            return 0;
        }
        String provider = PerfTransport.resolveProvider(o.provider, o.server ? o.bind : o.host);
        if (o.server) {
            return serve(o, provider, out, err);
        }
        out.println(environment(o, provider));
        List<PerfResult> results = new ArrayList<>();
        for (String name : o.transports) {
            PerfTransport transport;
            try {
                transport = PerfTransport.of(name, provider);
                if (o.twoProcesses() && transport.inProcessOnly(provider)) {
                    throw new IllegalStateException(transport.name() + " (" + provider + ") runs in one process only");
                }
            } catch (RuntimeException e) {
                err.println(name + ": skipped - " + oneLine(e));
                PerfResult skipped = new PerfResult(name, "", 0, o.connections);
                skipped.status = "skipped: " + oneLine(e);
                results.add(skipped);
                continue;
            }
            runTransport(transport, o, results, err);
        }
        PerfReport.printTables(out, results, o.baseline, !o.twoProcesses());
        try {
            if (o.csv != null) {
                PerfReport.writeCsv(Paths.get(o.csv), results);
            }
            if (o.svg != null) {
                PerfReport.writeSvg(Paths.get(o.svg), results, environment(o, provider));
            }
        } catch (IOException e) {
            err.println("cannot write the results: " + e);
            return 1;
        }
        for (PerfResult r : results) {
            if (!r.ok() && !r.status.startsWith("skipped")) {
                return 1;
            }
        }
        return 0;
    }

    private static String environment(PerfOptions o, String provider) {
        String rdma = RdmaIoHandlerConfig.PROVIDER_EMULATED.equals(provider)
                ? "rdma on the emulated provider (in-process copies, no network)"
                : "rdma on the native provider";
        if (o.rdmaBufferSize > 0) {
            rdma += " with receive buffers of " + o.rdmaBufferSize + " B";
        }
        return String.format(Locale.ROOT, "%s; JDK %s, %d cores; %s; %d connection(s), %d loop thread(s) per side; %s",
                o.twoProcesses() ? "client of " + o.host : "one process on " + o.host,
                System.getProperty("java.version"), Runtime.getRuntime().availableProcessors(), rdma,
                o.connections, o.threads,
                o.durationMode() ? String.format(Locale.ROOT, "~%.2g s per size after %.2g s warm-up",
                        o.durationSeconds, o.warmupSeconds)
                        : String.format(Locale.ROOT, "%d iterations per size after %.2g s warm-up", o.iterations,
                        o.warmupSeconds));
    }

    /** One transport: a server (unless --client), the connections, then every mode and size on them. */
    private static void runTransport(PerfTransport transport, PerfOptions o, List<PerfResult> results,
                                     PrintStream err) {
        EventLoopGroup serverGroup = null;
        EventLoopGroup clientGroup = null;
        List<Channel> channels = new ArrayList<>();
        Channel server = null;
        String label = transport.name();
        PerfResult current = null;
        try {
            clientGroup = transport.newGroup(o.threads);
            SocketAddress address;
            if (o.client == null) {
                serverGroup = transport.newGroup(o.threads);
                server = transport.childOptions(new ServerBootstrap(), o).group(serverGroup)
                        .channel(transport.serverChannelClass())
                        .childHandler(new ChannelInitializer<Channel>() {
                            @Override
                            protected void initChannel(Channel ch) {
                                ch.pipeline().addLast(new PerfServerHandler());
                            }
                        })
                        .bind(transport.bindAddress(o.host, Math.max(o.port, 0))).sync().channel();
                address = server.localAddress();
            } else {
                address = new InetSocketAddress(o.host, o.portOf(transport.name()));
            }
            PerfClientHandler[] handlers = new PerfClientHandler[o.connections];
            for (int i = 0; i < o.connections; i++) {
                handlers[i] = new PerfClientHandler();
                channels.add(transport.options(new Bootstrap(), o).group(clientGroup).channel(transport.channelClass())
                        .handler(handlers[i]).connect(address).sync().channel());
            }
            label = transport.label();
            RegisteredMemory registered = RegisteredMemory.of(transport, o.connections, serverGroup, clientGroup);
            if (registered != null) {
                registered.sampleIdle();
            }
            SendPaths paths = SendPaths.of(transport, clientGroup);
            String allocator = channels.get(0).alloc().getClass().getSimpleName();
            long[] loopThreads = loopThreads(serverGroup, clientGroup);
            List<int[]> plan = new ArrayList<>();
            if (o.latency) {
                for (int size : o.latencySizes) {
                    plan.add(new int[] {PerfProtocol.MODE_LATENCY, size});
                }
            }
            if (o.bandwidth) {
                for (int size : o.bandwidthSizes) {
                    plan.add(new int[] {PerfProtocol.MODE_BANDWIDTH, size});
                }
            }
            // each mode's first step once more, unmeasured, before the plan: the JIT compiles the transport's paths
            // there, not during the first measured size (which otherwise came out tens of µs slow)
            byte warmedMode = -1;
            for (int[] step : plan) {
                if (step[0] != warmedMode) {
                    warmedMode = (byte) step[0];
                    PerfResult discarded = new PerfResult(label, "", step[1], o.connections);
                    measure(discarded, warmedMode, channels, handlers, loopThreads, o, null, null);
                }
            }
            for (int[] step : plan) {
                byte mode = (byte) step[0];
                current = new PerfResult(label, mode == PerfProtocol.MODE_LATENCY ? PerfResult.LATENCY
                        : PerfResult.BANDWIDTH, step[1], o.connections);
                current.allocator = allocator;
                measure(current, mode, channels, handlers, loopThreads, o, registered, paths);
                results.add(current);
                err.println(PerfReport.progressLine(current));
                current = null;
            }
        } catch (Exception e) {
            if (current == null) {
                current = new PerfResult(label, "", 0, o.connections);
            }
            current.status = "failed: " + oneLine(e);
            results.add(current);
            err.println(label + ": failed - " + oneLine(e));
        } finally {
            for (Channel ch : channels) {
                ch.close().awaitUninterruptibly(5, TimeUnit.SECONDS);
            }
            if (server != null) {
                server.close().awaitUninterruptibly(5, TimeUnit.SECONDS);
            }
            if (clientGroup != null) {
                clientGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).awaitUninterruptibly(10, TimeUnit.SECONDS);
            }
            if (serverGroup != null) {
                serverGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).awaitUninterruptibly(10, TimeUnit.SECONDS);
            }
        }
    }

    /** Warm-up rounds (not measured), then the measured round; fills {@code r}. */
    private static void measure(PerfResult r, byte mode, List<Channel> channels, PerfClientHandler[] handlers,
                                long[] loopThreads, PerfOptions o, RegisteredMemory registered, SendPaths paths)
            throws Exception {
        boolean latency = mode == PerfProtocol.MODE_LATENCY;
        long timeoutNs = (long) ((o.timeoutSeconds + 4 * (o.durationMode() ? o.durationSeconds : 0)) * 1e9);
        long count = o.durationMode() ? FIRST_CALIBRATION_COUNT : o.iterations;
        double roundsPerNs = 0;
        double lastRoundsPerNs = 0;
        if (o.warmupSeconds > 0 || o.durationMode()) {
            long warmUntilNs = System.nanoTime() + (long) (o.warmupSeconds * 1e9);
            do {
                long elapsedNs = elapsedNs(round(channels, handlers, mode, r.size, count, o.verify, false,
                        timeoutNs, null));
                lastRoundsPerNs = (double) count / Math.max(1, elapsedNs);
                if (o.durationMode() && elapsedNs < CALIBRATION_ROUND_NS && count < Integer.MAX_VALUE) {
                    count *= 2;
                } else {
                    // the best rate of the rounds long enough to tell: a round slowed down by a compilation, a
                    // collection or another process does not shorten the measured run
                    roundsPerNs = Math.max(roundsPerNs, lastRoundsPerNs);
                }
            } while (System.nanoTime() - warmUntilNs < 0);
        }
        if (o.durationMode()) {
            double rate = roundsPerNs > 0 ? roundsPerNs : lastRoundsPerNs;
            count = Math.max(1, (long) (rate * o.durationSeconds * 1e9));
        }
        if (latency) {
            count = Math.min(count, MAX_SAMPLES);
        }

        if (paths != null) {
            paths.start();
        }
        long cpuBeforeNs = processCpuNs();
        long allocatedBefore = allocatedBytes(loopThreads);
        PerfClientHandler.Round[] rounds = round(channels, handlers, mode, r.size, count, o.verify, latency,
                timeoutNs, registered);
        long allocatedAfter = allocatedBytes(loopThreads);
        long cpuNs = processCpuNs() - cpuBeforeNs;
        if (registered != null) {
            registered.report(r);
        }
        if (paths != null) {
            paths.report(r);
        }

        long elapsedNs = elapsedNs(rounds);
        long messagesOneWay = count * channels.size();
        long bytesOneWay = messagesOneWay * r.size;
        long messagesSent = latency ? 2 * messagesOneWay : messagesOneWay;
        r.iterations = count;
        r.seconds = elapsedNs / 1e9;
        r.verified = o.verify ? "bytes+content" : "bytes";
        if (allocatedBefore >= 0 && allocatedAfter >= 0) {
            r.allocatedBytesPerMessage = (double) (allocatedAfter - allocatedBefore) / messagesSent;
        }
        if (latency) {
            long[] all = new long[(int) messagesOneWay];
            int n = 0;
            for (PerfClientHandler.Round round : rounds) {
                System.arraycopy(round.samples, 0, all, n, round.samples.length);
                n += round.samples.length;
            }
            Arrays.sort(all);
            r.minNs = all[0];
            r.p50Ns = percentile(all, 0.50);
            r.p99Ns = percentile(all, 0.99);
            r.p999Ns = percentile(all, 0.999);
            r.maxNs = all[all.length - 1];
        } else {
            r.megabytesPerSecond = bytesOneWay / (elapsedNs / 1e9) / 1e6;
            r.messagesPerSecond = messagesOneWay / (elapsedNs / 1e9);
            if (cpuBeforeNs >= 0 && cpuNs > 0) { // 0: a round shorter than the clock's tick
                r.cpuSecondsPerGigabyte = (double) cpuNs / bytesOneWay;
            }
        }
    }

    /** One round on every connection at once; fails with the first connection's failure. */
    private static PerfClientHandler.Round[] round(List<Channel> channels, PerfClientHandler[] handlers, byte mode,
                                                  int size, long count, boolean verify, boolean record,
                                                  long timeoutNs, RegisteredMemory registered) throws Exception {
        CountDownLatch done = new CountDownLatch(channels.size());
        PerfClientHandler.Round[] rounds = new PerfClientHandler.Round[channels.size()];
        for (int i = 0; i < rounds.length; i++) {
            PerfClientHandler.Round r = new PerfClientHandler.Round(mode, size, count, verify,
                    record ? new long[(int) count] : null, done);
            PerfClientHandler handler = handlers[i];
            rounds[i] = r;
            channels.get(i).eventLoop().execute(() -> handler.start(r));
        }
        long deadlineNs = System.nanoTime() + timeoutNs;
        boolean finished;
        do {
            if (registered != null) {
                registered.sampleActive(); // every 10 ms while the round runs (off the event loops)
            }
            finished = done.await(Math.min(10_000_000L, Math.max(0, deadlineNs - System.nanoTime())),
                    TimeUnit.NANOSECONDS);
        } while (!finished && deadlineNs - System.nanoTime() > 0);
        if (!finished) {
            throw new TimeoutException(String.format(Locale.ROOT, "a round of %d messages of %d B took over %.0f s",
                    count, size, timeoutNs / 1e9));
        }
        for (PerfClientHandler.Round r : rounds) {
            if (r.failure != null) {
                throw new IOException(oneLine(r.failure), r.failure);
            }
        }
        return rounds;
    }

    /** From the first connection's start to the last one's acknowledgement. */
    private static long elapsedNs(PerfClientHandler.Round[] rounds) {
        long start = rounds[0].startNs;
        long end = rounds[0].endNs;
        for (PerfClientHandler.Round r : rounds) {
            start = r.startNs - start < 0 ? r.startNs : start;
            end = r.endNs - end > 0 ? r.endNs : end;
        }
        return end - start;
    }

    /** Nearest rank. */
    private static long percentile(long[] sorted, double p) {
        int rank = (int) Math.ceil(p * sorted.length);
        return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))];
    }

    /** The ids of the threads of the groups' event loops (null groups skipped). */
    private static long[] loopThreads(EventLoopGroup... groups) throws Exception {
        List<Long> ids = new ArrayList<>();
        for (EventLoopGroup group : groups) {
            if (group == null) {
                continue;
            }
            for (EventExecutor loop : group) {
                ids.add(loop.submit(() -> Thread.currentThread().getId()).get(10, TimeUnit.SECONDS));
            }
        }
        return ids.stream().mapToLong(Long::longValue).toArray();
    }

    /** Bytes allocated so far by the threads {@code ids}; -1 where the JVM can't tell. */
    private static long allocatedBytes(long[] ids) {
        if (THREADS == null) {
            return -1;
        }
        long sum = 0;
        for (long bytes : THREADS.getThreadAllocatedBytes(ids)) {
            if (bytes < 0) {
                return -1;
            }
            sum += bytes;
        }
        return sum;
    }

    private static long processCpuNs() {
        return OS == null ? -1 : OS.getProcessCpuTime();
    }

    private static com.sun.management.ThreadMXBean threadBean() {
        try {
            com.sun.management.ThreadMXBean bean =
                    (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
            if (bean.isThreadAllocatedMemorySupported()) {
                bean.setThreadAllocatedMemoryEnabled(true);
                return bean;
            }
        } catch (RuntimeException | LinkageError ignored) {
            // not HotSpot: no allocation figures
        }
        return null;
    }

    private static com.sun.management.OperatingSystemMXBean osBean() {
        try {
            return (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
        } catch (RuntimeException | LinkageError ignored) {
            return null; // not HotSpot: no CPU figures
        }
    }

    /** Two processes, server side: listens with every transport until killed. */
    private static int serve(PerfOptions o, String provider, PrintStream out, PrintStream err) {
        List<EventLoopGroup> groups = new ArrayList<>();
        List<Channel> servers = new ArrayList<>();
        try {
            for (String name : o.transports) {
                PerfTransport transport;
                try {
                    transport = PerfTransport.of(name, provider);
                    if (transport.inProcessOnly(provider)) {
                        throw new IllegalStateException(name + " (" + provider + ") runs in one process only");
                    }
                } catch (RuntimeException e) {
                    err.println(name + ": skipped - " + oneLine(e));
                    continue;
                }
                EventLoopGroup group = transport.newGroup(o.threads);
                groups.add(group);
                Channel server = transport.childOptions(new ServerBootstrap(), o).group(group)
                        .channel(transport.serverChannelClass())
                        .childHandler(new ChannelInitializer<Channel>() {
                            @Override
                            protected void initChannel(Channel ch) {
                                ch.pipeline().addLast(new PerfServerHandler());
                            }
                        })
                        .bind(transport.bindAddress(o.bind, o.portOf(name))).sync().channel();
                servers.add(server);
                out.println(transport.label() + ": listening on " + server.localAddress());
            }
            if (servers.isEmpty()) {
                err.println("no transport to serve");
                return 1;
            }
            out.println("serving until killed (Ctrl-C)");
            for (Channel server : servers) {
                server.closeFuture().sync();
            }
            return 0;
        } catch (Exception e) {
            err.println("server failed: " + oneLine(e));
            if (!Rdma.isAvailable() && o.transports.contains(PerfTransport.RDMA)) {
                err.println("native RDMA: " + oneLine(Rdma.unavailabilityCause()));
            }
            return 1;
        } finally {
            for (Channel server : servers) {
                server.close().awaitUninterruptibly(5, TimeUnit.SECONDS);
            }
            for (EventLoopGroup group : groups) {
                group.shutdownGracefully(0, 5, TimeUnit.SECONDS).awaitUninterruptibly(10, TimeUnit.SECONDS);
            }
        }
    }

    static String oneLine(Throwable t) {
        if (t == null) {
            return "";
        }
        String message = t.getMessage() != null ? t.getMessage() : t.getClass().getSimpleName();
        return message.replaceAll("\\s*\\R\\s*", " ");
    }
}
