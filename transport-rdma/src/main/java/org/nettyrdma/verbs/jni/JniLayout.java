package org.nettyrdma.verbs.jni;

import org.nettyrdma.verbs.CompletionArray;
import org.nettyrdma.verbs.WorkRequestList;

import java.util.ArrayList;
import java.util.List;

/**
 * The layouts Java shares with the native library, as C defines them (netty_rdma_layout.h), read once when the
 * library loads through {@link Native}'s layout natives, as Netty's {@code NativeStaticallyReferencedJniMethods}
 * does. Two kinds:
 * <ul>
 * <li>What only the JNI provider uses (the CM event buffer, the address bytes, the output arrays of
 * {@code queryDevice} and {@code createQp}, {@code epollWait}'s results): the constants below, which have no other
 * definition.</li>
 * <li>The descriptor slots ({@link WorkRequestList}, {@link CompletionArray}): the emulated provider and the
 * transport use them without the library, so their Java constants stay the definition on this side, and
 * {@link #mismatch()} compares C's values with them when the library loads. A library that disagrees is refused:
 * {@link Native#loadFailure()} is a {@link Mismatch} naming each field, and the provider is unavailable.</li>
 * </ul>
 * Touched only after {@link Native} loaded the library (its static initializer does first).
 */
final class JniLayout {
    /** {@code getCmEvent}'s output buffer. */
    static final int EVENT_OFFSET_TYPE = Native.eventOffsetType();
    static final int EVENT_OFFSET_STATUS = Native.eventOffsetStatus();
    static final int EVENT_OFFSET_ID = Native.eventOffsetId();
    static final int EVENT_OFFSET_LISTEN_ID = Native.eventOffsetListenId();
    static final int EVENT_OFFSET_DATA_LENGTH = Native.eventOffsetDataLength();
    static final int EVENT_OFFSET_DATA = Native.eventOffsetData();
    static final int EVENT_MAX_DATA = Native.eventMaxData();
    static final int EVENT_SIZE = EVENT_OFFSET_DATA + EVENT_MAX_DATA;

    /** {@code idAddress}'s output: port (2 bytes, network order), address (4 or 16), IPv6 scope id (native int). */
    static final int ADDRESS_BYTES = Native.addressBytes();

    /** {@code queryDevice}'s output: the index of each attribute. */
    static final int ATTR_TRANSPORT = Native.attrTransport();
    static final int ATTR_MAX_QP = Native.attrMaxQp();
    static final int ATTR_MAX_QP_WR = Native.attrMaxQpWr();
    static final int ATTR_MAX_SGE = Native.attrMaxSge();
    static final int ATTR_MAX_CQE = Native.attrMaxCqe();
    static final int ATTR_MAX_MR = Native.attrMaxMr();
    static final int ATTR_MAX_MR_SIZE = Native.attrMaxMrSize();
    static final int ATTR_MAX_QP_RD_ATOM = Native.attrMaxQpRdAtom();
    static final int ATTR_MAX_INLINE_DATA = Native.attrMaxInlineData();
    static final int ATTR_VENDOR_ID = Native.attrVendorId();
    static final int ATTR_MAX_MW = Native.attrMaxMw();
    static final int ATTR_DEVICE_CAP_FLAGS = Native.attrDeviceCapFlags();
    static final int ATTR_MAX_SRQ = Native.attrMaxSrq();
    static final int ATTR_MAX_SRQ_WR = Native.attrMaxSrqWr();
    static final int ATTR_MAX_SRQ_SGE = Native.attrMaxSrqSge();
    static final int ATTR_COUNT = Native.attrCount();

    /** {@code createQp}'s output: the index of each granted capability. */
    static final int CAP_MAX_SEND_WR = Native.capMaxSendWr();
    static final int CAP_MAX_RECV_WR = Native.capMaxRecvWr();
    static final int CAP_MAX_SEND_SGE = Native.capMaxSendSge();
    static final int CAP_MAX_RECV_SGE = Native.capMaxRecvSge();
    static final int CAP_MAX_INLINE = Native.capMaxInline();
    static final int CAP_QP_NUM = Native.capQpNum();
    static final int CAP_COUNT = Native.capCount();

    /** {@code epollWait}'s results. */
    static final int WAIT_TIMEOUT = Native.waitTimeout();
    static final int WAIT_READY = Native.waitReady();
    static final int WAIT_WOKEN = Native.waitWoken();

    private JniLayout() {
    }

    /** One shared value: its Java name, Java's value and C's. */
    record Field(String name, int java, int c) {
    }

    /** The library refused because its layouts differ from these classes'. */
    static final class Mismatch extends UnsatisfiedLinkError {
        private static final long serialVersionUID = 1L;

        Mismatch(String message) {
            super(message);
        }
    }

    /** The descriptor slots, Java's constants against C's values. */
    static List<Field> descriptorFields() {
        return List.of(
                new Field("WorkRequestList.OFFSET_WR_ID", WorkRequestList.OFFSET_WR_ID, Native.wrOffsetWrId()),
                new Field("WorkRequestList.OFFSET_OPCODE", WorkRequestList.OFFSET_OPCODE, Native.wrOffsetOpcode()),
                new Field("WorkRequestList.OFFSET_SEND_FLAGS", WorkRequestList.OFFSET_SEND_FLAGS,
                        Native.wrOffsetSendFlags()),
                new Field("WorkRequestList.OFFSET_NUM_SGE", WorkRequestList.OFFSET_NUM_SGE, Native.wrOffsetNumSge()),
                new Field("WorkRequestList.OFFSET_IMM_DATA", WorkRequestList.OFFSET_IMM_DATA,
                        Native.wrOffsetImmData()),
                new Field("WorkRequestList.OFFSET_REMOTE_ADDR", WorkRequestList.OFFSET_REMOTE_ADDR,
                        Native.wrOffsetRemoteAddr()),
                new Field("WorkRequestList.OFFSET_RKEY", WorkRequestList.OFFSET_RKEY, Native.wrOffsetRkey()),
                new Field("WorkRequestList.OFFSET_MW_RKEY", WorkRequestList.OFFSET_MW_RKEY, Native.wrOffsetMwRkey()),
                new Field("WorkRequestList.OFFSET_SGES", WorkRequestList.OFFSET_SGES, Native.wrOffsetSges()),
                new Field("WorkRequestList.SGE_SIZE", WorkRequestList.SGE_SIZE, Native.sgeSize()),
                new Field("WorkRequestList.SGE_OFFSET_ADDR", WorkRequestList.SGE_OFFSET_ADDR, Native.sgeOffsetAddr()),
                new Field("WorkRequestList.SGE_OFFSET_LENGTH", WorkRequestList.SGE_OFFSET_LENGTH,
                        Native.sgeOffsetLength()),
                new Field("WorkRequestList.SGE_OFFSET_LKEY", WorkRequestList.SGE_OFFSET_LKEY, Native.sgeOffsetLkey()),
                new Field("CompletionArray.SLOT_SIZE", CompletionArray.SLOT_SIZE, Native.wcSlotSize()),
                new Field("CompletionArray.OFFSET_WR_ID", CompletionArray.OFFSET_WR_ID, Native.wcOffsetWrId()),
                new Field("CompletionArray.OFFSET_STATUS", CompletionArray.OFFSET_STATUS, Native.wcOffsetStatus()),
                new Field("CompletionArray.OFFSET_OPCODE", CompletionArray.OFFSET_OPCODE, Native.wcOffsetOpcode()),
                new Field("CompletionArray.OFFSET_BYTE_LEN", CompletionArray.OFFSET_BYTE_LEN,
                        Native.wcOffsetByteLen()),
                new Field("CompletionArray.OFFSET_IMM_DATA", CompletionArray.OFFSET_IMM_DATA,
                        Native.wcOffsetImmData()),
                new Field("CompletionArray.OFFSET_QP_NUM", CompletionArray.OFFSET_QP_NUM, Native.wcOffsetQpNum()),
                new Field("CompletionArray.OFFSET_WC_FLAGS", CompletionArray.OFFSET_WC_FLAGS,
                        Native.wcOffsetWcFlags()));
    }

    /**
     * Reads C's layouts (this class's constants, then the descriptor slots) and checks them: a {@link Mismatch} if
     * they disagree with Java's, null if they agree. Called once, by {@link Native}'s static initializer.
     */
    static Mismatch mismatch() {
        List<String> problems = new ArrayList<>();
        String descriptors = describe(descriptorFields());
        if (descriptors != null) {
            problems.add("the descriptor layouts differ: " + descriptors);
        }
        if (EVENT_OFFSET_DATA < EVENT_OFFSET_DATA_LENGTH + 4 || EVENT_MAX_DATA < 256 || ATTR_COUNT < 15
                || CAP_COUNT < 6) {
            problems.add("implausible layouts: event data at " + EVENT_OFFSET_DATA + " (length at "
                    + EVENT_OFFSET_DATA_LENGTH + "), up to " + EVENT_MAX_DATA + " bytes; " + ATTR_COUNT
                    + " device attributes, " + CAP_COUNT + " QP capabilities");
        }
        return problems.isEmpty() ? null : new Mismatch("the native library " + Native.LIBRARY_NAME
                + " does not match these classes (a library of another build?): " + String.join("; ", problems));
    }

    /** "NAME: J in Java, C in C" for each field whose values differ, or null if none does. */
    static String describe(List<Field> fields) {
        StringBuilder b = new StringBuilder();
        for (Field f : fields) {
            if (f.java() != f.c()) {
                b.append(b.length() == 0 ? "" : ", ").append(f.name()).append(": ").append(f.java())
                        .append(" in Java, ").append(f.c()).append(" in C");
            }
        }
        return b.length() == 0 ? null : b.toString();
    }
}
