package org.nettyrdma.verbs;

/** Work completion opcodes; the values are those of {@code enum ibv_wc_opcode}. */
public final class WcOpcode {
    public static final int SEND = 0;
    public static final int RDMA_WRITE = 1;
    public static final int RDMA_READ = 2;
    public static final int RECV = 128;
    public static final int RECV_RDMA_WITH_IMM = 129;

    /** {@link CompletionArray#flags(int)} bit: the completion carries immediate data ({@code IBV_WC_WITH_IMM}). */
    public static final int FLAG_WITH_IMM = 1 << 1;

    private WcOpcode() {
    }
}
