package org.nettyrdma.benchmarks.perf;

import org.nettyrdma.channel.RdmaIoHandlerConfig;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/** The command line of {@link PerfTool}. */
final class PerfOptions {
    static final String USAGE = String.join("\n",
            "usage: java -cp benchmarks/target/benchmarks.jar org.nettyrdma.benchmarks.perf.PerfTool [options]",
            "",
            "Latency (ping-pong) and bandwidth (one-way streaming) of fixed-size messages through the same Netty",
            "handlers over each transport, perftest style. Server and client run in one process unless --server or",
            "--client is given.",
            "",
            "  -t, --transports LIST  rdma,epoll,nio,local (default: all four in one process, rdma,epoll,nio in two)",
            "      --provider P       RDMA provider: native, emulated or auto (default auto: native where native RDMA",
            "                         is available and the host is not a loopback address, else emulated)",
            "  -m, --mode LIST        latency,bandwidth (or lat,bw; default both)",
            "  -s, --size LIST        message sizes, e.g. 8,64,4K,1M, or a range of powers of two 8-1M",
            "                         (default 64,4K,64K,1M; 1 B to 64 MiB)",
            "  -a, --all              every power of two from 8 B to 1 MiB (perftest's -a)",
            "      --lat-sizes LIST   sizes for latency only (default: --size)",
            "      --bw-sizes LIST    sizes for bandwidth only (default: --size)",
            "  -n, --iters N          measured round trips (latency) or messages (bandwidth) per connection and size",
            "  -D, --duration S       instead of -n: measure about S seconds per size, the count calibrated from the",
            "                         warm-up's rate (default 1)",
            "  -w, --warmup S         warm-up per size, not measured: rounds of -n messages (or of a doubling count",
            "                         with -D) for at least S seconds on the same connections (default 0.5; 0: none)",
            "  -q, --connections N    connections per transport, all running at once; bandwidth is their sum",
            "                         (default 1)",
            "      --threads N        event loop threads of the client and of the server (default 1 each)",
            "      --rdma-buffer-size S  rdma: RdmaChannelOption.RECEIVE_BUFFER_SIZE of both ends, the largest SEND",
            "                         (default the transport's, 16K)",
            "      --verify           check every byte received against the sender's pattern and sequence numbers",
            "                         (byte counts are always checked)",
            "      --host ADDR        one process: the address the server binds and the client connects to",
            "                         (default 127.0.0.1; native RDMA needs the IP of an RDMA interface)",
            "      --server           serve only (two processes): rdma on port P, epoll on P+1, nio on P+2",
            "      --bind ADDR        --server: the address to bind (default 0.0.0.0)",
            "      --client HOST      client only, of a --server on HOST",
            "  -p, --port P           first port (default 18515 in two processes, any free port in one)",
            "      --csv FILE         also write the results as CSV",
            "      --svg FILE         also plot them: latency p50 and bandwidth against message size",
            "      --baseline T       also print each transport's figures as ratios to transport T's",
            "      --timeout S        seconds a round may take before the transport is given up (default 60)",
            "  -h, --help             this text");

    static final int DEFAULT_PORT = 18515;
    private static final int[] DEFAULT_SIZES = {64, 4096, 65536, 1 << 20};

    List<String> transports;
    String provider = RdmaIoHandlerConfig.PROVIDER_AUTO;
    boolean latency = true;
    boolean bandwidth = true;
    int[] latencySizes;
    int[] bandwidthSizes;
    long iterations;
    double durationSeconds = 1;
    double warmupSeconds = 0.5;
    int connections = 1;
    int threads = 1;
    /** RECEIVE_BUFFER_SIZE of the rdma channels of both ends; 0: the transport's default. */
    int rdmaBufferSize;
    boolean verify;
    String host = "127.0.0.1";
    boolean server;
    String bind = "0.0.0.0";
    String client;
    int port = -1;
    String csv;
    String svg;
    String baseline;
    double timeoutSeconds = 60;
    boolean help;

    static PerfOptions parse(String... args) {
        PerfOptions o = new PerfOptions();
        int[] sizes = DEFAULT_SIZES;
        int[] latSizes = null;
        int[] bwSizes = null;
        boolean durationGiven = false;
        for (int i = 0; i < args.length; i++) {
            String arg = args[i];
            switch (arg) {
                case "-h":
                case "--help":
                    o.help = true;
                    break;
                case "-t":
                case "--transports":
                    o.transports = Arrays.asList(value(args, ++i, arg).toLowerCase(Locale.ROOT).split(","));
                    break;
                case "--provider":
                    o.provider = new RdmaIoHandlerConfig().setProvider(value(args, ++i, arg)).getProvider();
                    break;
                case "-m":
                case "--mode":
                    o.latency = false;
                    o.bandwidth = false;
                    for (String m : value(args, ++i, arg).toLowerCase(Locale.ROOT).split(",")) {
                        if (m.equals("latency") || m.equals("lat")) {
                            o.latency = true;
                        } else if (m.equals("bandwidth") || m.equals("bw")) {
                            o.bandwidth = true;
                        } else {
                            throw new IllegalArgumentException(arg + ": " + m + " (expected latency or bandwidth)");
                        }
                    }
                    break;
                case "-s":
                case "--size":
                    sizes = sizes(value(args, ++i, arg));
                    break;
                case "-a":
                case "--all":
                    sizes = sizes("8-1M");
                    break;
                case "--lat-sizes":
                    latSizes = sizes(value(args, ++i, arg));
                    break;
                case "--bw-sizes":
                    bwSizes = sizes(value(args, ++i, arg));
                    break;
                case "-n":
                case "--iters":
                    o.iterations = positiveLong(value(args, ++i, arg), arg);
                    break;
                case "-D":
                case "--duration":
                    o.durationSeconds = nonNegative(value(args, ++i, arg), arg);
                    durationGiven = true;
                    break;
                case "-w":
                case "--warmup":
                    o.warmupSeconds = nonNegative(value(args, ++i, arg), arg);
                    break;
                case "-q":
                case "--connections":
                    o.connections = (int) positiveLong(value(args, ++i, arg), arg);
                    break;
                case "--threads":
                    o.threads = (int) positiveLong(value(args, ++i, arg), arg);
                    break;
                case "--rdma-buffer-size":
                    o.rdmaBufferSize = size(value(args, ++i, arg));
                    break;
                case "--verify":
                    o.verify = true;
                    break;
                case "--host":
                    o.host = value(args, ++i, arg);
                    break;
                case "--server":
                    o.server = true;
                    break;
                case "--bind":
                    o.bind = value(args, ++i, arg);
                    break;
                case "--client":
                    o.client = value(args, ++i, arg);
                    break;
                case "-p":
                case "--port":
                    o.port = (int) positiveLong(value(args, ++i, arg), arg);
                    break;
                case "--csv":
                    o.csv = value(args, ++i, arg);
                    break;
                case "--svg":
                    o.svg = value(args, ++i, arg);
                    break;
                case "--baseline":
                    o.baseline = value(args, ++i, arg).toLowerCase(Locale.ROOT);
                    break;
                case "--timeout":
                    o.timeoutSeconds = nonNegative(value(args, ++i, arg), arg);
                    break;
                default:
                    throw new IllegalArgumentException("unknown option " + arg);
            }
        }
        if (o.iterations > 0 && durationGiven) {
            throw new IllegalArgumentException("-n and -D exclude each other");
        }
        if (o.iterations == 0 && o.durationSeconds <= 0) {
            throw new IllegalArgumentException("-D must be positive");
        }
        if (o.server && o.client != null) {
            throw new IllegalArgumentException("--server and --client exclude each other");
        }
        if (o.client != null) {
            o.host = o.client;
        }
        if (o.port > 0xffff - 2) {
            throw new IllegalArgumentException("--port: " + o.port);
        }
        o.latencySizes = latSizes != null ? latSizes : sizes;
        o.bandwidthSizes = bwSizes != null ? bwSizes : sizes;
        if (o.transports == null) {
            o.transports = o.twoProcesses() ? List.of(PerfTransport.RDMA, PerfTransport.EPOLL, PerfTransport.NIO)
                    : List.of(PerfTransport.RDMA, PerfTransport.EPOLL, PerfTransport.NIO, PerfTransport.LOCAL);
        }
        return o;
    }

    boolean twoProcesses() {
        return server || client != null;
    }

    /** Whether -n was not given: counts come from the warm-up's rate. */
    boolean durationMode() {
        return iterations == 0;
    }

    /** The port of {@code transport} in two processes (fixed per transport, so both sides agree). */
    int portOf(String transport) {
        int base = port > 0 ? port : DEFAULT_PORT;
        switch (transport) {
            case PerfTransport.RDMA:
                return base;
            case PerfTransport.EPOLL:
                return base + 1;
            case PerfTransport.NIO:
                return base + 2;
            default:
                throw new IllegalArgumentException(transport + " runs in one process only");
        }
    }

    private static String value(String[] args, int i, String option) {
        if (i >= args.length) {
            throw new IllegalArgumentException(option + " needs a value");
        }
        return args[i];
    }

    private static long positiveLong(String s, String option) {
        try {
            long v = Long.parseLong(s);
            if (v > 0) {
                return v;
            }
        } catch (NumberFormatException ignored) {
            // below
        }
        throw new IllegalArgumentException(option + ": " + s + " (expected a positive integer)");
    }

    private static double nonNegative(String s, String option) {
        try {
            double v = Double.parseDouble(s);
            if (v >= 0 && !Double.isInfinite(v)) {
                return v;
            }
        } catch (NumberFormatException ignored) {
            // below
        }
        throw new IllegalArgumentException(option + ": " + s + " (expected a number of seconds)");
    }

    /** "8,64,4K,1M" or "8-1M" (the powers of two from 8 to 1 MiB); each from 1 B to 64 MiB. */
    static int[] sizes(String list) {
        List<Integer> sizes = new ArrayList<>();
        for (String part : list.split(",")) {
            int dash = part.indexOf('-');
            if (dash > 0) {
                int from = size(part.substring(0, dash));
                int to = size(part.substring(dash + 1));
                for (long s = from; s <= to; s <<= 1) {
                    sizes.add((int) s);
                }
            } else {
                sizes.add(size(part));
            }
        }
        if (sizes.isEmpty()) {
            throw new IllegalArgumentException("no sizes in " + list);
        }
        return sizes.stream().mapToInt(Integer::intValue).distinct().sorted().toArray();
    }

    private static int size(String s) {
        String t = s.trim().toUpperCase(Locale.ROOT);
        int unit = 1;
        for (String suffix : new String[] {"KIB", "KB", "K"}) {
            if (t.endsWith(suffix)) {
                unit = 1024;
                t = t.substring(0, t.length() - suffix.length());
                break;
            }
        }
        for (String suffix : new String[] {"MIB", "MB", "M"}) {
            if (unit == 1 && t.endsWith(suffix)) {
                unit = 1 << 20;
                t = t.substring(0, t.length() - suffix.length());
                break;
            }
        }
        if (unit == 1 && t.endsWith("B")) {
            t = t.substring(0, t.length() - 1);
        }
        try {
            long v = Long.parseLong(t.trim()) * unit;
            if (v >= PerfProtocol.MIN_SIZE && v <= PerfProtocol.MAX_SIZE) {
                return (int) v;
            }
        } catch (NumberFormatException ignored) {
            // below
        }
        throw new IllegalArgumentException("message size " + s + " (expected 1 B to 64 MiB, e.g. 64, 4K, 1M)");
    }
}
