package org.nettyrdma.channel;

import org.nettyrdma.verbs.VerbsException;

/**
 * Where a connection's receive buffers come from and go back to, slot by slot: receives of its own queue pair
 * ({@link QueuePairReceives}), or its loop's shared receive queue ({@link PooledReceives}, docs/srq-design.md). A slot
 * holds the buffer of a receive that completed until its message is consumed; {@link ReceiveQueue} keeps the messages'
 * order and decides between lending and copying. Event loop only.
 */
interface ReceiveSlots {
    /** The buffer of {@code slot}: posted (own receives), or holding a received message. */
    RdmaByteBuf buffer(int slot);

    /** The message in {@code slot} is consumed (copied out or dropped): its buffer receives again. */
    void consumed(int slot) throws VerbsException;

    /**
     * The buffer of {@code slot} leaves for the pipeline (lent): the slot goes on without it. Returns false, changing
     * nothing, if that cannot be done now (no fresh buffer for the slot's receive): the caller copies instead.
     */
    boolean handOver(int slot) throws VerbsException;

    /** A lent buffer released on the loop, alive again: whether these receives keep it (else it goes to its pool). */
    boolean keep(RdmaByteBuf buf);

    /** Frees the buffers the slots hold; own receives only once no receive can reference them (the QP is gone). */
    void close();
}
