package org.nettyrdma.verbs;

/**
 * {@code ibv_comp_channel}: a completion queue armed with {@link CompletionQueue#requestNotify(boolean)} reports here
 * once when its next completion arrives. Non-blocking; wait for it with an {@link EventWaiter}.
 */
public interface CompletionChannel extends AutoCloseable {

    /**
     * {@code ibv_get_cq_event}, non-blocking: the next completion queue that reported, or {@code null}. Every event
     * must be acknowledged with {@link CompletionQueue#ackEvents(int)} before the queue is closed.
     */
    CompletionQueue getEvent();

    @Override
    void close() throws VerbsException;
}
