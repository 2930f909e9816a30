package org.nettyrdma.verbs;

import java.util.List;

/**
 * The verbs SPI: what the transport needs of rdma-core (libibverbs + librdmacm), modelled faithfully so that
 * behaviour on one provider means something on another. Internal: applications use the Netty transport above it.
 *
 * <p>Threading: the objects created here are used by one thread at a time (the event loop that owns them), except
 * {@link EventWaiter#wakeup()}, which any thread may call. Setup calls throw {@link VerbsException}; the data path
 * ({@link QueuePair#postSend}, {@link QueuePair#postRecv}, {@link CompletionQueue#poll}) returns {@code -errno}.
 */
public interface VerbsProvider extends AutoCloseable {

    /** "emulated", "jni", ... */
    String name();

    /** The RDMA devices, in the order {@code ibv_get_device_list} would list them. */
    List<Device> devices() throws VerbsException;

    /** A non-blocking RDMA CM event channel ({@code rdma_create_event_channel}). */
    CmEventChannel createEventChannel() throws VerbsException;

    /** An RDMA CM id of port space TCP (reliable connected), reporting its events to {@code channel}. */
    CmId createId(CmEventChannel channel, Object context) throws VerbsException;

    /** A waiter over completion channels and CM event channels, for an event loop's blocking wait. */
    EventWaiter createWaiter() throws VerbsException;

    /** Fault injection for tests, or {@code null} where the provider has none (hardware). */
    default FaultInjector faults() {
        return null;
    }

    /** Releases what the provider holds itself; objects it created must be closed by their owners first. */
    @Override
    default void close() {
    }
}
