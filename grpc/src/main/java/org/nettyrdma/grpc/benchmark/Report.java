package org.nettyrdma.grpc.benchmark;

import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/** The benchmark's table: one row per transport, each cell the median of the rounds. */
final class Report {
    static final int P50_16B = 0;
    static final int P99_16B = 1;
    static final int P50_4K = 2;
    static final int P99_4K = 3;
    static final int STREAM_4K = 4;
    static final int STREAM_64K = 5;
    static final int STREAM_1M = 6;
    static final int UNARY_8M = 7;
    static final int CELLS = 8;

    private Report() {
    }

    static String header() {
        return String.format(Locale.ROOT, "%-12s %17s %17s   %26s   %9s%n%-12s %8s %8s %8s %8s   %8s %8s %8s   %9s",
                "", "unary 16 B, µs", "unary 4 KiB, µs", "server streaming, MB/s", "8 MiB",
                "transport", "p50", "p99", "p50", "p99", "4 KiB", "64 KiB", "1 MiB", "unary MB/s");
    }

    static String legend(int calls, long warmupMillis, long streamBytes, int rounds) {
        return "p50/p99: " + calls + " sequential unary calls per round (after " + warmupMillis + " ms of warm-up), "
                + "each echo checked\n"
                + "streaming: 10^6 payload bytes/s the client received from one server-streaming call of "
                + streamBytes / (1 << 20) + " MiB per round, after one to warm up; every message checked\n"
                + "8 MiB unary: 10^6 bytes/s of request and echo, sequential calls\n"
                + "each cell: the median of " + rounds + " rounds; a round runs every transport in turn, so that a "
                + "change of the machine's load falls on all of them\n"
                + "rdma: org.nettyrdma.grpc.RdmaGrpc's configuration and event loops; rdma-plain: channel types and the "
                + "transport's default event loops only";
    }

    /** One round's measurements of a transport. */
    static final class Row {
        final double[] cells = new double[CELLS];
        String note = "";
    }

    /** The row of {@code label}: the median of each cell over {@code rounds}; the note of the last round. */
    static String medianRow(String label, List<Row> rounds) {
        StringBuilder b = new StringBuilder(String.format(Locale.ROOT, "%-12s", label));
        for (int c = 0; c < CELLS; c++) {
            double[] v = new double[rounds.size()];
            for (int r = 0; r < v.length; r++) {
                v[r] = rounds.get(r).cells[c];
            }
            Arrays.sort(v);
            b.append(String.format(Locale.ROOT, c == STREAM_4K || c == UNARY_8M ? "   %8.1f" : " %8.1f",
                    v[v.length / 2]));
        }
        return b.append("   ").append(rounds.get(rounds.size() - 1).note).toString();
    }
}
