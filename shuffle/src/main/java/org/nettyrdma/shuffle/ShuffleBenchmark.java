package org.nettyrdma.shuffle;

import io.netty.channel.epoll.Epoll;
import org.nettyrdma.channel.Rdma;
import org.nettyrdma.channel.RdmaCounters;
import org.nettyrdma.channel.RdmaIoHandler;
import org.nettyrdma.channel.RdmaIoHandlerConfig;

import java.io.File;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.stream.Stream;

/**
 * Spark's shuffle fetch over RDMA beside the same Spark code over epoll (and NIO on request), in one run: one shuffle
 * service in this JVM serving a generated shuffle, reducers fetching every block with {@code OneForOneBlockFetcher},
 * 20 blocks per request, with 1 and with 8 fetchers (a connection each, one request under way on each). Prints the
 * throughput (MB/s of intact blocks) and the p50/p99 latency of a block (from the start of its request to its arrival),
 * the median of the runs, every block checked.
 *
 * <pre>
 * shuffle/bench.sh [options] [address]      (java ... org.nettyrdma.shuffle.ShuffleBenchmark, from the build)
 *   address            an RDMA interface's IP: native RDMA there (and TCP to the same IP); default 127.0.0.1 on the
 *                      emulated provider
 *   --emulated         the emulated provider (in-process) even with an address
 *   --maps=N --reduces=N --max-block=BYTES    the shuffle (default 200 x 50, 1 KiB .. 8 MiB, as the tests' standard)
 *   --runs=N           measured runs per case (default 3), after one warm-up run
 *   --transports=rdma,epoll,nio               which, in order (default rdma,epoll; epoll only where available)
 *   --fetchers=1,8     fetcher counts
 * </pre>
 */
public final class ShuffleBenchmark {
    private static final int BLOCKS_PER_REQUEST = 20;
    private static final String APP_ID = "app-benchmark-0001";

    private ShuffleBenchmark() {
    }

    public static void main(String[] args) throws Exception {
        String address = "127.0.0.1";
        boolean emulated = false;
        int maps = 200;
        int reduces = 50;
        int maxBlock = 8 << 20;
        int runs = 3;
        List<String> transports = new ArrayList<>(List.of("rdma", "epoll"));
        int[] fetchers = {1, 8};
        for (String arg : args) {
            if (arg.equals("--emulated")) {
                emulated = true;
            } else if (arg.startsWith("--maps=")) {
                maps = Integer.parseInt(value(arg));
            } else if (arg.startsWith("--reduces=")) {
                reduces = Integer.parseInt(value(arg));
            } else if (arg.startsWith("--max-block=")) {
                maxBlock = Integer.parseInt(value(arg));
            } else if (arg.startsWith("--runs=")) {
                runs = Integer.parseInt(value(arg));
            } else if (arg.startsWith("--transports=")) {
                transports = Arrays.asList(value(arg).split(","));
            } else if (arg.startsWith("--fetchers=")) {
                fetchers = Arrays.stream(value(arg).split(",")).mapToInt(Integer::parseInt).toArray();
            } else if (arg.startsWith("--")) {
                System.err.println("unknown option " + arg + " (see the class's documentation)");
                System.exit(2);
            } else {
                address = arg;
            }
        }
        boolean nativeRdma = !emulated && !InetAddress.getByName(address).isLoopbackAddress();
        if (nativeRdma && !Rdma.isAvailable()) {
            System.err.println("native RDMA is unavailable: " + Rdma.unavailabilityCause().getMessage()
                    + " (--emulated, or no address: the emulated provider on 127.0.0.1)");
            System.exit(2);
        }
        ShuffleSpec spec = new ShuffleSpec(0, maps, reduces, 1024, maxBlock, 100, 7);
        Path root = Files.createTempDirectory("netty-rdma-shuffle-bench");
        try {
            GeneratedShuffle shuffle = GeneratedShuffle.write(root.toFile(), spec, 1);
            System.out.printf("Spark %s shuffle fetch (OneForOneBlockFetcher, ExternalBlockHandler), %s, %d blocks, "
                            + "%.1f MB; %d blocks per request; one service, in this JVM, on %s%n",
                    org.apache.spark.network.TransportContext.class.getPackage().getImplementationVersion(), spec,
                    spec.blocks(), shuffle.manifest().totalBytes() / 1e6, BLOCKS_PER_REQUEST, address);
            System.out.printf("%s, %d CPUs, %s%n", System.getProperty("java.vm.name") + " "
                    + System.getProperty("java.version"), Runtime.getRuntime().availableProcessors(), Instant.now());
            System.out.printf("RDMA pipelines split Spark's MessageWithHeaders (-D%s): %s%n",
                    MessageWithHeaderSplitter.PROPERTY, MessageWithHeaderSplitter.enabledByDefault()
                            ? "yes" : "no" + (MessageWithHeaderSplitter.isAvailable() ? "" : " ("
                            + MessageWithHeaderSplitter.unavailabilityCause() + ")"));
            System.out.println();
            System.out.printf("%-18s %8s %10s %10s %10s %10s %10s%n", "transport", "fetchers", "MB/s", "p50 µs", "p99 µs",
                    "srv ms/GB", "cli ms/GB");
            for (String name : transports) {
                ShuffleTransport transport = transport(name, nativeRdma);
                if (transport == null) {
                    System.out.printf("%-18s (unavailable here)%n", name);
                    continue;
                }
                for (int f : fetchers) {
                    System.out.println(row(transport, shuffle, address, f, runs));
                }
            }
            System.out.println();
            System.out.println("MB/s: 10^6 bytes of intact blocks per second over a whole fetch of the shuffle; "
                    + "p50/p99: "
                    + "of the blocks' latency, from the start of their request to their arrival; the median of " + runs
                    + " runs after a warm-up run; every block's size and CRC32C checked; srv/cli ms/GB: CPU time of the"
                    + " service's and the reducers' event loop threads per 10^9 bytes fetched, over the measured runs");
        } finally {
            try (Stream<Path> paths = Files.walk(root)) {
                paths.sorted(Comparator.reverseOrder()).map(Path::toFile).forEach(File::delete);
            }
        }
    }

    private static ShuffleTransport transport(String name, boolean nativeRdma) {
        switch (name) {
            case "rdma":
                return ShuffleTransport.rdma(new RdmaIoHandlerConfig().setProvider(nativeRdma
                        ? RdmaIoHandlerConfig.PROVIDER_NATIVE : RdmaIoHandlerConfig.PROVIDER_EMULATED));
            case "epoll":
                return Epoll.isAvailable() ? ShuffleTransport.epoll() : null;
            case "nio":
                return ShuffleTransport.nio();
            default:
                throw new IllegalArgumentException("transport " + name + " (rdma, epoll or nio)");
        }
    }

    private static String row(ShuffleTransport transport, GeneratedShuffle shuffle, String address, int fetchers,
                              int runs) throws IOException, InterruptedException {
        List<FetchReport> reports = new ArrayList<>();
        String staging = "";
        long serverCpu = 0;
        long clientCpu = 0;
        try (ShuffleCluster cluster = ShuffleCluster.inProcess(SparkNetworkConf.of(Security.NONE).build(), APP_ID,
                null, transport, shuffle, address, 1, 1)) {
            for (int run = 0; run <= runs; run++) {
                FetchReport report = cluster.fetch(fetchers, BLOCKS_PER_REQUEST, 1, 600);
                if (!report.complete()) {
                    throw new IllegalStateException(transport + ", " + fetchers + " fetchers: " + report.summary());
                }
                if (run == 0) {
                    serverCpu = -cpuNanos("shuffle-server");
                    clientCpu = -cpuNanos("shuffle-client");
                } else {
                    reports.add(report);
                }
            }
            serverCpu += cpuNanos("shuffle-server");
            clientCpu += cpuNanos("shuffle-client");
            if (transport.isRdma()) {
                RdmaCounters server = RdmaIoHandler.counters(cluster.servers().get(0).eventLoops());
                staging = String.format("%n%-18s (the service's sends: %.1f MB into staging, %.1f MB of it read from "
                                + "files positionally; %d SENDs)", "", server.copiedBytes() / 1e6,
                        server.fileReadBytes() / 1e6, server.messagesSent());
            }
        }
        reports.sort(Comparator.comparingDouble(FetchReport::megabytesPerSecond));
        FetchReport median = reports.get(reports.size() / 2);
        double gigabytes = runs * (double) shuffle.manifest().totalBytes() / 1e9;
        return String.format("%-18s %8d %10.1f %10.0f %10.0f %10.0f %10.0f", transport, fetchers,
                median.megabytesPerSecond(), median.latencyMicros(50), median.latencyMicros(99),
                serverCpu / 1e6 / gigabytes, clientCpu / 1e6 / gigabytes) + staging;
    }

    /** CPU time so far of the live threads named {@code prefix...} (the event loops of a server or of the clients). */
    private static long cpuNanos(String prefix) {
        ThreadMXBean threads = ManagementFactory.getThreadMXBean();
        long total = 0;
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            if (t.getName().startsWith(prefix)) {
                long ns = threads.getThreadCpuTime(t.getId());
                total += Math.max(ns, 0);
            }
        }
        return total;
    }

    private static String value(String arg) {
        return arg.substring(arg.indexOf('=') + 1);
    }
}
