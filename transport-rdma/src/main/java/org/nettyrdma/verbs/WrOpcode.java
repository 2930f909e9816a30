package org.nettyrdma.verbs;

/** Send work request opcodes; the values are those of {@code enum ibv_wr_opcode}. */
public final class WrOpcode {
    public static final int RDMA_WRITE = 0;
    public static final int RDMA_WRITE_WITH_IMM = 1;
    public static final int SEND = 2;
    public static final int SEND_WITH_IMM = 3;
    public static final int RDMA_READ = 4;
    /**
     * Invalidates the memory window whose rkey is in the work request's {@code imm_data} field
     * ({@code invalidate_rkey}); from then on that rkey is refused. Where {@link DeviceAttributes#supportsMemoryWindows()}.
     */
    public static final int LOCAL_INV = 7;
    /**
     * Binds a type-2 memory window to a range of a memory region, through this QP, which alone can then use the
     * window's new rkey (see {@link WorkRequestList#bindWindow}). Where {@link DeviceAttributes#supportsMemoryWindows()}.
     */
    public static final int BIND_MW = 8;
    /**
     * A SEND that also invalidates, on the responder, the memory window whose rkey is in {@code imm_data}
     * ({@code invalidate_rkey}); the receive completes with {@link WcOpcode#FLAG_WITH_INV} and that rkey. Where
     * {@link DeviceAttributes#supportsSendWithInvalidate()}.
     */
    public static final int SEND_WITH_INV = 9;

    private WrOpcode() {
    }
}
