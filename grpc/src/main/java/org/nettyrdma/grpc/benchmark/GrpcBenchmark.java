package org.nettyrdma.grpc.benchmark;

import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.netty.channel.EventLoopGroup;
import org.nettyrdma.channel.Rdma;
import org.nettyrdma.channel.RdmaCounters;
import org.nettyrdma.channel.RdmaIoHandler;
import org.nettyrdma.channel.RdmaIoHandlerConfig;
import org.nettyrdma.grpc.sample.EchoService;

import java.lang.management.ManagementFactory;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.Locale;
import java.util.concurrent.TimeUnit;

/**
 * gRPC over RDMA beside Netty NIO and epoll in one run: sequential unary round trips (p50/p99) at 16 B and 4 KiB,
 * server-streaming MB/s at 4 KiB, 64 KiB and 1 MiB, and 8 MiB unary calls. Per transport one server and one client
 * event loop (one thread each) in this JVM, the same service ({@link EchoService}) and client code.
 *
 * <pre>
 * java -jar grpc/target/netty-rdma-grpc-0.1.0-SNAPSHOT-benchmark.jar [options] [address]
 *   address          an RDMA interface's IP: the native provider there (TCP rows on the same address);
 *                    none: 127.0.0.1 and the emulated provider
 *   --transports=L   comma-separated rows, default rdma,rdma-plain,nio,epoll; also rdma-4m, rdma-32k, epoll-ready
 *   --rounds=N       rounds (default 3): each runs every transport once; each cell is the median of the rounds
 *   --scale=S        run lengths times S (default 1; the VM uses less)
 * </pre>
 */
public final class GrpcBenchmark {
    private static final int MAX_MESSAGE = 16 << 20;

    private GrpcBenchmark() {
    }

    public static void main(String[] args) throws Exception {
        String address = null;
        double scale = 1;
        int rounds = 3;
        List<BenchTransport> transports = new ArrayList<>(List.of(BenchTransport.RDMA,
                BenchTransport.RDMA_PLAIN, BenchTransport.NIO, BenchTransport.EPOLL));
        for (String a : args) {
            if (a.startsWith("--transports=")) {
                transports.clear();
                for (String t : a.substring("--transports=".length()).split(",")) {
                    transports.add(BenchTransport.byLabel(t.trim()));
                }
            } else if (a.startsWith("--rounds=")) {
                rounds = Integer.parseInt(a.substring("--rounds=".length()));
            } else if (a.startsWith("--scale=")) {
                scale = Double.parseDouble(a.substring("--scale=".length()));
            } else if (a.startsWith("-")) {
                throw new IllegalArgumentException("unknown option " + a);
            } else {
                address = a;
            }
        }
        String provider = address == null ? RdmaIoHandlerConfig.PROVIDER_EMULATED : RdmaIoHandlerConfig.PROVIDER_NATIVE;
        String host = address == null ? "127.0.0.1" : address;
        String grpc = NettyServerBuilder.class.getPackage().getImplementationVersion();
        System.out.println("grpc-netty " + (grpc == null ? "(version not in this jar's manifest)" : grpc)
                + ", Netty " + nettyVersion()
                + ", Java " + Runtime.version() + ", " + Runtime.getRuntime().availableProcessors() + " CPUs");
        System.out.println("RDMA: " + (address == null ? "emulated provider (in-process)"
                + (Rdma.isAvailable() ? "" : " - native RDMA unavailable: " + Rdma.unavailabilityCause().getMessage())
                : "native provider on " + address));
        System.out.println("One JVM; per transport a server and a client event loop (one thread each) on " + host
                + "; sequential calls from one client thread");
        System.out.println();
        Map<BenchTransport, List<Report.Row>> results = new EnumMap<>(BenchTransport.class);
        for (int r = 0; r < rounds; r++) {
            for (BenchTransport t : transports) {
                results.computeIfAbsent(t, k -> new ArrayList<>()).add(run(t, provider, host, scale));
            }
            System.out.println("round " + (r + 1) + " of " + rounds + " done (load average "
                    + String.format(Locale.ROOT, "%.1f", ManagementFactory.getOperatingSystemMXBean()
                    .getSystemLoadAverage()) + ")");
        }
        System.out.println();
        System.out.println(Report.header());
        for (BenchTransport t : transports) {
            System.out.println(Report.medianRow(t.label, results.get(t)));
        }
        System.out.println();
        System.out.println(Report.legend(calls(scale), warmupMillis(scale), streamBytes(scale), rounds));
    }

    private static String nettyVersion() {
        io.netty.util.Version v = io.netty.util.Version.identify().get("netty-transport");
        return v == null ? "(version unknown)" : v.artifactVersion();
    }

    private static long warmupMillis(double scale) {
        return Math.max(200, (long) (2000 * scale));
    }

    private static int calls(double scale) {
        return Math.max(200, (int) (20_000 * scale));
    }

    private static long streamBytes(double scale) {
        return Math.max(4L << 20, (long) ((256L << 20) * scale));
    }

    /** One round of {@code transport}: a server and a channel of their own, every measurement once. */
    static Report.Row run(BenchTransport transport, String provider, String host, double scale) throws Exception {
        EventLoopGroup serverGroup = transport.newGroup("server", provider);
        EventLoopGroup clientGroup = transport.newGroup("client", provider);
        Server server = null;
        ManagedChannel channel = null;
        try {
            server = transport.configure(NettyServerBuilder.forAddress(new InetSocketAddress(host, 0)), serverGroup)
                    .maxInboundMessageSize(MAX_MESSAGE).addService(EchoService.definition()).build().start();
            int port = ((InetSocketAddress) server.getListenSockets().get(0)).getPort();
            channel = transport.configure(NettyChannelBuilder.forAddress(new InetSocketAddress(host, port)),
                    clientGroup).maxInboundMessageSize(MAX_MESSAGE).usePlaintext().build();
            Report.Row row = new Report.Row();
            double[] cells = row.cells;
            long[] small = Measurements.unaryLatencies(channel, 16, warmupMillis(scale), calls(scale));
            cells[Report.P50_16B] = Measurements.percentileMicros(small, 50);
            cells[Report.P99_16B] = Measurements.percentileMicros(small, 99);
            long[] page = Measurements.unaryLatencies(channel, 4096, warmupMillis(scale) / 2, calls(scale));
            cells[Report.P50_4K] = Measurements.percentileMicros(page, 50);
            cells[Report.P99_4K] = Measurements.percentileMicros(page, 99);
            cells[Report.STREAM_4K] = stream(channel, 4096, streamBytes(scale));
            cells[Report.STREAM_64K] = stream(channel, 64 << 10, streamBytes(scale));
            cells[Report.STREAM_1M] = stream(channel, 1 << 20, streamBytes(scale));
            int bigCalls = Math.max(2, (int) (32 * scale));
            Measurements.largeUnary(channel, 8 << 20, Math.max(1, bigCalls / 4)); // warm-up
            cells[Report.UNARY_8M] = Measurements.largeUnary(channel, 8 << 20, bigCalls);
            if (transport.isRdma()) {
                RdmaCounters s = RdmaIoHandler.counters(serverGroup);
                RdmaCounters c = RdmaIoHandler.counters(clientGroup);
                row.note = String.format(Locale.ROOT, "copied %.0f%%, SENDs %d of %.0f B on average, credit stalls %d"
                                + ", loop waits %d, busy-polls %d found / %d missed",
                        100.0 * (s.copiedBytes() + c.copiedBytes()) / Math.max(1, s.bytesSent() + c.bytesSent()),
                        s.messagesSent() + c.messagesSent(),
                        (double) (s.bytesSent() + c.bytesSent()) / Math.max(1, s.messagesSent() + c.messagesSent()),
                        s.creditStalls() + c.creditStalls(), s.waits() + c.waits(), s.spinsFound() + c.spinsFound(),
                        s.spinsMissed() + c.spinsMissed());
            }
            return row;
        } finally {
            if (channel != null) {
                channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
            }
            if (server != null) {
                server.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
            }
            clientGroup.shutdownGracefully(0, 2, TimeUnit.SECONDS).await(15, TimeUnit.SECONDS);
            serverGroup.shutdownGracefully(0, 2, TimeUnit.SECONDS).await(15, TimeUnit.SECONDS);
        }
    }

    /** MB/s of a server stream of {@code bytes} in messages of {@code size}, after a quarter of it to warm up. */
    private static double stream(io.grpc.Channel channel, int size, long bytes) {
        int count = (int) Math.max(4, bytes / size);
        Measurements.serverStream(channel, size, Math.max(4, count / 4));
        return Measurements.serverStream(channel, size, count);
    }
}
