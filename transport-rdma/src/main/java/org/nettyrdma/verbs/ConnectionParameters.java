package org.nettyrdma.verbs;

/**
 * {@code rdma_conn_param}. Immutable. Private data limits are RDMA CM's: 56 bytes on connect, 196 on accept, 148 on
 * reject; more fails with EINVAL.
 */
public final class ConnectionParameters {
    public static final int MAX_CONNECT_PRIVATE_DATA = 56;
    public static final int MAX_ACCEPT_PRIVATE_DATA = 196;
    public static final int MAX_REJECT_PRIVATE_DATA = 148;
    /** {@code rnrRetryCount} value meaning "retry for ever". */
    public static final int RNR_RETRY_INFINITE = 7;

    private final byte[] privateData;
    private final int responderResources;
    private final int initiatorDepth;
    private final int retryCount;
    private final int rnrRetryCount;

    /**
     * @param privateData        bytes the peer receives with the CM event (copied), or {@code null}
     * @param responderResources RDMA READs the peer may have outstanding against us
     * @param initiatorDepth     RDMA READs we may have outstanding
     * @param retryCount         transport retries (0-7)
     * @param rnrRetryCount      receiver-not-ready retries (0-7; 7 retries for ever); iWARP has no RNR and ignores it
     */
    public ConnectionParameters(byte[] privateData, int responderResources, int initiatorDepth, int retryCount,
                                int rnrRetryCount) {
        this.privateData = privateData == null ? new byte[0] : privateData.clone();
        this.responderResources = responderResources;
        this.initiatorDepth = initiatorDepth;
        this.retryCount = retryCount;
        this.rnrRetryCount = rnrRetryCount;
    }

    public byte[] privateData() {
        return privateData.clone();
    }

    public int privateDataLength() {
        return privateData.length;
    }

    public int responderResources() {
        return responderResources;
    }

    public int initiatorDepth() {
        return initiatorDepth;
    }

    public int retryCount() {
        return retryCount;
    }

    public int rnrRetryCount() {
        return rnrRetryCount;
    }
}
