package org.nettyrdma.verbs;

/** {@code ibv_cq}. Completions of every QP attached to it, in the order they completed. */
public interface CompletionQueue extends AutoCloseable {

    Device device();

    /** How many completions it holds; one more before a poll is an overrun. */
    int capacity();

    /**
     * {@code ibv_poll_cq} into {@code into}, at most {@code max} completions (and at most its capacity).
     *
     * @return how many were written, or {@code -errno}: {@code -EOVERFLOW} once the queue has overrun (completions
     *         were lost and the QPs that lost them are in error)
     */
    int poll(CompletionArray into, int max);

    /**
     * {@code ibv_req_notify_cq}: report the next completion that arrives after this call to the completion channel.
     * Completions already queued do not report: poll once more after arming.
     *
     * @return 0 or {@code -errno}
     */
    int requestNotify(boolean solicitedOnly);

    /** {@code ibv_ack_cq_events}. */
    void ackEvents(int count);

    /** {@code ibv_destroy_cq}; EBUSY while QPs use it or events are unacknowledged. Idempotent. */
    @Override
    void close() throws VerbsException;
}
