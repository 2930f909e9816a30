package org.nettyrdma.verbs;

import java.nio.ByteBuffer;

/**
 * A registered memory region ({@code ibv_mr}). SGEs and remote addresses name its bytes as
 * {@code address() + offset}; the keys admit them. Deregistering it while a posted work request still references it
 * is the caller's bug: that work request then fails with a protection error.
 */
public interface MemoryRegion extends AutoCloseable {

    ProtectionDomain pd();

    /** The address of byte 0 of the region, as SGEs and remote addresses name it. */
    long address();

    long length();

    int lkey();

    /** The key a peer uses for RDMA READ/WRITE; 0 unless the region grants a remote access. */
    int rkey();

    int access();

    /** The registered memory (a duplicate view: position 0, limit = capacity). */
    ByteBuffer buffer();

    /** {@code ibv_dereg_mr}; idempotent. */
    @Override
    void close() throws VerbsException;
}
