package org.nettyrdma.channel;

import io.netty.util.concurrent.DefaultThreadFactory;

import java.util.concurrent.Executor;
import java.util.concurrent.SynchronousQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;

/**
 * Where a connection's queue pair and CM id are destroyed. Destroying a QP, {@code rdma_disconnect} and
 * {@code rdma_destroy_id} are kernel calls that mostly return at once but may keep the calling thread: SoftRoCE took
 * 1.9 s to destroy a QP whose peer host had been killed ({@code vm/two-host}, 2026-12-07), and ~50 s for one with a
 * memory window still bound. An event loop that made them itself would stall all its other channels meanwhile, for
 * each connection to a dead host in turn. So the loop hands them to a daemon thread of this pool and waits at most
 * {@link #INLINE_WAIT_NANOS} (a quick teardown ends within the channel's close, as it always did); a slower one goes
 * on without the loop, which frees the connection's memory, completion queue entries and registration when it has
 * returned ({@link RdmaIoHandler#tearDown}).
 */
final class Teardowns {
    /** Daemon threads, created on demand, gone after 30 s idle: one per teardown that is under way. */
    static final Executor EXECUTOR = new ThreadPoolExecutor(0, Integer.MAX_VALUE, 30, TimeUnit.SECONDS,
            new SynchronousQueue<>(), new DefaultThreadFactory("netty-rdma-teardown", true));

    /** How long the loop waits for a teardown before it goes on without it. */
    static final long INLINE_WAIT_NANOS = TimeUnit.MILLISECONDS.toNanos(
            Long.getLong("org.nettyrdma.teardownInlineWaitMillis", 50));

    /**
     * How long a loop that shuts down waits for its teardowns under way before it frees its completion queues, receive
     * pools and staging (which their QPs may still use: if one has not returned by then, those are left, not freed).
     */
    static final long SHUTDOWN_WAIT_NANOS = TimeUnit.SECONDS.toNanos(60);

    private Teardowns() {
    }
}
