package org.nettyrdma.verbs;

/** What {@code ibv_query_device} reports that the transport relies on, plus the device's transport family. */
public final class DeviceAttributes {

    /** The device's link/transport family. */
    public enum Transport {
        INFINIBAND,
        /** RoCE v1/v2, SoftRoCE (rxe). */
        ROCE,
        /** iWARP, soft-iWARP (siw): no immediate data; connection set-up over TCP (MPA). */
        IWARP
    }

    private final Transport transport;
    private final int maxQp;
    private final int maxQpWr;
    private final int maxSge;
    private final int maxInlineData;
    private final int maxCqe;
    private final int maxMr;
    private final long maxMrSize;
    private final int maxQpRdAtom;
    private final int maxMw;
    private final long capabilityFlags;
    private final int maxSrq;
    private final int maxSrqWr;
    private final int maxSrqSge;

    /** {@code IBV_DEVICE_MEM_WINDOW}: the device has memory windows. */
    public static final long CAP_MEM_WINDOW = 1L << 17;
    /** {@code IBV_DEVICE_MEM_MGT_EXTENSIONS}: fast registration, local and remote invalidation (SEND_WITH_INV). */
    public static final long CAP_MEM_MGT_EXTENSIONS = 1L << 21;
    /** {@code IBV_DEVICE_MEM_WINDOW_TYPE_2A}: type-2 windows, associated with a QP number. */
    public static final long CAP_MEM_WINDOW_TYPE_2A = 1L << 23;
    /** {@code IBV_DEVICE_MEM_WINDOW_TYPE_2B}: type-2 windows, associated with a QP number and a PD. */
    public static final long CAP_MEM_WINDOW_TYPE_2B = 1L << 24;

    /** A device without memory windows or memory management extensions. */
    public DeviceAttributes(Transport transport, int maxQp, int maxQpWr, int maxSge, int maxInlineData, int maxCqe,
                            int maxMr, long maxMrSize, int maxQpRdAtom) {
        this(transport, maxQp, maxQpWr, maxSge, maxInlineData, maxCqe, maxMr, maxMrSize, maxQpRdAtom, 0, 0);
    }

    /** A device without shared receive queues. */
    public DeviceAttributes(Transport transport, int maxQp, int maxQpWr, int maxSge, int maxInlineData, int maxCqe,
                            int maxMr, long maxMrSize, int maxQpRdAtom, int maxMw, long capabilityFlags) {
        this(transport, maxQp, maxQpWr, maxSge, maxInlineData, maxCqe, maxMr, maxMrSize, maxQpRdAtom, maxMw,
                capabilityFlags, 0, 0, 0);
    }

    /**
     * @param maxMw           {@code max_mw}: how many memory windows the device can have
     * @param capabilityFlags {@code device_cap_flags}: of these the SPI reads the {@code CAP_*} bits
     * @param maxSrq          {@code max_srq}: how many shared receive queues the device can have (0: none)
     * @param maxSrqWr        {@code max_srq_wr}: the most receives one shared receive queue can hold
     * @param maxSrqSge       {@code max_srq_sge}: the most SGEs of one receive in a shared receive queue
     */
    public DeviceAttributes(Transport transport, int maxQp, int maxQpWr, int maxSge, int maxInlineData, int maxCqe,
                            int maxMr, long maxMrSize, int maxQpRdAtom, int maxMw, long capabilityFlags, int maxSrq,
                            int maxSrqWr, int maxSrqSge) {
        this.maxSrq = maxSrq;
        this.maxSrqWr = maxSrqWr;
        this.maxSrqSge = maxSrqSge;
        this.maxMw = maxMw;
        this.capabilityFlags = capabilityFlags;
        this.transport = transport;
        this.maxQp = maxQp;
        this.maxQpWr = maxQpWr;
        this.maxSge = maxSge;
        this.maxInlineData = maxInlineData;
        this.maxCqe = maxCqe;
        this.maxMr = maxMr;
        this.maxMrSize = maxMrSize;
        this.maxQpRdAtom = maxQpRdAtom;
    }

    public Transport transport() {
        return transport;
    }

    /** Whether SEND_WITH_IMM and RDMA_WRITE_WITH_IMM exist on this device (not on iWARP). */
    public boolean supportsImmediateData() {
        return transport != Transport.IWARP;
    }

    public int maxQp() {
        return maxQp;
    }

    /** The most outstanding work requests of one queue (send or receive) of a QP. */
    public int maxQpWr() {
        return maxQpWr;
    }

    public int maxSge() {
        return maxSge;
    }

    /** The largest inline send a QP may be created for; 0 where the device has no inline sends. */
    public int maxInlineData() {
        return maxInlineData;
    }

    public int maxCqe() {
        return maxCqe;
    }

    public int maxMr() {
        return maxMr;
    }

    public long maxMrSize() {
        return maxMrSize;
    }

    /** The most outstanding RDMA READs a QP can have as initiator or responder. */
    public int maxQpRdAtom() {
        return maxQpRdAtom;
    }

    /** {@code max_mw}; 0 where the device has no memory windows (siw). */
    public int maxMw() {
        return maxMw;
    }

    /** {@code device_cap_flags} as the device reported them (the {@code CAP_*} bits are the ones the SPI uses). */
    public long capabilityFlags() {
        return capabilityFlags;
    }

    /**
     * Whether type-2 memory windows exist here: {@link ProtectionDomain#allocMemoryWindow()}, {@link WrOpcode#BIND_MW}
     * and {@link WrOpcode#LOCAL_INV}. A window bound through a QP admits its rkey on that QP only. rxe: yes (type 2B);
     * siw: no ({@code max_mw} 0, and libsiw refuses both opcodes).
     */
    public boolean supportsMemoryWindows() {
        return maxMw > 0 && (capabilityFlags & CAP_MEM_WINDOW) != 0
                && (capabilityFlags & (CAP_MEM_WINDOW_TYPE_2A | CAP_MEM_WINDOW_TYPE_2B)) != 0;
    }

    /** {@code max_srq}; 0 where the device has no shared receive queues. */
    public int maxSrq() {
        return maxSrq;
    }

    /** {@code max_srq_wr}: the most receives one shared receive queue can hold. */
    public int maxSrqWr() {
        return maxSrqWr;
    }

    /** {@code max_srq_sge}: the most SGEs of one receive posted to a shared receive queue. */
    public int maxSrqSge() {
        return maxSrqSge;
    }

    /**
     * Whether {@link ProtectionDomain#createSharedReceiveQueue} exists here: {@code max_srq > 0} and room for at least
     * one receive of one SGE. rxe and siw both have them.
     */
    public boolean supportsSharedReceiveQueues() {
        return maxSrq > 0 && maxSrqWr > 0 && maxSrqSge > 0;
    }

    /**
     * What every provider checks in {@code ibv_create_srq} of device {@code device}: EOPNOTSUPP without shared receive
     * queues, EINVAL for {@code maxWr} outside {@code 1 .. max_srq_wr} or {@code maxSge} outside
     * {@code 0 .. max_srq_sge}.
     */
    public void checkSharedReceiveQueue(String device, int maxWr, int maxSge) throws VerbsException {
        if (!supportsSharedReceiveQueues()) {
            throw new VerbsException("ibv_create_srq", Errno.EOPNOTSUPP,
                    device + " has no shared receive queues (max_srq " + maxSrq + ")");
        }
        if (maxWr < 1 || maxWr > maxSrqWr || maxSge < 0 || maxSge > maxSrqSge) {
            throw new VerbsException("ibv_create_srq", Errno.EINVAL, "max_wr " + maxWr + ", max_sge " + maxSge
                    + " outside 1.." + maxSrqWr + ", 0.." + maxSrqSge + " of " + device);
        }
    }

    /** Whether {@link WrOpcode#SEND_WITH_INV} exists here (memory management extensions): rxe and siw both. */
    public boolean supportsSendWithInvalidate() {
        return (capabilityFlags & CAP_MEM_MGT_EXTENSIONS) != 0;
    }

    @Override
    public String toString() {
        return "DeviceAttributes{transport=" + transport + ", maxQp=" + maxQp + ", maxQpWr=" + maxQpWr
                + ", maxSge=" + maxSge + ", maxInlineData=" + maxInlineData + ", maxCqe=" + maxCqe
                + ", maxMr=" + maxMr + ", maxMrSize=" + maxMrSize + ", maxQpRdAtom=" + maxQpRdAtom + ", maxMw=" + maxMw + ", capabilityFlags=0x"
                + Long.toHexString(capabilityFlags) + ", maxSrq=" + maxSrq + ", maxSrqWr=" + maxSrqWr
                + ", maxSrqSge=" + maxSrqSge + '}';
    }
}
