package org.nettyrdma.verbs.jni;

/**
 * What only the native library can tell about this machine: whether it loaded, how many devices rdma-core lists, and
 * the memlock limit (getrlimit). {@link #system()} asks the library; tests make them up.
 */
public interface NativeFacts {
    /** Why the native library did not load, or {@code null}. */
    Throwable loadFailure();

    /** {@code ibv_get_device_list}'s count, or -errno; called only when the library loaded. */
    int deviceCount();

    /** The soft RLIMIT_MEMLOCK in bytes, negative for unlimited; called only when the library loaded. */
    long memlockLimit();

    /** The facts of this process, from the native library. */
    static NativeFacts system() {
        return SystemNativeFacts.INSTANCE;
    }
}
