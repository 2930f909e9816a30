package org.nettyrdma.verbs;

/** {@code ibv_qp_init_attr} for an RC queue pair. Immutable. */
public final class QpInitAttributes {
    private final CompletionQueue sendCq;
    private final CompletionQueue recvCq;
    private final int maxSendWr;
    private final int maxRecvWr;
    private final int maxSendSge;
    private final int maxRecvSge;
    private final int maxInlineData;
    private final boolean signalAll;
    private final SharedReceiveQueue srq;

    /** A QP with a receive queue of its own. */
    public QpInitAttributes(CompletionQueue sendCq, CompletionQueue recvCq, int maxSendWr, int maxRecvWr,
                            int maxSendSge, int maxRecvSge, int maxInlineData, boolean signalAll) {
        this(sendCq, recvCq, maxSendWr, maxRecvWr, maxSendSge, maxRecvSge, maxInlineData, signalAll, null);
    }

    /**
     * @param srq the shared receive queue the QP consumes receives from, or null for a receive queue of its own. With
     *            one, {@code maxRecvWr} and {@code maxRecvSge} are ignored (0 is allowed) and
     *            {@link QueuePair#postRecv} fails with EINVAL.
     */
    public QpInitAttributes(CompletionQueue sendCq, CompletionQueue recvCq, int maxSendWr, int maxRecvWr,
                            int maxSendSge, int maxRecvSge, int maxInlineData, boolean signalAll,
                            SharedReceiveQueue srq) {
        this.srq = srq;
        this.sendCq = sendCq;
        this.recvCq = recvCq;
        this.maxSendWr = maxSendWr;
        this.maxRecvWr = maxRecvWr;
        this.maxSendSge = maxSendSge;
        this.maxRecvSge = maxRecvSge;
        this.maxInlineData = maxInlineData;
        this.signalAll = signalAll;
    }

    public CompletionQueue sendCq() {
        return sendCq;
    }

    public CompletionQueue recvCq() {
        return recvCq;
    }

    public int maxSendWr() {
        return maxSendWr;
    }

    public int maxRecvWr() {
        return maxRecvWr;
    }

    public int maxSendSge() {
        return maxSendSge;
    }

    public int maxRecvSge() {
        return maxRecvSge;
    }

    public int maxInlineData() {
        return maxInlineData;
    }

    /** {@code sq_sig_all}: every send completes as if SIGNALED. */
    public boolean signalAll() {
        return signalAll;
    }

    /** The shared receive queue of the QP, or null where it has a receive queue of its own. */
    public SharedReceiveQueue srq() {
        return srq;
    }

    @Override
    public String toString() {
        return "QpInitAttributes{maxSendWr=" + maxSendWr + ", maxRecvWr=" + maxRecvWr + ", maxSendSge=" + maxSendSge
                + ", maxRecvSge=" + maxRecvSge + ", maxInlineData=" + maxInlineData + ", signalAll=" + signalAll + (srq != null ? ", srq" : "") + '}';
    }

    /**
     * What every provider checks in {@code rdma_create_qp}: each capacity within the device's limits (the receive
     * queue's only without a shared receive queue, which must then be of the QP's protection domain {@code pd}).
     */
    public void checkWithin(DeviceAttributes limits, ProtectionDomain pd) throws VerbsException {
        if (srq != null && srq.pd() != pd) {
            throw new VerbsException("rdma_create_qp", Errno.EINVAL,
                    "the shared receive queue is of another protection domain than the QP");
        }
        boolean ownReceives = srq == null;
        if (maxSendWr() < 1 || maxSendWr() > limits.maxQpWr()
                || ownReceives && (maxRecvWr() < 1 || maxRecvWr() > limits.maxQpWr()
                        || maxRecvSge() < 0 || maxRecvSge() > limits.maxSge())
                || maxSendSge() < 0 || maxSendSge() > limits.maxSge()
                || maxInlineData() < 0 || maxInlineData() > limits.maxInlineData()) {
            throw new VerbsException("rdma_create_qp", Errno.EINVAL, this + " exceeds " + limits);
        }
    }
}
