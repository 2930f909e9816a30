package org.nettyrdma.verbs;

import java.io.IOException;

/**
 * A verb failed. Names the verb (as rdma-core spells it, e.g. {@code rdma_resolve_addr}) and the errno, so that the
 * message alone tells what went wrong and where.
 */
public class VerbsException extends IOException {
    private static final long serialVersionUID = 1L;

    private final String verb;
    private final int errno;

    public VerbsException(String verb, int errno) {
        this(verb, errno, null);
    }

    public VerbsException(String verb, int errno, String detail) {
        super(verb + " failed: " + Errno.describe(errno) + (detail == null ? "" : " (" + detail + ")"));
        this.verb = verb;
        this.errno = Math.abs(errno);
    }

    /** The verb that failed, e.g. {@code ibv_reg_mr}. */
    public String verb() {
        return verb;
    }

    /** The positive errno value. */
    public int errno() {
        return errno;
    }

    /** Throws a {@link VerbsException} if {@code rc} is negative (a {@code -errno}); returns {@code rc} otherwise. */
    public static int check(String verb, int rc) throws VerbsException {
        if (rc < 0) {
            throw new VerbsException(verb, -rc);
        }
        return rc;
    }
}
