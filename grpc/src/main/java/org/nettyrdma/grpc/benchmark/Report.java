package org.nettyrdma.grpc.benchmark;

import java.util.Locale;

/** The benchmark's table: one row per transport. */
final class Report {
    private Report() {
    }

    static String header() {
        return String.format(Locale.ROOT, "%-12s %17s %17s   %26s   %9s%n%-12s %8s %8s %8s %8s   %8s %8s %8s   %9s",
                "", "unary 16 B, µs", "unary 4 KiB, µs", "server streaming, MB/s", "8 MiB",
                "transport", "p50", "p99", "p50", "p99", "4 KiB", "64 KiB", "1 MiB", "unary MB/s");
    }

    static String legend(double scale) {
        return "p50/p99: sequential unary calls (" + Math.max(200, (int) (20_000 * scale)) + " each, after "
                + Math.max(200, (long) (2000 * scale)) + " ms of warm-up at 16 B), the echo checked\n"
                + "streaming: 10^6 payload bytes/s the client received from one server-streaming call of "
                + Math.max(4L << 20, (long) ((256L << 20) * scale)) / (1 << 20) + " MiB; the median of 3 after one to "
                + "warm up; every message checked (sequence and bytes)\n"
                + "8 MiB unary: 10^6 bytes/s of request and echo, sequential calls; the median of 3 runs\n"
                + "rdma: org.nettyrdma.grpc.RdmaGrpc's configuration; rdma-plain: channel types and event loops only";
    }

    static final class Row {
        final String label;
        double p50Small;
        double p99Small;
        double p50Page;
        double p99Page;
        double stream4k;
        double stream64k;
        double stream1m;
        double unary8m;
        String note = "";

        Row(String label) {
            this.label = label;
        }

        @Override
        public String toString() {
            return String.format(Locale.ROOT, "%-12s %8.1f %8.1f %8.1f %8.1f   %8.1f %8.1f %8.1f   %9.1f   %s",
                    label, p50Small, p99Small, p50Page, p99Page, stream4k, stream64k, stream1m, unary8m, note);
        }
    }
}
