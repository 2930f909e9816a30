package org.nettyrdma.verbs;

/** Send work request opcodes; the values are those of {@code enum ibv_wr_opcode}. */
public final class WrOpcode {
    public static final int RDMA_WRITE = 0;
    public static final int RDMA_WRITE_WITH_IMM = 1;
    public static final int SEND = 2;
    public static final int SEND_WITH_IMM = 3;
    public static final int RDMA_READ = 4;

    private WrOpcode() {
    }
}
