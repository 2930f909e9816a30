package org.nettyrdma.verbs.jni;

import java.net.URL;

/**
 * Run in a fresh JVM with no flags by {@link NativeLibraryTest}: loads the native library the way the transport does
 * and prints where it came from, then whether the provider is available and why not.
 */
public final class NativeLoadCheck {
    private NativeLoadCheck() {
    }

    public static void main(String[] args) {
        URL resource = Native.class.getClassLoader().getResource("META-INF/native/lib" + Native.LIBRARY_NAME + ".so");
        System.out.println("resource: " + resource);
        Throwable failure = Native.loadFailure();
        System.out.println(failure == null ? "loaded" : "not loaded: " + failure);
        System.out.println("available: " + JniProvider.isAvailable());
        Throwable cause = JniProvider.unavailabilityCause();
        System.out.println("cause: " + (cause == null ? "none" : cause.getMessage()));
        System.exit(failure == null ? 0 : 1);
    }
}
