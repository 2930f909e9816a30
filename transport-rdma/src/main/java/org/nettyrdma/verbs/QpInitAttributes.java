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

    public QpInitAttributes(CompletionQueue sendCq, CompletionQueue recvCq, int maxSendWr, int maxRecvWr,
                            int maxSendSge, int maxRecvSge, int maxInlineData, boolean signalAll) {
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

    @Override
    public String toString() {
        return "QpInitAttributes{maxSendWr=" + maxSendWr + ", maxRecvWr=" + maxRecvWr + ", maxSendSge=" + maxSendSge
                + ", maxRecvSge=" + maxRecvSge + ", maxInlineData=" + maxInlineData + ", signalAll=" + signalAll + '}';
    }

    /** What every provider checks in {@code rdma_create_qp}: each capacity within the device's limits. */
    public void checkWithin(DeviceAttributes limits) throws VerbsException {
        if (maxSendWr() < 1 || maxSendWr() > limits.maxQpWr()
                || maxRecvWr() < 1 || maxRecvWr() > limits.maxQpWr()
                || maxSendSge() < 0 || maxSendSge() > limits.maxSge()
                || maxRecvSge() < 0 || maxRecvSge() > limits.maxSge()
                || maxInlineData() < 0 || maxInlineData() > limits.maxInlineData()) {
            throw new VerbsException("rdma_create_qp", Errno.EINVAL, this + " exceeds " + limits);
        }
    }
}
