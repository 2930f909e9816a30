package org.nettyrdma.verbs.jni;

import org.junit.platform.engine.DiscoverySelector;
import org.junit.platform.engine.TestExecutionResult;
import org.junit.platform.engine.reporting.ReportEntry;
import org.junit.platform.launcher.Launcher;
import org.junit.platform.launcher.LauncherDiscoveryRequest;
import org.junit.platform.launcher.TestExecutionListener;
import org.junit.platform.launcher.TestIdentifier;
import org.junit.platform.launcher.core.LauncherDiscoveryRequestBuilder;
import org.junit.platform.launcher.core.LauncherFactory;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

import static org.junit.platform.engine.discovery.DiscoverySelectors.selectClass;
import static org.junit.platform.engine.discovery.DiscoverySelectors.selectMethod;

/**
 * Runs the verbs conformance suite ({@link JniVerbsConformance}) and the JNI provider's own device tests
 * ({@link JniDeviceChecks}) on real RDMA devices, without Maven or Surefire: the lean runner of the VM
 * (transport-rdma/src/test/vm/conformance.sh).
 *
 * <pre>
 * VmConformanceMain [--only=method,method...] name=ip [name=ip...]     e.g. rxe0=10.77.0.1 siw0=10.78.0.1
 * </pre>
 *
 * Prints one line per test and, per device and overall, "N passed, N failed, N skipped". Exit code 1 if anything
 * failed or nothing ran, 2 if the JNI provider is unavailable.
 */
public final class VmConformanceMain {
    private VmConformanceMain() {
    }

    public static void main(String[] args) {
        List<String> only = new ArrayList<>();
        List<String[]> devices = new ArrayList<>();
        for (String arg : args) {
            if (arg.startsWith("--only=")) {
                only.addAll(Arrays.asList(arg.substring("--only=".length()).split(",")));
            } else {
                int eq = arg.indexOf('=');
                devices.add(eq < 0 ? new String[] {arg, arg}
                        : new String[] {arg.substring(0, eq), arg.substring(eq + 1)});
            }
        }
        if (devices.isEmpty()) {
            System.err.println("usage: VmConformanceMain [--only=method,...] name=ip [name=ip...]");
            System.exit(2);
        }
        if (!JniProvider.isAvailable()) {
            System.out.println("the JNI provider is unavailable: " + JniProvider.unavailabilityCause().getMessage());
            System.exit(2);
        }
        Counts total = new Counts("all devices");
        for (String[] device : devices) {
            System.setProperty(JniVerbsConformance.ADDRESS_PROPERTY, device[1]);
            Counts counts = new Counts(device[0] + " (" + device[1] + ")");
            System.out.println("== " + counts.name + ": verbs conformance suite on the JNI provider");
            run(selectors(only), counts);
            System.out.println("== " + counts.name + ": " + counts);
            total.add(counts);
        }
        System.out.println("== " + total.name + ": " + total);
        System.out.println(total);
        System.exit(total.failed > 0 || total.passed == 0 ? 1 : 0);
    }

    private static List<DiscoverySelector> selectors(List<String> only) {
        List<DiscoverySelector> selectors = new ArrayList<>();
        if (only.isEmpty()) {
            selectors.add(selectClass(JniVerbsConformance.class));
            selectors.add(selectClass(JniDeviceChecks.class));
            return selectors;
        }
        for (String method : only) {
            Class<?> in = hasMethod(JniDeviceChecks.class, method) ? JniDeviceChecks.class : JniVerbsConformance.class;
            selectors.add(selectMethod(in, method));
        }
        return selectors;
    }

    private static boolean hasMethod(Class<?> type, String name) {
        return Arrays.stream(type.getDeclaredMethods()).anyMatch(m -> m.getName().equals(name));
    }

    private static void run(List<DiscoverySelector> selectors, Counts counts) {
        LauncherDiscoveryRequest request = LauncherDiscoveryRequestBuilder.request().selectors(selectors).build();
        Launcher launcher = LauncherFactory.create();
        launcher.execute(request, new Printer(counts));
    }

    private static final class Counts {
        final String name;
        int passed;
        int failed;
        int skipped;

        Counts(String name) {
            this.name = name;
        }

        void add(Counts c) {
            passed += c.passed;
            failed += c.failed;
            skipped += c.skipped;
        }

        @Override
        public String toString() {
            return passed + " passed, " + failed + " failed, " + skipped + " skipped";
        }
    }

    private static final class Printer implements TestExecutionListener {
        private final Counts counts;
        private final ConcurrentHashMap<String, Long> started = new ConcurrentHashMap<>();

        Printer(Counts counts) {
            this.counts = counts;
        }

        private static String name(TestIdentifier id) {
            String source = id.getSource().map(Object::toString).orElse("");
            String simple = source.contains("JniDeviceChecks") ? "JniDeviceChecks." : "";
            return simple + id.getDisplayName().replace("()", "");
        }

        @Override
        public void executionStarted(TestIdentifier id) {
            started.put(id.getUniqueId(), System.nanoTime());
        }

        @Override
        public void executionSkipped(TestIdentifier id, String reason) {
            if (id.isTest()) {
                counts.skipped++;
                System.out.println("SKIP " + name(id) + ": " + reason);
            }
        }

        @Override
        public void executionFinished(TestIdentifier id, TestExecutionResult result) {
            Long start = started.remove(id.getUniqueId());
            long ms = start == null ? 0 : TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
            Throwable t = result.getThrowable().orElse(null);
            switch (result.getStatus()) {
                case SUCCESSFUL:
                    if (id.isTest()) {
                        counts.passed++;
                        System.out.println("PASS " + name(id) + " (" + ms + " ms)");
                    }
                    break;
                case ABORTED:
                    if (id.isTest()) {
                        counts.skipped++;
                        System.out.println("SKIP " + name(id) + ": " + (t == null ? "" : t.getMessage()));
                    }
                    break;
                default:
                    counts.failed++;
                    System.out.println("FAIL " + (id.isTest() ? "" : "(container) ") + name(id) + " (" + ms + " ms): "
                            + t);
                    if (t != null) {
                        StackTraceElement[] trace = t.getStackTrace();
                        for (int i = 0; i < Math.min(8, trace.length); i++) {
                            System.out.println("        at " + trace[i]);
                        }
                        for (Throwable s : t.getSuppressed()) {
                            System.out.println("    suppressed: " + s);
                        }
                        if (t.getCause() != null) {
                            System.out.println("    cause: " + t.getCause());
                        }
                    }
                    break;
            }
        }

        @Override
        public void reportingEntryPublished(TestIdentifier id, ReportEntry entry) {
            System.out.println("     " + name(id) + ": " + entry.getKeyValuePairs());
        }
    }
}
