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

    /** The connections are up and nothing moves. */
    void sampleIdle() {
        idleBytes = now();
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
