package org.nettyrdma.benchmarks;

import io.netty.util.concurrent.DefaultThreadFactory;

import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;

/**
 * JMH's worker threads as Netty's {@code FastThreadLocalThread}s, like the event loops that allocate buffers in a
 * transport: Netty's allocators and its {@code Recycler} keep per-thread caches for such threads. Selected with
 * {@code -Djmh.executor=CUSTOM -Djmh.executor.class=org.nettyrdma.benchmarks.FastThreadLocalExecutor} (the
 * {@code @Fork} of the benchmarks that need it says so).
 */
public final class FastThreadLocalExecutor extends ThreadPoolExecutor {
    /** The constructor JMH's CUSTOM executor type calls. */
    public FastThreadLocalExecutor(int maxThreads, String prefix) {
        super(maxThreads, maxThreads, 1, TimeUnit.MINUTES, new LinkedBlockingQueue<>(),
                new DefaultThreadFactory(prefix, true));
    }
}
