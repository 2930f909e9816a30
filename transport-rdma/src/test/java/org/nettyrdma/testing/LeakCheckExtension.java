package org.nettyrdma.testing;

import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.BeforeEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

import java.lang.reflect.Method;
import java.util.List;

/**
 * Fails a test class when Netty's leak detector reported a leak while it ran: after all its tests (and its
 * {@code @AfterAll} methods), it {@linkplain LeakRecorder#collectLeaks() provokes the leak reports} and fails the
 * class with the leak records of every leak reported and not {@linkplain LeakRecorder#expectLeaks claimed}.
 *
 * <p>Registered for every test class of the module by JUnit's extension auto-detection
 * (src/test/resources/junit-platform.properties and META-INF/services/org.junit.jupiter.api.extension.Extension).
 * Does nothing unless the JVM runs with {@link FailingLeakDetector} (the surefire argLine of the module), e.g. in
 * an IDE without it or in the VM runner.
 *
 * <p>Tests run concurrently in this module, and Netty reports a leak only once the garbage collector found it: a leak
 * may fail another class than the one that leaked it (one that ran at the same time, or right after). The records
 * say where the resource was created and last accessed; {@link LeakRecorder.Leak#runningTests()} says what ran.
 */
public final class LeakCheckExtension implements BeforeAllCallback, AfterAllCallback, BeforeEachCallback,
        AfterEachCallback {
    /** Leak records in the failure message: the rest are only counted (Netty's logger has them all). */
    private static final int MAX_LEAKS_SHOWN = 5;

    @Override
    public void beforeAll(ExtensionContext context) {
        if (LeakRecorder.isInstalled()) {
            // once, for the whole run: the leaks reported after the last class
            context.getRoot().getStore(ExtensionContext.Namespace.create(LeakCheckExtension.class))
                    .getOrComputeIfAbsent(FinalCheck.class, k -> new FinalCheck(), FinalCheck.class);
        }
    }

    @Override
    public void beforeEach(ExtensionContext context) {
        LeakRecorder.testStarted(testName(context));
    }

    @Override
    public void afterEach(ExtensionContext context) {
        LeakRecorder.testFinished(testName(context));
    }

    @Override
    public void afterAll(ExtensionContext context) {
        if (LeakRecorder.isInstalled()) {
            check(context.getRequiredTestClass().getName());
        }
    }

    private static void check(String what) {
        LeakRecorder.collectLeaks();
        if (LeakRecorder.detectorCount() == 0) {
            // collectLeaks allocated buffers: Netty has made its ByteBuf detector by now, unless it fell back to its own
            throw new IllegalStateException("-D" + LeakRecorder.DETECTOR_PROPERTY + '='
                    + FailingLeakDetector.class.getName() + " is set, but Netty did not create it (see the log)");
        }
        List<LeakRecorder.Leak> leaks = LeakRecorder.takeLeaks();
        if (!leaks.isEmpty()) {
            throw new AssertionError(message(what, leaks));
        }
    }

    private static String message(String what, List<LeakRecorder.Leak> leaks) {
        StringBuilder message = new StringBuilder()
                .append(leaks.size()).append(" resource leak(s) reported by Netty's leak detector while or after ")
                .append(what).append(" ran (a leak is reported once the garbage collector finds the unreleased ")
                .append("resource: it may come from a test class that ran at the same time or just before; ")
                .append("\"Created at\" says where it was allocated). Intentional leaks go in LeakRecorder.expectLeaks.");
        for (int i = 0; i < Math.min(leaks.size(), MAX_LEAKS_SHOWN); i++) {
            message.append(System.lineSeparator()).append(System.lineSeparator())
                    .append(i + 1).append(") ").append(leaks.get(i));
        }
        if (leaks.size() > MAX_LEAKS_SHOWN) {
            message.append(System.lineSeparator()).append(System.lineSeparator()).append("... and ")
                    .append(leaks.size() - MAX_LEAKS_SHOWN).append(" more (all are in the log, as LEAK: ...)");
        }
        return message.toString();
    }

    private static String testName(ExtensionContext context) {
        Method method = context.getRequiredTestMethod();
        String name = context.getRequiredTestClass().getSimpleName() + '.' + method.getName();
        String display = context.getDisplayName();
        return display.startsWith(method.getName() + '(') ? name : name + ' ' + display;
    }

    /** Closed by JUnit when all test classes ran (an error of the engine, if it throws). */
    private static final class FinalCheck implements AutoCloseable {
        @Override
        public void close() {
            check("all test classes");
        }
    }
}
