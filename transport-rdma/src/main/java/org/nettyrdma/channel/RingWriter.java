package org.nettyrdma.channel;

/**
 * The writer's side of the peer's WRITE ring (protocol v2, docs/protocol.md "The WRITE ring"): where the next message
 * goes and how much room is left. {@code written} counts the bytes this side placed, pads included, {@code released}
 * what the peer gave back; both grow for ever, and {@code size - (written - released)} is free. A message never
 * wraps: one that does not fit before the end needs a PAD of the tail first. Allocates nothing. Event loop only.
 */
final class RingWriter {
    private final long address;
    private final int size;
    private final int rkey;
    private long written;
    private long released;

    RingWriter(long address, int size, int rkey) {
        this.address = address;
        this.size = size;
        this.rkey = rkey;
    }

    int rkey() {
        return rkey;
    }

    int size() {
        return size;
    }

    /**
     * The largest message this side places in one WRITE: a quarter of the ring, so that writes and releases overlap,
     * and at most what the immediate data's length holds.
     */
    int maxMessage() {
        return Math.min(size >>> 2, RingReceiveSpace.IMM_MAX_LENGTH);
    }

    private int offset() {
        return (int) (written % size);
    }

    /** Whether a message of {@code n} bytes must start after a PAD of the ring's tail. */
    boolean needsPad(int n) {
        return offset() + n > size;
    }

    /** Whether a message of {@code n} bytes (and the PAD before it, if it needs one) fits in the free space now. */
    boolean fits(int n) {
        long free = size - (written - released);
        return free >= (needsPad(n) ? size - offset() + n : n);
    }

    /** The ring's address where the PAD starts; takes the tail (its length is {@link #tail()} before the call). */
    long placePad() {
        long at = address + offset();
        written += size - offset();
        return at;
    }

    /** Bytes from the next write's place to the end of the ring. */
    int tail() {
        return size - offset();
    }

    /** The ring's address where a message of {@code n} bytes goes (no PAD needed, it {@link #fits}); takes the space. */
    long place(int n) {
        long at = address + offset();
        written += n;
        return at;
    }

    /**
     * A header said the peer has released {@code count} bytes in all (mod 2^32). Returns what is wrong if that goes
     * backwards or beyond what was written (not taken then), else {@code null}.
     */
    String onReleased(int count) {
        long delta = (count - (int) released) & 0xffffffffL;
        if (delta > written - released) {
            return "released ring bytes up to " + Integer.toUnsignedString(count) + ", "
                    + (delta > Integer.MAX_VALUE ? "back from " + (int) released
                    : "beyond the " + (written - released) + " bytes written and not released");
        }
        released += delta;
        return null;
    }

    @Override
    public String toString() {
        return "ring{written " + written + ", released " + released + ", size " + size + '}';
    }
}
