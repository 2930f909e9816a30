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

    public DeviceAttributes(Transport transport, int maxQp, int maxQpWr, int maxSge, int maxInlineData, int maxCqe,
                            int maxMr, long maxMrSize, int maxQpRdAtom) {
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

    @Override
    public String toString() {
        return "DeviceAttributes{transport=" + transport + ", maxQp=" + maxQp + ", maxQpWr=" + maxQpWr
                + ", maxSge=" + maxSge + ", maxInlineData=" + maxInlineData + ", maxCqe=" + maxCqe
                + ", maxMr=" + maxMr + ", maxMrSize=" + maxMrSize + ", maxQpRdAtom=" + maxQpRdAtom + '}';
    }
}
