package org.nettyrdma.channel;

/**
 * The receiver's accounting of its WRITE ring (protocol v2, docs/protocol.md "The WRITE ring"): it checks each
 * notification the peer's WRITE_WITH_IMM brings against the space the peer was given, remembers where each message
 * ends, and frees ring space in ring order. Positions grow for ever; the ring offset is a position mod the size.
 * Allocates nothing per message. Event loop only.
 */
final class RingReceiveSpace {
    /**
     * Immediate data: the top bit marks a PAD, whose other 31 bits are the length of the ring's tail it skips. A message
     * has the top bit clear, bits 24..30 the credits it grants (as a SEND's header does: a WRITE has no header, and
     * a writer that only writes into the ring must still return the receives its peer's CREDIT messages took), bits
     * 0..23 its length.
     */
    static final int IMM_PAD = 1 << 31;
    static final int IMM_CREDIT_SHIFT = 24;
    static final int IMM_MAX_CREDITS = 0x7f;
    static final int IMM_MAX_LENGTH = (1 << IMM_CREDIT_SHIFT) - 1;

    /** The immediate data of a message of {@code length} bytes granting {@code credits}. */
    static int messageImm(int length, int credits) {
        return credits << IMM_CREDIT_SHIFT | length;
    }

    /** The credits a notification's immediate data grants (none for a PAD). */
    static int immCredits(int imm) {
        return imm < 0 ? 0 : imm >>> IMM_CREDIT_SHIFT;
    }

    private final int size;
    /** End positions of the messages received and not freed, oldest first (a ring buffer). */
    private final long[] ends;
    private int head;
    private int count;
    /** Ring position after the last message or PAD received. */
    private long received;
    /** Ring position up to which the pipeline is done with the bytes. */
    private long freed;
    /** What the last header told the peer it may reuse ({@link #freed} then). */
    private long announced;
    /** The ring offset of the message the last {@link #onNotification} accepted (-1 for a PAD). */
    private int lastOffset;

    /** @param maxMessages messages that can be outstanding at most: the receives the peer may fill */
    RingReceiveSpace(int size, int maxMessages) {
        this.size = size;
        ends = new long[maxMessages];
    }

    int size() {
        return size;
    }

    /**
     * A notification arrived: immediate data {@code imm} for a WRITE of {@code byteLen} bytes. Returns what is wrong
     * (a PAD that is not the ring's tail, a message beyond the ring's end or beyond the space the peer was given, a
     * length that does not match the bytes written), else {@code null}; then {@link #lastOffset()} is where the
     * message is (-1 for a PAD).
     */
    String onNotification(int imm, int byteLen) {
        int offset = (int) (received % size);
        if ((imm & IMM_PAD) != 0) {
            int tail = size - offset;
            if ((imm & ~IMM_PAD) != tail || byteLen != 0) {
                return "sent a ring PAD of " + (imm & ~IMM_PAD) + " bytes (" + byteLen + " written) at ring offset "
                        + offset + ", not the " + tail + "-byte tail";
            }
            if (received + tail - announced > size) {
                return "padded the ring beyond the space it was given";
            }
            received += tail;
            if (count == 0) {
                freed = received; // nothing before it to wait for
            }
            lastOffset = -1;
            return null;
        }
        int length = imm & IMM_MAX_LENGTH;
        if (length == 0 || length != byteLen) {
            return "sent a ring notification of " + length + " bytes for a WRITE of " + byteLen + " bytes";
        }
        if (offset + (long) length > size) {
            return "wrote " + length + " bytes at ring offset " + offset + ", past the end of the " + size + "-byte ring";
        }
        if (received + length - announced > size) {
            return "wrote " + length + " bytes into the ring with only " + (size - (received - announced))
                    + " bytes of space given";
        }
        if (count == ends.length) {
            return "sent more ring messages than it had credits for";
        }
        received += length;
        ends[(head + count) % ends.length] = received;
        count++;
        lastOffset = offset;
        return null;
    }

    /** Where the message the last {@link #onNotification} accepted starts in the ring, or -1 if it was a PAD. */
    int lastOffset() {
        return lastOffset;
    }

    /** The pipeline is done with the oldest message: its bytes, and any PAD before it, are free. */
    void freeOldest() {
        freed = ends[head];
        head = head + 1 == ends.length ? 0 : head + 1;
        count--;
        if (count == 0 && received > freed) {
            freed = received; // a PAD after the last message: nothing in it to wait for
        }
    }

    /** The released count for the next header (mod 2^32): everything freed so far. */
    int takeReleased() {
        announced = freed;
        return (int) freed;
    }

    /** Whether enough ring space was freed since the last header to tell the peer at once (a quarter of the ring). */
    boolean shouldAnnounce() {
        return freed - announced >= size >>> 2;
    }

    @Override
    public String toString() {
        return "ring{received " + received + ", freed " + freed + ", announced " + announced + ", size " + size + '}';
    }
}
