package org.nettyrdma.benchmarks.perf;

/** One measured row: a transport, a mode and a message size. Time figures in ns; NaN where they don't apply. */
final class PerfResult {
    static final String LATENCY = "latency";
    static final String BANDWIDTH = "bandwidth";

    final String transport;
    final String mode;
    final int size;
    final int connections;
    /** Measured round trips or messages per connection. */
    long iterations;
    double seconds = Double.NaN;
    double minNs = Double.NaN;
    double p50Ns = Double.NaN;
    double p99Ns = Double.NaN;
    double p999Ns = Double.NaN;
    double maxNs = Double.NaN;
    double megabytesPerSecond = Double.NaN;
    double messagesPerSecond = Double.NaN;
    /** CPU seconds of this process per 10^9 payload bytes. */
    double cpuSecondsPerGigabyte = Double.NaN;
    /** Bytes allocated on the event loop threads of this process per message sent (both directions). */
    double allocatedBytesPerMessage = Double.NaN;
    /** RDMA: registered bytes per connection once connected and idle, and the most while this row ran (NaN: none). */
    double registeredIdleBytesPerConnection = Double.NaN;
    double registeredActiveBytesPerConnection = Double.NaN;
    /** RDMA: the shares of the client's bytes copied, placed in the peer's WRITE ring, sent by READ rendezvous. */
    double copiedPercent = Double.NaN;
    double ringPercent = Double.NaN;
    double rendezvousPercent = Double.NaN;
    /** The simple class name of the client channel's allocator. */
    String allocator = "";
    /** What was checked: "bytes" or "bytes+content". */
    String verified = "";
    /** "ok", or why there is no figure. */
    String status = "ok";

    PerfResult(String transport, String mode, int size, int connections) {
        this.transport = transport;
        this.mode = mode;
        this.size = size;
        this.connections = connections;
    }

    boolean ok() {
        return "ok".equals(status);
    }

    boolean latency() {
        return LATENCY.equals(mode);
    }
}
