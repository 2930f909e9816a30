package org.nettyrdma.benchmarks.perf;

import io.netty.channel.EventLoopGroup;
import org.nettyrdma.channel.RdmaIoHandler;

/**
 * The registered (pinned) memory that a run's RDMA connections hold ({@code RdmaCounters.registeredBytes()} of this
 * process's RDMA event loops): once the connections are up and idle, and the most seen while a measured round runs.
 * Per connection, both ends when the server runs in this process.
 */
final class RegisteredMemory {
    private final EventLoopGroup[] groups;
    private final int connections;
    private long idleBytes = -1;
    private long activeBytes = -1;

    private RegisteredMemory(int connections, EventLoopGroup... groups) {
        this.groups = groups;
        this.connections = connections;
    }

    /** For an RDMA transport's groups (nulls skipped), else null. */
    static RegisteredMemory of(PerfTransport transport, int connections, EventLoopGroup... groups) {
        return PerfTransport.RDMA.equals(transport.name()) ? new RegisteredMemory(connections, groups) : null;
    }

    private long now() {
        long bytes = 0;
        for (EventLoopGroup g : groups) {
            if (g != null) {
                bytes += RdmaIoHandler.counters(g).registeredBytes();
            }
        }
        return bytes;
    }

    /**
     * The connections are up and nothing moves: the figure once it held still for 200 ms (at most 3 s). A connect
     * completes before the accepting end, on its own loop, has set up everything (the figure taken at once missed
     * part of the in-process server's buffers now and then: 580 instead of 836 KiB).
     */
    void sampleIdle() throws InterruptedException {
        long bytes = now();
        long stillSince = System.nanoTime();
        long deadline = stillSince + 3_000_000_000L;
        while (System.nanoTime() - stillSince < 200_000_000L && System.nanoTime() - deadline < 0) {
            Thread.sleep(5);
            long b = now();
            if (b != bytes) {
                bytes = b;
                stillSince = System.nanoTime();
            }
        }
        idleBytes = bytes;
    }

    /** A measured round runs. */
    void sampleActive() {
        activeBytes = Math.max(activeBytes, now());
    }

    /** Writes the figures per connection into {@code r} (NaN where not sampled). */
    void report(PerfResult r) {
        r.registeredIdleBytesPerConnection = idleBytes < 0 ? Double.NaN : (double) idleBytes / connections;
        r.registeredActiveBytesPerConnection = activeBytes < 0 ? Double.NaN : (double) activeBytes / connections;
    }
}
