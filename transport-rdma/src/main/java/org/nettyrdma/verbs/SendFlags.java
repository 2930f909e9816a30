package org.nettyrdma.verbs;

/** Send work request flags; the values are those of {@code enum ibv_send_flags}. */
public final class SendFlags {
    public static final int FENCE = 1;
    /** Generate a completion on success (without it only a failure produces one, unless the QP signals all). */
    public static final int SIGNALED = 1 << 1;
    public static final int SOLICITED = 1 << 2;
    /** Copy the gathered bytes at post time; the source memory may be reused as soon as the post returns. */
    public static final int INLINE = 1 << 3;

    private SendFlags() {
    }
}
