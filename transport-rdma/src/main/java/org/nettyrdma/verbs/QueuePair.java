package org.nettyrdma.verbs;

/**
 * A reliable-connected queue pair, created with {@link CmId#createQp} and connected by RDMA CM.
 *
 * <p>Semantics every provider keeps (docs/verbs-spi.md): work requests of one queue execute and complete in order;
 * a SEND consumes the peer's oldest posted receive, and with none posted the sender retries per the connection's
 * {@code rnrRetryCount} and then fails with RNR_RETRY_EXC_ERR (iWARP has no RNR: there the connection fails at once
 * and both QPs go to {@link QpState#ERROR}); a failed work request moves the QP to
 * {@link QpState#ERROR} and every outstanding work request then completes with WR_FLUSH_ERR, in order; an
 * unsignalled send produces a completion only if it fails; a send queue slot of an unsignalled send is freed only
 * when a later signalled send completes.
 */
public interface QueuePair extends AutoCloseable {

    enum QpState { RESET, INIT, RTR, RTS, ERROR }

    int qpNum();

    QpState state();

    ProtectionDomain pd();

    CompletionQueue sendCq();

    CompletionQueue recvCq();

    /** The capacities the QP was created with (which the device may have rounded up). */
    QpInitAttributes capabilities();

    /**
     * {@code ibv_post_send} of work requests {@code offset .. offset + count - 1} of {@code wrs}, as one chain.
     *
     * @return 0, or {@code -errno} with {@link WorkRequestList#badIndex()} naming the first work request not posted:
     *         EINVAL for a malformed request (too many SGEs, an inline send over the QP's limit, an opcode the device
     *         lacks, a QP not yet connected), ENOMEM when the send queue is full, EBADF after close
     */
    int postSend(WorkRequestList wrs, int offset, int count);

    /** {@code ibv_post_recv}; as {@link #postSend}. Allowed from INIT on. */
    int postRecv(WorkRequestList wrs, int offset, int count);

    /**
     * {@code ibv_modify_qp} to ERROR: every outstanding work request completes with WR_FLUSH_ERR. The peer is not
     * told; its next send fails with RETRY_EXC_ERR.
     */
    void moveToError() throws VerbsException;

    /** Destroys the QP ({@code rdma_destroy_qp}); outstanding work requests are dropped without completions. */
    @Override
    void close() throws VerbsException;
}
