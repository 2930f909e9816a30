package org.nettyrdma.channel;

import io.netty.util.internal.logging.InternalLogger;
import io.netty.util.internal.logging.InternalLoggerFactory;
import org.nettyrdma.verbs.VerbsProvider;
import org.nettyrdma.verbs.jni.JniProvider;

import java.util.Map;

/**
 * Whether real RDMA is usable here: the native library loads, the kernel has RDMA, a device exists and is accessible,
 * and memory can be registered. Applications check it and pick epoll or NIO otherwise; the emulated provider
 * ({@link RdmaIoHandlerConfig#PROVIDER_EMULATED}) runs everywhere but only within one JVM.
 */
public final class Rdma {
    private static final InternalLogger logger = InternalLoggerFactory.getInstance(Rdma.class);
    private static final Throwable UNAVAILABILITY_CAUSE;

    static {
        Throwable cause;
        try {
            cause = JniProvider.unavailabilityCause();
        } catch (Throwable t) {
            cause = t;
        }
        UNAVAILABILITY_CAUSE = cause;
        if (cause != null) {
            logger.debug("native RDMA unavailable", cause);
        }
    }

    private Rdma() {
    }

    public static boolean isAvailable() {
        return UNAVAILABILITY_CAUSE == null;
    }

    /** Why {@link #isAvailable()} is false, with what to do about it; null when it is true. */
    public static Throwable unavailabilityCause() {
        return UNAVAILABILITY_CAUSE;
    }

    /**
     * Registered (pinned) memory of this process now, in bytes, by RDMA device name: every registered region of the
     * allocators and the connections, once for each device it is registered with. Readable from any thread.
     */
    public static Map<String, Long> registeredBytesByDevice() {
        return RegisteredRegion.registeredBytesByDevice();
    }

    public static void ensureAvailability() {
        if (UNAVAILABILITY_CAUSE != null) {
            throw (Error) new UnsatisfiedLinkError("native RDMA is unavailable: " + UNAVAILABILITY_CAUSE.getMessage())
                    .initCause(UNAVAILABILITY_CAUSE);
        }
    }

    static VerbsProvider nativeProvider() {
        ensureAvailability();
        return JniProvider.create();
    }
}
