package org.nettyrdma.verbs;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * A preallocated, off-heap array of work request descriptors: the one layout every provider reads (see
 * docs/descriptors.md). Send and receive work requests share it (a receive uses only {@code wr_id} and its SGEs).
 *
 * <p>A chain is written once and posted with one call, {@link QueuePair#postSend(WorkRequestList, int, int)};
 * fields can be patched in place and the chain re-posted. Nothing here allocates after construction. Not
 * thread-safe: a list belongs to the thread that posts it.
 *
 * <pre>
 * slot (40 + 16 * maxSge bytes, native byte order)
 *  0  u64 wr_id
 *  8  u32 opcode        WrOpcode
 * 12  u32 send_flags    SendFlags
 * 16  u32 num_sge
 * 20  u32 imm_data      host order; a provider converts to the wire's big-endian. LOCAL_INV, SEND_WITH_INV: the
 *                       rkey to invalidate (invalidate_rkey); BIND_MW: the window's access flags
 * 24  u64 remote_addr
 * 32  u32 rkey          BIND_MW: the window's new rkey
 * 36  u32 mw_rkey       BIND_MW: the window's rkey before the bind (names the window); 0 otherwise
 * 40  sge[maxSge]       { u64 addr; u32 length; u32 lkey }; BIND_MW: sge[0] is the range the window exposes and
 *                       the lkey of the region it lies in
 * </pre>
 */
public final class WorkRequestList {
    public static final int OFFSET_WR_ID = 0;
    public static final int OFFSET_OPCODE = 8;
    public static final int OFFSET_SEND_FLAGS = 12;
    public static final int OFFSET_NUM_SGE = 16;
    public static final int OFFSET_IMM_DATA = 20;
    public static final int OFFSET_REMOTE_ADDR = 24;
    public static final int OFFSET_RKEY = 32;
    public static final int OFFSET_MW_RKEY = 36;
    public static final int OFFSET_SGES = 40;
    public static final int SGE_SIZE = 16;
    public static final int SGE_OFFSET_ADDR = 0;
    public static final int SGE_OFFSET_LENGTH = 8;
    public static final int SGE_OFFSET_LKEY = 12;

    private final ByteBuffer memory;
    private final int capacity;
    private final int maxSge;
    private final int slotSize;
    private int badIndex = -1;

    /**
     * @param capacity how many work requests the list holds
     * @param maxSge   how many scatter/gather entries each of them can carry
     */
    public WorkRequestList(int capacity, int maxSge) {
        if (capacity < 1 || maxSge < 0) {
            throw new IllegalArgumentException("capacity " + capacity + " and maxSge " + maxSge);
        }
        this.capacity = capacity;
        this.maxSge = maxSge;
        this.slotSize = OFFSET_SGES + SGE_SIZE * maxSge;
        this.memory = ByteBuffer.allocateDirect(capacity * slotSize).order(ByteOrder.nativeOrder());
    }

    public int capacity() {
        return capacity;
    }

    public int maxSge() {
        return maxSge;
    }

    public int slotSize() {
        return slotSize;
    }

    /** The descriptor memory, for providers: slot {@code i} starts at byte {@code i * slotSize()}. */
    public ByteBuffer memory() {
        return memory;
    }

    /**
     * After a post returned {@code -errno}: the index of the first work request that was not posted (those before it
     * were). A provider sets it; -1 when the last post succeeded.
     */
    public int badIndex() {
        return badIndex;
    }

    public void badIndex(int index) {
        badIndex = index;
    }

    private int slot(int i) {
        if (i < 0 || i >= capacity) {
            throw new IndexOutOfBoundsException("work request " + i + " of " + capacity);
        }
        return i * slotSize;
    }

    private int sgeOffset(int i, int sge) {
        if (sge < 0 || sge >= maxSge) {
            throw new IndexOutOfBoundsException("sge " + sge + " of " + maxSge);
        }
        return slot(i) + OFFSET_SGES + sge * SGE_SIZE;
    }

    /** Writes a send work request's header and sets its SGE count to zero; add SGEs with {@link #addSge}. */
    public WorkRequestList setSend(int i, long wrId, int opcode, int sendFlags) {
        int o = slot(i);
        memory.putLong(o + OFFSET_WR_ID, wrId);
        memory.putInt(o + OFFSET_OPCODE, opcode);
        memory.putInt(o + OFFSET_SEND_FLAGS, sendFlags);
        memory.putInt(o + OFFSET_NUM_SGE, 0);
        memory.putInt(o + OFFSET_IMM_DATA, 0);
        memory.putLong(o + OFFSET_REMOTE_ADDR, 0);
        memory.putInt(o + OFFSET_RKEY, 0);
        memory.putInt(o + OFFSET_MW_RKEY, 0);
        return this;
    }

    /**
     * Writes a {@link WrOpcode#BIND_MW}: binds type-2 window {@code mw} to bytes {@code [address, address + length)} of
     * {@code mr} (a region of the window's PD registered with {@link Access#MW_BIND}, and LOCAL_WRITE if the window is
     * to grant REMOTE_WRITE), granting {@code access} (REMOTE_READ, REMOTE_WRITE) under {@code newRkey}
     * (usually {@link MemoryWindow#nextRkey()}) to the QP the work request is posted on, and to no other. The window
     * must be free. Needs a list with at least one SGE per work request. A bind the device refuses completes with
     * {@link WcStatus#MW_BIND_ERR}; one that names no live window or region is refused at post time (EINVAL).
     */
    public WorkRequestList bindWindow(int i, long wrId, int sendFlags, MemoryWindow mw, int newRkey, MemoryRegion mr,
                                      long address, int length, int access) {
        setSend(i, wrId, WrOpcode.BIND_MW, sendFlags);
        int o = slot(i);
        memory.putInt(o + OFFSET_IMM_DATA, access);
        memory.putInt(o + OFFSET_RKEY, newRkey);
        memory.putInt(o + OFFSET_MW_RKEY, mw.rkey());
        memory.putLong(o + OFFSET_REMOTE_ADDR, address);
        return addSge(i, address, length, mr.lkey());
    }

    /** Writes a {@link WrOpcode#LOCAL_INV} of the window whose rkey is {@code rkey}. */
    public WorkRequestList invalidate(int i, long wrId, int sendFlags, int rkey) {
        setSend(i, wrId, WrOpcode.LOCAL_INV, sendFlags);
        return invalidateRkey(i, rkey);
    }

    /** The rkey a LOCAL_INV or SEND_WITH_INV invalidates (the {@code imm_data} field, {@code invalidate_rkey}). */
    public WorkRequestList invalidateRkey(int i, int rkey) {
        memory.putInt(slot(i) + OFFSET_IMM_DATA, rkey);
        return this;
    }

    /** Writes a receive work request with no SGEs yet. */
    public WorkRequestList setRecv(int i, long wrId) {
        return setSend(i, wrId, 0, 0);
    }

    /** Appends a scatter/gather entry to work request {@code i}. */
    public WorkRequestList addSge(int i, long addr, int length, int lkey) {
        int n = numSge(i);
        int o = sgeOffset(i, n);
        memory.putLong(o + SGE_OFFSET_ADDR, addr);
        memory.putInt(o + SGE_OFFSET_LENGTH, length);
        memory.putInt(o + SGE_OFFSET_LKEY, lkey);
        memory.putInt(slot(i) + OFFSET_NUM_SGE, n + 1);
        return this;
    }

    /** Overwrites entry {@code sge} of work request {@code i} in place (it must be below {@link #numSge(int)}). */
    public WorkRequestList setSge(int i, int sge, long addr, int length, int lkey) {
        int o = sgeOffset(i, sge);
        memory.putLong(o + SGE_OFFSET_ADDR, addr);
        memory.putInt(o + SGE_OFFSET_LENGTH, length);
        memory.putInt(o + SGE_OFFSET_LKEY, lkey);
        return this;
    }

    public WorkRequestList remote(int i, long remoteAddr, int rkey) {
        int o = slot(i);
        memory.putLong(o + OFFSET_REMOTE_ADDR, remoteAddr);
        memory.putInt(o + OFFSET_RKEY, rkey);
        return this;
    }

    public WorkRequestList immData(int i, int imm) {
        memory.putInt(slot(i) + OFFSET_IMM_DATA, imm);
        return this;
    }

    public WorkRequestList wrId(int i, long wrId) {
        memory.putLong(slot(i) + OFFSET_WR_ID, wrId);
        return this;
    }

    public WorkRequestList sendFlags(int i, int flags) {
        memory.putInt(slot(i) + OFFSET_SEND_FLAGS, flags);
        return this;
    }

    public WorkRequestList numSge(int i, int n) {
        if (n < 0 || n > maxSge) {
            throw new IndexOutOfBoundsException("num_sge " + n + " of " + maxSge);
        }
        memory.putInt(slot(i) + OFFSET_NUM_SGE, n);
        return this;
    }

    public long wrId(int i) {
        return memory.getLong(slot(i) + OFFSET_WR_ID);
    }

    public int opcode(int i) {
        return memory.getInt(slot(i) + OFFSET_OPCODE);
    }

    public int sendFlags(int i) {
        return memory.getInt(slot(i) + OFFSET_SEND_FLAGS);
    }

    public int numSge(int i) {
        return memory.getInt(slot(i) + OFFSET_NUM_SGE);
    }

    public int immData(int i) {
        return memory.getInt(slot(i) + OFFSET_IMM_DATA);
    }

    public long remoteAddr(int i) {
        return memory.getLong(slot(i) + OFFSET_REMOTE_ADDR);
    }

    public int rkey(int i) {
        return memory.getInt(slot(i) + OFFSET_RKEY);
    }

    public int mwRkey(int i) {
        return memory.getInt(slot(i) + OFFSET_MW_RKEY);
    }

    public long sgeAddr(int i, int sge) {
        return memory.getLong(sgeOffset(i, sge) + SGE_OFFSET_ADDR);
    }

    public int sgeLength(int i, int sge) {
        return memory.getInt(sgeOffset(i, sge) + SGE_OFFSET_LENGTH);
    }

    public int sgeLkey(int i, int sge) {
        return memory.getInt(sgeOffset(i, sge) + SGE_OFFSET_LKEY);
    }
}
