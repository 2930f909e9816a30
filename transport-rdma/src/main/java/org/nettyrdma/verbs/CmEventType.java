package org.nettyrdma.verbs;

/** {@code enum rdma_cm_event_type}, the events the SPI reports. */
public enum CmEventType {
    ADDR_RESOLVED,
    ADDR_ERROR,
    ROUTE_RESOLVED,
    ROUTE_ERROR,
    /** On the listening id's channel; {@link CmEvent#id()} is the new id of the incoming connection. */
    CONNECT_REQUEST,
    CONNECT_RESPONSE,
    CONNECT_ERROR,
    /** No answer from the remote side ({@link CmEvent#status()} -ETIMEDOUT). */
    UNREACHABLE,
    /**
     * The remote side refused: its application rejected (IB/RoCE status 28, consumer defined; iWARP -ECONNREFUSED,
     * with the rejecter's private data either way), or nobody listens there (IB/RoCE status 8, invalid service id;
     * iWARP -ECONNREFUSED, no private data).
     */
    REJECTED,
    ESTABLISHED,
    DISCONNECTED,
    DEVICE_REMOVAL,
    TIMEWAIT_EXIT
}
