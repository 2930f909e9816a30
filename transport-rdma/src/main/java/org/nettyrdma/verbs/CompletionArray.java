package org.nettyrdma.verbs;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * A preallocated, off-heap array that {@link CompletionQueue#poll(CompletionArray, int)} fills with work completions
 * (see docs/descriptors.md). Reused for every poll; nothing allocates.
 *
 * <pre>
 * slot (32 bytes, native byte order)
 *  0  u64 wr_id
 *  8  u32 status      WcStatus
 * 12  u32 opcode      WcOpcode
 * 16  u32 byte_len
 * 20  u32 imm_data    host order
 * 24  u32 qp_num
 * 28  u32 wc_flags    WcOpcode.FLAG_WITH_IMM
 * </pre>
 */
public final class CompletionArray {
    public static final int SLOT_SIZE = 32;
    public static final int OFFSET_WR_ID = 0;
    public static final int OFFSET_STATUS = 8;
    public static final int OFFSET_OPCODE = 12;
    public static final int OFFSET_BYTE_LEN = 16;
    public static final int OFFSET_IMM_DATA = 20;
    public static final int OFFSET_QP_NUM = 24;
    public static final int OFFSET_WC_FLAGS = 28;

    private final ByteBuffer memory;
    private final int capacity;

    public CompletionArray(int capacity) {
        if (capacity < 1) {
            throw new IllegalArgumentException("capacity " + capacity);
        }
        this.capacity = capacity;
        this.memory = ByteBuffer.allocateDirect(capacity * SLOT_SIZE).order(ByteOrder.nativeOrder());
    }

    public int capacity() {
        return capacity;
    }

    /** The completion memory, for providers: slot {@code i} starts at byte {@code i * SLOT_SIZE}. */
    public ByteBuffer memory() {
        return memory;
    }

    private int slot(int i) {
        if (i < 0 || i >= capacity) {
            throw new IndexOutOfBoundsException("completion " + i + " of " + capacity);
        }
        return i * SLOT_SIZE;
    }

    /** Writes completion {@code i}; for providers. */
    public void set(int i, long wrId, int status, int opcode, int byteLen, int immData, int qpNum, int wcFlags) {
        int o = slot(i);
        memory.putLong(o + OFFSET_WR_ID, wrId);
        memory.putInt(o + OFFSET_STATUS, status);
        memory.putInt(o + OFFSET_OPCODE, opcode);
        memory.putInt(o + OFFSET_BYTE_LEN, byteLen);
        memory.putInt(o + OFFSET_IMM_DATA, immData);
        memory.putInt(o + OFFSET_QP_NUM, qpNum);
        memory.putInt(o + OFFSET_WC_FLAGS, wcFlags);
    }

    public long wrId(int i) {
        return memory.getLong(slot(i) + OFFSET_WR_ID);
    }

    public int status(int i) {
        return memory.getInt(slot(i) + OFFSET_STATUS);
    }

    public int opcode(int i) {
        return memory.getInt(slot(i) + OFFSET_OPCODE);
    }

    public int byteLen(int i) {
        return memory.getInt(slot(i) + OFFSET_BYTE_LEN);
    }

    public int immData(int i) {
        return memory.getInt(slot(i) + OFFSET_IMM_DATA);
    }

    public int qpNum(int i) {
        return memory.getInt(slot(i) + OFFSET_QP_NUM);
    }

    public int wcFlags(int i) {
        return memory.getInt(slot(i) + OFFSET_WC_FLAGS);
    }
}
