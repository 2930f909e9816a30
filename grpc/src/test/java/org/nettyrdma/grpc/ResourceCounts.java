package org.nettyrdma.grpc;

import io.netty.channel.EventLoopGroup;
import org.nettyrdma.channel.Rdma;
import org.nettyrdma.channel.RdmaIoHandler;

import java.io.File;

/** What a process holds that a leak would grow: RDMA queue pairs (of a group), registered memory, threads, fds. */
final class ResourceCounts {
    /** Nothing held: a baseline that only waits for the queue pairs to be gone. */
    static final ResourceCounts NONE = new ResourceCounts(0, Long.MAX_VALUE, Integer.MAX_VALUE / 2, Integer.MAX_VALUE);
    final int queuePairs;
    final long registeredBytes;
    final int threads;
    final int fds;

    ResourceCounts(int queuePairs, long registeredBytes, int threads, int fds) {
        this.queuePairs = queuePairs;
        this.registeredBytes = registeredBytes;
        this.threads = threads;
        this.fds = fds;
    }

    /** Now, in this process, with the queue pairs of {@code group}'s loops. */
    static ResourceCounts of(EventLoopGroup group) {
        long registered = 0;
        for (long b : Rdma.registeredBytesByDevice().values()) {
            registered += b;
        }
        String[] fds = new File("/proc/self/fd").list();
        return new ResourceCounts(RdmaIoHandler.counters(group).queuePairs(), registered, Thread.activeCount(),
                fds == null ? -1 : fds.length);
    }

    /** Whether these counts are at most {@code baseline}'s, threads up to {@code threadSlack} more. */
    boolean noMoreThan(ResourceCounts baseline, int threadSlack) {
        return queuePairs <= baseline.queuePairs && registeredBytes <= baseline.registeredBytes
                && fds <= baseline.fds && threads <= baseline.threads + threadSlack;
    }

    /** The line {@link EchoServerProcess} and its server exchange. */
    String format() {
        return "counts " + queuePairs + " " + registeredBytes + " " + threads + " " + fds;
    }

    static ResourceCounts parse(String line) {
        String[] f = line.trim().split(" ");
        if (f.length != 5 || !f[0].equals("counts")) {
            throw new IllegalArgumentException("not a counts line: " + line);
        }
        return new ResourceCounts(Integer.parseInt(f[1]), Long.parseLong(f[2]), Integer.parseInt(f[3]),
                Integer.parseInt(f[4]));
    }

    @Override
    public String toString() {
        return "{queue pairs " + queuePairs + ", registered " + registeredBytes + " B, threads " + threads + ", fds "
                + fds + "}";
    }
}
