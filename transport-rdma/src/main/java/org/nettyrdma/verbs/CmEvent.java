package org.nettyrdma.verbs;

/**
 * One RDMA CM event, filled by {@link CmEventChannel#poll(CmEvent)}; reused from poll to poll. The provider has
 * already acknowledged the event ({@code rdma_ack_cm_event}) and copied its private data here.
 */
public final class CmEvent {
    /** Room for the largest private data RDMA CM carries (iWARP MPA allows 512 bytes). */
    public static final int MAX_PRIVATE_DATA = 512;

    private CmEventType type;
    private CmId id;
    private CmId listenId;
    private int status;
    private final byte[] privateData = new byte[MAX_PRIVATE_DATA];
    private int privateDataLength;

    public CmEventType type() {
        return type;
    }

    /** The id the event is about; for CONNECT_REQUEST the new id of the incoming connection. */
    public CmId id() {
        return id;
    }

    /** For CONNECT_REQUEST, the listening id; otherwise {@code null}. */
    public CmId listenId() {
        return listenId;
    }

    /** 0, a negative errno, or a positive transport reason (IB CM reject reason). */
    public int status() {
        return status;
    }

    /**
     * The private data's length as the fabric delivered it: on InfiniBand and RoCE the sender's bytes are zero-padded
     * to the message's fixed size (56 for a connect request), so protocols carry their own length.
     */
    public int privateDataLength() {
        return privateDataLength;
    }

    /** The event's private data, valid up to {@link #privateDataLength()}; the array is reused. */
    public byte[] privateData() {
        return privateData;
    }

    /** For providers. */
    public void set(CmEventType type, CmId id, CmId listenId, int status, byte[] data, int dataLength) {
        this.type = type;
        this.id = id;
        this.listenId = listenId;
        this.status = status;
        int n = data == null ? 0 : Math.min(dataLength, MAX_PRIVATE_DATA);
        if (n > 0) {
            System.arraycopy(data, 0, privateData, 0, n);
        }
        this.privateDataLength = n;
    }

    @Override
    public String toString() {
        return "CmEvent{" + type + ", status=" + status + ", privateDataLength=" + privateDataLength + '}';
    }
}
