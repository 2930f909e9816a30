package org.nettyrdma.verbs;

/** {@code rdma_event_channel}, non-blocking. Wait for it with an {@link EventWaiter}. */
public interface CmEventChannel extends AutoCloseable {

    /** {@code rdma_get_cm_event} + copy + {@code rdma_ack_cm_event}: fills {@code into} and returns true, or false. */
    boolean poll(CmEvent into) throws VerbsException;

    /** {@code rdma_destroy_event_channel}; EBUSY while ids report to it. Idempotent. */
    @Override
    void close() throws VerbsException;
}
