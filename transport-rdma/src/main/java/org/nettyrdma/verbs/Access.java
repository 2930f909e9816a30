package org.nettyrdma.verbs;

import java.nio.ByteBuffer;

/** Memory region access flags; the values are those of {@code enum ibv_access_flags}. */
public final class Access {
    public static final int LOCAL_WRITE = 1;
    /** Requires {@link #LOCAL_WRITE}, as on every verbs provider. */
    public static final int REMOTE_WRITE = 1 << 1;
    public static final int REMOTE_READ = 1 << 2;
    /**
     * The region may have memory windows bound to it ({@code IBV_ACCESS_MW_BIND}). It grants no remote access by
     * itself: the region's own rkey stays 0 unless REMOTE_WRITE or REMOTE_READ is given too.
     */
    public static final int MW_BIND = 1 << 4;
    private static final int KNOWN = LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ | MW_BIND;

    /** What every provider checks first in {@code ibv_reg_mr}: a buffer, known flags, remote write with local write. */
    public static void checkRegistration(ByteBuffer buffer, int access) throws VerbsException {
        if (buffer == null || (access & ~KNOWN) != 0
                || ((access & REMOTE_WRITE) != 0 && (access & LOCAL_WRITE) == 0)) {
            throw new VerbsException("ibv_reg_mr", Errno.EINVAL,
                    buffer == null ? "no buffer" : "access flags " + access + " (remote write needs local write)");
        }
    }

    private Access() {
    }
}
