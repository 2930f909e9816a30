package org.nettyrdma.verbs.jni;

import org.junit.platform.engine.DiscoverySelector;
import org.junit.platform.launcher.TestIdentifier;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import static org.junit.platform.engine.discovery.DiscoverySelectors.selectClass;
import static org.junit.platform.engine.discovery.DiscoverySelectors.selectMethod;

/**
 * Runs the verbs conformance suite ({@link JniVerbsConformance}) and the JNI provider's own device tests
 * ({@link JniDeviceChecks}) on real RDMA devices, without Maven or Surefire: the lean runner of the VM
 * (transport-rdma/src/test/vm/conformance.sh), on {@link VmTestLauncher}.
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
        List<VmTestLauncher.Device> devices = new ArrayList<>();
        for (String arg : args) {
            if (arg.startsWith("--only=")) {
                only.addAll(Arrays.asList(arg.substring("--only=".length()).split(",")));
            } else {
                devices.add(VmTestLauncher.Device.parse(arg));
            }
        }
        if (devices.isEmpty()) {
            System.err.println("usage: VmConformanceMain [--only=method,...] name=ip [name=ip...]");
            System.exit(2);
        }
        VmTestLauncher.requireJniProvider();
        System.exit(VmTestLauncher.runOnDevices("verbs conformance suite on the JNI provider", devices,
                JniVerbsConformance.ADDRESS_PROPERTY, selectors(only), List.of(), VmConformanceMain::name));
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

    private static String name(TestIdentifier id) {
        String source = id.getSource().map(Object::toString).orElse("");
        String simple = source.contains("JniDeviceChecks") ? "JniDeviceChecks." : "";
        return simple + id.getDisplayName().replace("()", "");
    }
}
