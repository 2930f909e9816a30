package org.nettyrdma.verbs.jni;

import org.junit.platform.engine.DiscoverySelector;
import org.junit.platform.engine.Filter;
import org.junit.platform.engine.TestExecutionResult;
import org.junit.platform.engine.TestSource;
import org.junit.platform.engine.discovery.ClassNameFilter;
import org.junit.platform.engine.reporting.ReportEntry;
import org.junit.platform.engine.support.descriptor.ClassSource;
import org.junit.platform.engine.support.descriptor.MethodSource;
import org.junit.platform.launcher.Launcher;
import org.junit.platform.launcher.LauncherDiscoveryRequest;
import org.junit.platform.launcher.TestExecutionListener;
import org.junit.platform.launcher.TestIdentifier;
import org.junit.platform.launcher.core.LauncherDiscoveryRequestBuilder;
import org.junit.platform.launcher.core.LauncherFactory;

import java.lang.reflect.Method;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;

import static org.junit.platform.engine.discovery.DiscoverySelectors.selectClass;
import static org.junit.platform.engine.discovery.DiscoverySelectors.selectMethod;
import static org.junit.platform.engine.discovery.DiscoverySelectors.selectPackage;

/**
 * The lean JUnit runner of the VM (no Maven or Surefire in the guest), shared by {@link VmConformanceMain} (the verbs
 * conformance suite, transport-rdma/src/test/vm/conformance.sh) and the transport tests on real devices
 * (transport-rdma/src/test/vm/transport.sh, through {@link #main}): runs the same tests once per RDMA device, with a
 * system property set to the device's IP, and prints one line per test and, per device and overall,
 * "N passed, N failed, N skipped".
 *
 * <pre>
 * VmTestLauncher --package=PKG --classes=REGEX --address-property=NAME [--title=TEXT] [--only=Class[#method],...]
 *                [--await=FILE] name=ip [name=ip...]
 * </pre>
 *
 * runs the test classes of package {@code PKG} whose simple name matches {@code REGEX} (or only the classes and
 * methods of {@code --only}, simple class names in {@code PKG}), on each device in turn with the system property
 * {@code NAME} set to its IP. With {@code --await=FILE} it waits, up to {@value #AWAIT_SECONDS} s, until FILE exists
 * before the first test (vm/two-host: the JVM starts while the other host's servers start, which create it). Exit code 1 if anything failed or nothing passed, 2 on a usage error or if the JNI
 * provider is unavailable.
 */
public final class VmTestLauncher {
    /**
     * JUnit's launcher warns (through java.util.logging, twice per device) that netty-buffer's tests jar brings a
     * second junit-platform.properties, which the module's own shadows on purpose; {@link #main} silences it. A strong
     * reference: java.util.logging keeps loggers weakly.
     */
    private static final java.util.logging.Logger JUNIT_CONFIGURATION_LOGGER =
            java.util.logging.Logger.getLogger("org.junit.platform.launcher.core.LauncherConfigurationParameters");

    /** How long {@code --await=FILE} waits for FILE. */
    static final int AWAIT_SECONDS = 600;

    private VmTestLauncher() {
    }

    /** A device under test: its name (for the output) and the IP the tests bind to and connect to. */
    public static final class Device {
        public final String name;
        public final String ip;

        Device(String name, String ip) {
            this.name = name;
            this.ip = ip;
        }

        /** {@code name=ip}, or just an IP (then also its name). */
        public static Device parse(String arg) {
            int eq = arg.indexOf('=');
            return eq < 0 ? new Device(arg, arg) : new Device(arg.substring(0, eq), arg.substring(eq + 1));
        }

        @Override
        public String toString() {
            return name + " (" + ip + ")";
        }
    }

    /** Exits with 2 and says why when the JNI provider cannot run here. */
    public static void requireJniProvider() {
        if (!JniProvider.isAvailable()) {
            System.out.println("the JNI provider is unavailable: " + JniProvider.unavailabilityCause().getMessage());
            System.exit(2);
        }
    }

    /**
     * Runs the tests of {@code selectors} (filtered by {@code filters}) once per device, with {@code addressProperty}
     * set to the device's IP, printing "== device: title" before and the device's counts after, then the counts of all
     * devices. Returns the exit code: 1 if anything failed or nothing passed, else 0.
     */
    public static int runOnDevices(String title, List<Device> devices, String addressProperty,
                                   List<? extends DiscoverySelector> selectors, List<? extends Filter<?>> filters,
                                   Function<TestIdentifier, String> names) {
        return runOnDevices(title, devices, addressProperty, selectors, filters, names, false);
    }

    /** As above; with {@code causeTraces}, a failure's causes are printed with their own stack frames too. */
    public static int runOnDevices(String title, List<Device> devices, String addressProperty,
                                   List<? extends DiscoverySelector> selectors, List<? extends Filter<?>> filters,
                                   Function<TestIdentifier, String> names, boolean causeTraces) {
        Counts total = new Counts("all devices");
        for (Device device : devices) {
            System.setProperty(addressProperty, device.ip);
            Counts counts = new Counts(device.toString());
            System.out.println("== " + counts.name + ": " + title);
            execute(selectors, filters, names, counts, causeTraces);
            System.out.println("== " + counts.name + ": " + counts);
            total.add(counts);
        }
        System.out.println("== " + total.name + ": " + total);
        System.out.println(total);
        return total.failed > 0 || total.passed == 0 ? 1 : 0;
    }

    /**
     * Runs the tests of {@code selectors} (filtered by {@code filters}), one at a time, and adds them to counts. A
     * failure is printed with its first 8 stack frames, its suppressed exceptions and its cause; with
     * {@code causeTraces} also the chain of causes with up to 12 frames each.
     */
    public static void execute(List<? extends DiscoverySelector> selectors, List<? extends Filter<?>> filters,
                               Function<TestIdentifier, String> names, Counts counts, boolean causeTraces) {
        // one test at a time, whatever junit-platform.properties the classpath brings: they share the device
        LauncherDiscoveryRequest request = LauncherDiscoveryRequestBuilder.request().selectors(selectors)
                .filters(filters.toArray(new Filter<?>[0]))
                .configurationParameter("junit.jupiter.execution.parallel.enabled", "false").build();
        Launcher launcher = LauncherFactory.create();
        launcher.execute(request, new Printer(counts, names, causeTraces));
    }

    /**
     * A test's name in the output: {@code SimpleClass.method}, with the invocation's display name in brackets for
     * parameterized and repeated tests ({@code SimpleClass.method[sharedLoop=true]}).
     */
    public static String simpleName(TestIdentifier id) {
        TestSource source = id.getSource().orElse(null);
        if (source instanceof MethodSource) {
            MethodSource m = (MethodSource) source;
            String base = simpleClassName(m.getClassName()) + "." + m.getMethodName();
            String display = id.getDisplayName();
            return display.startsWith(m.getMethodName() + "(") ? base : base + "[" + display + "]";
        }
        if (source instanceof ClassSource) {
            return simpleClassName(((ClassSource) source).getClassName());
        }
        return id.getDisplayName();
    }

    private static String simpleClassName(String className) {
        return className.substring(className.lastIndexOf('.') + 1);
    }

    /** See the class comment. */
    public static void main(String[] args) {
        String pkg = null;
        String classes = null;
        String addressProperty = null;
        String title = "tests";
        String await = null;
        List<String> only = new ArrayList<>();
        List<Device> devices = new ArrayList<>();
        for (String arg : args) {
            if (arg.startsWith("--package=")) {
                pkg = arg.substring("--package=".length());
            } else if (arg.startsWith("--classes=")) {
                classes = arg.substring("--classes=".length());
            } else if (arg.startsWith("--address-property=")) {
                addressProperty = arg.substring("--address-property=".length());
            } else if (arg.startsWith("--title=")) {
                title = arg.substring("--title=".length());
            } else if (arg.startsWith("--await=")) {
                await = arg.substring("--await=".length());
            } else if (arg.startsWith("--only=")) {
                only.addAll(Arrays.asList(arg.substring("--only=".length()).split(",")));
            } else if (arg.startsWith("--")) {
                usage("unknown option " + arg);
            } else {
                devices.add(Device.parse(arg));
            }
        }
        if (pkg == null || classes == null || addressProperty == null || devices.isEmpty()) {
            usage(null);
        }
        List<DiscoverySelector> selectors = new ArrayList<>();
        List<Filter<?>> filters = new ArrayList<>();
        if (only.isEmpty()) {
            selectors.add(selectPackage(pkg));
            filters.add(ClassNameFilter.includeClassNamePatterns(java.util.regex.Pattern.quote(pkg + ".") + classes));
        } else {
            for (String o : only) {
                selectors.add(selector(pkg, o));
            }
        }
        JUNIT_CONFIGURATION_LOGGER.setLevel(java.util.logging.Level.SEVERE);
        requireJniProvider();
        if (await != null) {
            awaitFile(Paths.get(await));
        }
        System.exit(runOnDevices(title, devices, addressProperty, selectors, filters, VmTestLauncher::simpleName,
                true));
    }

    /** {@code Class} or {@code Class#method} (all overloads of a parameterized test share the name). */
    private static DiscoverySelector selector(String pkg, String only) {
        int hash = only.indexOf('#');
        String className = pkg + "." + (hash < 0 ? only : only.substring(0, hash));
        Class<?> type;
        try {
            type = Class.forName(className, false, VmTestLauncher.class.getClassLoader());
        } catch (ClassNotFoundException e) {
            usage("--only: no class " + className);
            return null;
        }
        if (hash < 0) {
            return selectClass(type);
        }
        String method = only.substring(hash + 1);
        for (Method m : type.getDeclaredMethods()) {
            if (m.getName().equals(method)) {
                return selectMethod(type, m);
            }
        }
        usage("--only: no method " + method + " in " + className);
        return null;
    }

    /** Waits until {@code file} exists; exits with 2, saying so, after {@link #AWAIT_SECONDS}. */
    private static void awaitFile(Path file) {
        long start = System.nanoTime();
        while (!Files.exists(file)) {
            if (System.nanoTime() - start > TimeUnit.SECONDS.toNanos(AWAIT_SECONDS)) {
                System.out.println("--await: no " + file + " within " + AWAIT_SECONDS + " s (what creates it did not"
                        + " get ready): no test run");
                System.exit(2);
            }
            try {
                Thread.sleep(100);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                System.exit(2);
            }
        }
        System.out.println("--await: " + file + " exists after "
                + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start) + " ms");
    }

    private static void usage(String problem) {
        if (problem != null) {
            System.err.println("VmTestLauncher: " + problem);
        }
        System.err.println("usage: VmTestLauncher --package=PKG --classes=REGEX --address-property=NAME [--title=TEXT] "
                + "[--only=Class[#method],...] [--await=FILE] name=ip [name=ip...]");
        System.exit(2);
    }

    /** Passed, failed and skipped tests of one device, or of all. */
    public static final class Counts {
        final String name;
        int passed;
        int failed;
        int skipped;

        public Counts(String name) {
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
        private final Function<TestIdentifier, String> names;
        private final boolean causeTraces;
        private final ConcurrentHashMap<String, Long> started = new ConcurrentHashMap<>();

        Printer(Counts counts, Function<TestIdentifier, String> names, boolean causeTraces) {
            this.counts = counts;
            this.names = names;
            this.causeTraces = causeTraces;
        }

        @Override
        public void executionStarted(TestIdentifier id) {
            started.put(id.getUniqueId(), System.nanoTime());
        }

        @Override
        public void executionSkipped(TestIdentifier id, String reason) {
            if (id.isTest()) {
                counts.skipped++;
                System.out.println("SKIP " + names.apply(id) + ": " + reason);
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
                        System.out.println("PASS " + names.apply(id) + " (" + ms + " ms)");
                    }
                    break;
                case ABORTED:
                    if (id.isTest()) {
                        counts.skipped++;
                        System.out.println("SKIP " + names.apply(id) + ": " + (t == null ? "" : t.getMessage()));
                    }
                    break;
                default:
                    counts.failed++;
                    System.out.println("FAIL " + (id.isTest() ? "" : "(container) ") + names.apply(id) + " (" + ms
                            + " ms): " + t);
                    if (t != null) {
                        StackTraceElement[] trace = t.getStackTrace();
                        for (int i = 0; i < Math.min(8, trace.length); i++) {
                            System.out.println("        at " + trace[i]);
                        }
                        for (Throwable s : t.getSuppressed()) {
                            System.out.println("    suppressed: " + s);
                        }
                        if (causeTraces) {
                            for (Throwable c = t.getCause(); c != null && c != c.getCause(); c = c.getCause()) {
                                System.out.println("    cause: " + c);
                                StackTraceElement[] ct = c.getStackTrace();
                                for (int i = 0; i < Math.min(12, ct.length); i++) {
                                    System.out.println("        at " + ct[i]);
                                }
                            }
                        } else if (t.getCause() != null) {
                            System.out.println("    cause: " + t.getCause());
                        }
                    }
                    break;
            }
        }

        @Override
        public void reportingEntryPublished(TestIdentifier id, ReportEntry entry) {
            System.out.println("     " + names.apply(id) + ": " + entry.getKeyValuePairs());
        }
    }
}
