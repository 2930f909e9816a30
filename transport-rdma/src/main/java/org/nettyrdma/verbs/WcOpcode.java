package org.nettyrdma.verbs;

/** Work completion opcodes; the values are those of {@code enum ibv_wc_opcode}. */
public final class WcOpcode {
    public static final int SEND = 0;
    public static final int RDMA_WRITE = 1;
    public static final int RDMA_READ = 2;
    public static final int BIND_MW = 5;
    public static final int LOCAL_INV = 6;
    public static final int RECV = 128;
    public static final int RECV_RDMA_WITH_IMM = 129;

    /** {@link CompletionArray#wcFlags(int)} bit: the completion carries immediate data ({@code IBV_WC_WITH_IMM}). */
    public static final int FLAG_WITH_IMM = 1 << 1;
    /**
     * {@link CompletionArray#wcFlags(int)} bit: a receive of a SEND_WITH_INV, which invalidated the rkey that
     * {@link CompletionArray#immData(int)} then holds ({@code IBV_WC_WITH_INV}, {@code invalidated_rkey}).
     */
    public static final int FLAG_WITH_INV = 1 << 3;

    private WcOpcode() {
    }
}
