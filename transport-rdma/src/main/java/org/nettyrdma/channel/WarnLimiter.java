package org.nettyrdma.channel;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Lets one warning through per interval, for failures that peers can cause over and over (so that they cannot flood
 * the log); callers log the others at DEBUG. Thread-safe.
 */
final class WarnLimiter {
    private final long intervalNanos;
    private final AtomicLong nextNanos;

    WarnLimiter(long interval, TimeUnit unit) {
        intervalNanos = unit.toNanos(interval);
        nextNanos = new AtomicLong(System.nanoTime());
    }

    /** Whether this warning may be logged at WARN: the first one of its interval. */
    boolean tryWarn() {
        long now = System.nanoTime();
        long next = nextNanos.get();
        return now - next >= 0 && nextNanos.compareAndSet(next, now + intervalNanos);
    }
}
