package org.nettyrdma.verbs;

/**
 * {@code ibv_srq}: receives that any queue pair created with it ({@link QpInitAttributes#srq()}) consumes, from
 * {@link ProtectionDomain#createSharedReceiveQueue}.
 *
 * <p>Semantics every provider keeps (docs/verbs-spi.md): a message that consumes a receive (SEND, RDMA WRITE WITH
 * IMMEDIATE) at a QP with a shared receive queue takes the queue's oldest receive, whichever QP it arrives at (FIFO
 * across QPs); its completion goes to the consuming QP's receive CQ with that QP's {@code qp_num} and the receive's
 * {@code wr_id}. The SGEs are checked in this queue's protection domain. With the queue empty, the message finds no
 * receive, as at a QP without one: RNR retries on IB and RoCE, the connection terminated on iWARP. A QP that enters
 * ERROR does not flush the shared receive queue: its receives stay for the other QPs.
 */
public interface SharedReceiveQueue extends AutoCloseable {

    ProtectionDomain pd();

    /**
     * The receives the queue holds at least ({@code max_wr} as the device granted it): post no more. A device may take
     * more before it refuses (rxe took 7 into a queue of capacity 4).
     */
    int capacity();

    /** The most SGEs of one receive ({@code max_sge} as created). */
    int maxSge();

    /**
     * {@code ibv_post_srq_recv} of receive work requests {@code offset .. offset + count - 1} of {@code wrs}, as one
     * chain.
     *
     * @return 0, or {@code -errno} with {@link WorkRequestList#badIndex()} naming the first work request not posted:
     *         EINVAL for too many SGEs, ENOMEM when the queue is full (at {@link #capacity()} receives or later),
     *         EBADF after close
     */
    int postRecv(WorkRequestList wrs, int offset, int count);

    /**
     * {@code ibv_modify_srq(IBV_SRQ_LIMIT)}: arms the limit event, which fires once ({@link #limitEvents()} counts it)
     * when a consumed receive leaves fewer than {@code limit} posted; 0 disarms.
     *
     * @throws VerbsException EINVAL for a limit outside {@code 0 .. capacity()}, EBADF after close
     */
    void setLimit(int limit) throws VerbsException;

    /** What every provider checks in {@link #setLimit}: EINVAL for a limit outside {@code 0 .. capacity}. */
    static void checkLimit(int limit, int capacity) throws VerbsException {
        if (limit < 0 || limit > capacity) {
            throw new VerbsException("ibv_modify_srq", Errno.EINVAL,
                    "srq_limit " + limit + " outside 0.." + capacity + " (max_wr)");
        }
    }

    /** How many times the limit event fired ({@code IBV_EVENT_SRQ_LIMIT_REACHED}); the provider may report it late. */
    long limitEvents();

    /**
     * Whether the device reported the queue in error ({@code IBV_EVENT_SRQ_ERR}; the provider may report it late): the
     * receives it holds are lost to its QPs, which may neither receive nor fail from then on. Stays true once closed.
     */
    boolean failed();

    /**
     * {@code ibv_destroy_srq}: EBUSY while a queue pair created with it exists; the receives still posted are dropped
     * without completions. Idempotent once it succeeded.
     */
    @Override
    void close() throws VerbsException;
}
