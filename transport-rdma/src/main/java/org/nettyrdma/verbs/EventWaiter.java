package org.nettyrdma.verbs;

/**
 * What an event loop blocks on: completion channels and CM event channels (on hardware, epoll over their fds plus an
 * eventfd for {@link #wakeup()}). Owned and awaited by one thread; {@code wakeup()} may come from any.
 */
public interface EventWaiter extends AutoCloseable {

    void add(CompletionChannel channel) throws VerbsException;

    void add(CmEventChannel channel) throws VerbsException;

    void remove(CompletionChannel channel) throws VerbsException;

    void remove(CmEventChannel channel) throws VerbsException;

    /**
     * Blocks until a registered channel may have an event, {@link #wakeup()} is called, or {@code timeoutNanos}
     * passes (0: don't block; {@link Long#MAX_VALUE}: no timeout). Readiness is a hint: poll the channels after.
     *
     * @return true if woken by a channel or {@code wakeup()}, false on timeout
     */
    boolean await(long timeoutNanos) throws VerbsException;

    /** Makes the current or next {@link #await} return at once. Any thread. */
    void wakeup();

    @Override
    void close() throws VerbsException;
}
