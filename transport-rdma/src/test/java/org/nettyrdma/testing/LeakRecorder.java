package org.nettyrdma.testing;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.buffer.UnpooledByteBufAllocator;
import io.netty.util.ResourceLeakDetector;
import io.netty.util.ResourceLeakHint;
import io.netty.util.ResourceLeakTracker;
import org.junit.jupiter.api.Assumptions;
import org.nettyrdma.channel.RdmaByteBufAllocator;

import java.lang.ref.Reference;
import java.lang.ref.ReferenceQueue;
import java.lang.ref.WeakReference;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The leaks that Netty's leak detectors ({@link FailingLeakDetector}) reported in this JVM and that no test has
 * claimed yet; {@link LeakCheckExtension} fails a test class when there are any after it ran.
 *
 * <p>Netty reports a leak when the garbage collector finds a tracked resource (a buffer, ...) that was never released,
 * and then only when the detector next tracks a new resource of that type. {@link #collectLeaks()} provokes both.
 *
 * <p>A test that leaks on purpose wraps the leaking code in {@link #expectLeaks(Runnable)}: what it leaks is
 * reported to it alone, and never fails a test class.
 */
public final class LeakRecorder {
    /** The system property that installs {@link FailingLeakDetector} (see the surefire argLine of the module). */
    public static final String DETECTOR_PROPERTY = "io.netty.customResourceLeakDetector";
    /**
     * A JUnit {@link org.junit.jupiter.api.parallel.ResourceLock} key for tests that change or depend on the global
     * {@link ResourceLeakDetector#setLevel leak detection level}: tests run concurrently in this module, and two
     * tests that each set the level and restore it afterwards can leave it at the wrong level for the rest of the run.
     */
    public static final String LEVEL_LOCK = "io.netty.util.ResourceLeakDetector.level";

    private static final long EXPECT_TIMEOUT_NANOS = TimeUnit.SECONDS.toNanos(10);
    private static final long GC_WAIT_MILLIS = 200;
    private static final String SCOPE_TAG = "LeakRecorder.expectLeaks scope ";
    private static final Pattern SCOPE = Pattern.compile(Pattern.quote(SCOPE_TAG) + "(\\d+)\\b");

    private static final Object lock = new Object();
    /** Reported, not claimed. Guarded by {@link #lock}. */
    private static final List<Leak> leaks = new ArrayList<>();
    /** The open {@link #expectLeaks} scopes by id, with what was reported to them. Guarded by {@link #lock}. */
    private static final Map<Long, List<Leak>> scopes = new HashMap<>();
    private static final AtomicLong scopeIds = new AtomicLong();
    private static final ThreadLocal<ScopeHint> scope = new ThreadLocal<>();
    private static final List<ResourceLeakDetector<?>> detectors = new CopyOnWriteArrayList<>();
    private static final Set<String> runningTests = ConcurrentHashMap.newKeySet();

    private LeakRecorder() {
    }

    /**
     * A leak that a detector reported.
     *
     * @param resourceType what leaked, as Netty names it ({@code ByteBuf}, ...)
     * @param records      Netty's leak records: where it was created ("Created at") and last accessed, or empty if
     *                     it was not traced
     * @param thread       the thread that reported it (the one that next tracked a resource of that type)
     * @param runningTests the tests that were running when it was reported (not necessarily the one that leaked:
     *                     see the records)
     */
    public record Leak(String resourceType, String records, String thread, List<String> runningTests) {
        @Override
        public String toString() {
            return "LEAK: " + resourceType + ".release() was not called before it was garbage-collected; reported on "
                    + "thread " + thread + " while running " + (runningTests.isEmpty() ? "no test" : runningTests)
                    + (records.isEmpty() ? " (untraced: no records)" : condensed(records));
        }

        /** The records without the runs of JUnit, reflection and thread pool frames below the test's own. */
        private static String condensed(String records) {
            StringBuilder out = new StringBuilder(records.length());
            int skipped = 0;
            for (String line : records.split("\\R", -1)) {
                if (line.startsWith("\t") && isHarness(line.substring(1))) {
                    skipped++;
                    continue;
                }
                if (skipped > 0) {
                    out.append("\t... ").append(skipped).append(" JUnit/reflection/thread pool frames")
                            .append(System.lineSeparator());
                    skipped = 0;
                }
                out.append(line).append(System.lineSeparator());
            }
            if (skipped > 0) {
                out.append("\t... ").append(skipped).append(" JUnit/reflection/thread pool frames");
            } else {
                out.setLength(out.length() - System.lineSeparator().length());
            }
            return out.toString();
        }

        private static boolean isHarness(String frame) {
            return frame.startsWith("org.junit.") || frame.startsWith("org.apache.maven.surefire.")
                    || frame.startsWith("java.base/jdk.internal.reflect.")
                    || frame.startsWith("java.base/java.lang.reflect.")
                    || frame.startsWith("java.base/java.util.concurrent.ForkJoin");
        }
    }

    /** Whether this JVM runs with {@link FailingLeakDetector} as Netty's leak detector. */
    public static boolean isInstalled() {
        return FailingLeakDetector.class.getName().equals(System.getProperty(DETECTOR_PROPERTY));
    }

    /** How many detectors (one per resource type) Netty has created so far. */
    static int detectorCount() {
        return detectors.size();
    }

    static void register(ResourceLeakDetector<?> detector) {
        detectors.add(detector);
    }

    static void testStarted(String name) {
        runningTests.add(name);
    }

    static void testFinished(String name) {
        runningTests.remove(name);
    }

    static Object initialHint() {
        return scope.get();
    }

    static void record(String resourceType, String records) {
        Leak leak = new Leak(resourceType, records, Thread.currentThread().getName(), List.copyOf(runningTests));
        Matcher matcher = SCOPE.matcher(records);
        synchronized (lock) {
            if (matcher.find()) {
                // leaked on purpose inside expectLeaks: its test gets it; after the scope closed, nobody does
                List<Leak> claimed = scopes.get(Long.parseLong(matcher.group(1)));
                if (claimed != null) {
                    claimed.add(leak);
                }
                return;
            }
            leaks.add(leak);
        }
    }

    /** Takes (and forgets) the leaks reported and not claimed so far. */
    public static List<Leak> takeLeaks() {
        synchronized (lock) {
            List<Leak> taken = List.copyOf(leaks);
            leaks.clear();
            return taken;
        }
    }

    /**
     * Runs {@code leaky}, which leaks one or more resources on purpose, and waits until the leak detector has
     * reported at least one of them (10 s at most; {@link AssertionError} if none was). The leaks it reports are
     * returned here and never fail a test class, not even when reported later.
     *
     * <p>Only what {@code leaky} allocates on the calling thread counts, and only while the leak detection level is
     * {@code PARANOID} (the module's), so that every resource is tracked. Skips (an aborted test) when the JVM
     * does not run with {@link FailingLeakDetector}.
     *
     * @return the leaks reported, at least one
     */
    public static List<Leak> expectLeaks(Runnable leaky) {
        Assumptions.assumeTrue(isInstalled(), () -> "needs -D" + DETECTOR_PROPERTY + '='
                + FailingLeakDetector.class.getName() + " (the surefire argLine of transport-rdma)");
        if (ResourceLeakDetector.getLevel() != ResourceLeakDetector.Level.PARANOID) {
            throw new IllegalStateException("leak detection level " + ResourceLeakDetector.getLevel()
                    + ": expectLeaks needs PARANOID (-Dio.netty.leakDetection.level=paranoid), so that all is tracked");
        }
        long id = scopeIds.incrementAndGet();
        List<Leak> claimed = new ArrayList<>();
        synchronized (lock) {
            scopes.put(id, claimed);
        }
        try {
            scope.set(new ScopeHint(id));
            try {
                leaky.run();
            } finally {
                scope.remove();
            }
            long deadline = System.nanoTime() + EXPECT_TIMEOUT_NANOS;
            do {
                collectLeaks();
                synchronized (lock) {
                    if (!claimed.isEmpty()) {
                        return List.copyOf(claimed);
                    }
                }
            } while (System.nanoTime() - deadline < 0);
            throw new AssertionError("nothing that expectLeaks ran was reported as leaked within "
                    + TimeUnit.NANOSECONDS.toSeconds(EXPECT_TIMEOUT_NANOS) + " s");
        } finally {
            synchronized (lock) {
                scopes.remove(id);
            }
        }
    }

    /**
     * Makes the detectors report what leaked so far, as far as it can: runs the garbage collector (twice, waiting
     * until the references it cleared are enqueued), then has every detector poll its reference queue, and
     * allocates and releases a buffer from the usual allocators. Takes about as long as two full collections.
     */
    public static void collectLeaks() {
        for (int round = 0; round < 2; round++) {
            gc();
            pollDetectors();
        }
        allocateAndRelease(PooledByteBufAllocator.DEFAULT);
        allocateAndRelease(UnpooledByteBufAllocator.DEFAULT);
        allocateAndRelease(RdmaByteBufAllocator.DEFAULT);
    }

    private static void gc() {
        ReferenceQueue<Object> queue = new ReferenceQueue<>();
        WeakReference<Object> sentinel = new WeakReference<>(new Object(), queue);
        System.gc();
        try {
            // the reference handler thread enqueues what the collection cleared: the sentinel, and the leaks
            if (queue.remove(GC_WAIT_MILLIS) != null) {
                Thread.sleep(5);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            Reference.reachabilityFence(sentinel);
        }
    }

    /** A detector reports the leaks in its queue when it tracks something: track a probe and close it again. */
    @SuppressWarnings("unchecked")
    private static void pollDetectors() {
        for (ResourceLeakDetector<?> detector : detectors) {
            Object probe = new Object();
            ResourceLeakTracker<Object> tracker = ((ResourceLeakDetector<Object>) detector).trackForcibly(probe);
            tracker.close(probe);
        }
    }

    private static void allocateAndRelease(ByteBufAllocator alloc) {
        ByteBuf direct = alloc.directBuffer(16);
        direct.release();
        ByteBuf heap = alloc.heapBuffer(16);
        heap.release();
    }

    /** The initial hint of what is allocated inside expectLeaks: it ends up in the leak records. */
    private record ScopeHint(long id) implements ResourceLeakHint {
        @Override
        public String toHintString() {
            return SCOPE_TAG + id + " (leaked on purpose)";
        }

        @Override
        public String toString() {
            return toHintString();
        }
    }
}
