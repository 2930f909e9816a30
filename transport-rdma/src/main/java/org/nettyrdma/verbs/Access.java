package org.nettyrdma.verbs;

/** Memory region access flags; the values are those of {@code enum ibv_access_flags}. */
public final class Access {
    public static final int LOCAL_WRITE = 1;
    /** Requires {@link #LOCAL_WRITE}, as on every verbs provider. */
    public static final int REMOTE_WRITE = 1 << 1;
    public static final int REMOTE_READ = 1 << 2;

    private Access() {
    }
}
