package org.nettyrdma.shuffle;

import java.util.Arrays;
import java.util.Map;

/**
 * The outcome of a {@link ShuffleFetcher} run: the blocks that arrived intact, those that arrived with the wrong
 * size or checksum, those Spark reported failed ({@code onBlockFetchFailure}, with the first exception of each), those
 * that had no outcome when the run's time ran out, and the latency of each intact block (from the start of its
 * request to its arrival).
 */
public record FetchReport(int blocks, int intact, long intactBytes, Map<String, String> corrupt,
                          Map<String, Throwable> failed, int missing, long elapsedNanos, long[] latencyNanos) {

    /** Whether every block arrived intact. */
    public boolean complete() {
        return intact == blocks && corrupt.isEmpty() && failed.isEmpty() && missing == 0;
    }

    /** Intact bytes per second, in MB (10^6 bytes). */
    public double megabytesPerSecond() {
        return intactBytes / 1e6 / (elapsedNanos / 1e9);
    }

    /** The {@code p}-th percentile (0 < p <= 100) of the intact blocks' latency, in microseconds. */
    public double latencyMicros(double p) {
        if (latencyNanos.length == 0) {
            return Double.NaN;
        }
        long[] sorted = latencyNanos.clone();
        Arrays.sort(sorted);
        int rank = (int) Math.ceil(p / 100 * sorted.length) - 1;
        return sorted[Math.max(0, Math.min(sorted.length - 1, rank))] / 1e3;
    }

    /** One line for a failing test or a log: counts, and a few of the corrupt and failed blocks. */
    public String summary() {
        StringBuilder s = new StringBuilder()
                .append(intact).append('/').append(blocks).append(" blocks intact (").append(intactBytes)
                .append(" B), ").append(corrupt.size()).append(" corrupt, ").append(failed.size())
                .append(" failed, ").append(missing).append(" without an outcome, in ")
                .append(elapsedNanos / 1_000_000).append(" ms");
        corrupt.entrySet().stream().limit(3)
                .forEach(e -> s.append("; corrupt ").append(e.getKey()).append(": ").append(e.getValue()));
        failed.entrySet().stream().limit(3)
                .forEach(e -> s.append("; failed ").append(e.getKey()).append(": ").append(e.getValue()));
        return s.toString();
    }
}
