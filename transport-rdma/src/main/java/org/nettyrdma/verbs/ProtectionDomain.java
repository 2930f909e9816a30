package org.nettyrdma.verbs;

import java.nio.ByteBuffer;

/** {@code ibv_pd}. Closing it while memory regions, memory windows, shared receive queues or queue pairs use it fails with EBUSY. */
public interface ProtectionDomain extends AutoCloseable {

    Device device();

    /**
     * {@code ibv_reg_mr} of the buffer's bytes from 0 to its capacity.
     *
     * @param buffer a direct buffer (the emulated provider also takes heap buffers)
     * @param access {@link Access} flags; REMOTE_WRITE without LOCAL_WRITE fails with EINVAL, and so does a buffer
     *               longer than {@link DeviceAttributes#maxMrSize()}. A failure that the memlock limit caused says so.
     */
    MemoryRegion registerMemory(ByteBuffer buffer, int access) throws VerbsException;

    /**
     * {@code ibv_alloc_mw(pd, IBV_MW_TYPE_2)}: a free type-2 memory window of this protection domain.
     *
     * @throws VerbsException EOPNOTSUPP where the device has no memory windows
     *                        ({@link DeviceAttributes#supportsMemoryWindows()}: siw), ENOMEM beyond {@code max_mw}
     */
    MemoryWindow allocMemoryWindow() throws VerbsException;

    /**
     * {@code ibv_create_srq}: a shared receive queue of this protection domain with room for {@code maxWr} receives of
     * up to {@code maxSge} SGEs each, its limit event disarmed.
     *
     * @throws VerbsException EOPNOTSUPP where the device has none ({@link DeviceAttributes#supportsSharedReceiveQueues()})
     *                        or the provider does not create them yet, EINVAL for {@code maxWr} outside
     *                        {@code 1 .. max_srq_wr} or {@code maxSge} outside {@code 0 .. max_srq_sge}, ENOMEM beyond
     *                        {@code max_srq}, EBADF after close
     */
    SharedReceiveQueue createSharedReceiveQueue(int maxWr, int maxSge) throws VerbsException;

    /** {@code ibv_dealloc_pd}; idempotent. */
    @Override
    void close() throws VerbsException;
}
