package org.nettyrdma.channel;

import io.netty.buffer.ByteBuf;

/**
 * Where a buffer's bytes are in registered memory, for the send path: the {@link RdmaByteBuf} behind it, found through
 * Netty's wrappers, duplicates and unpooled slices ({@link RdmaByteBufWrappers#indexShift}), and how its indexes map
 * to that buffer's. HTTP/2's frame writer sends each DATA frame as a slice of the message's buffer, so a slice of a
 * registered buffer is what gRPC hands the channel. One per send queue, reused: allocates nothing. Event loop only.
 */
final class RegisteredSource {
    /** Wrappers and slices looked through at most (a slice of a slice is one slice over the same buffer). */
    private static final int MAX_DEPTH = 4;

    private RdmaByteBuf root;
    private int shift;

    /**
     * Finds the registered buffer behind {@code buf}; false (and {@link #root()} null) if there is none: heap or
     * unregistered memory, composites, or derived buffers this Netty version's classes cannot be looked through.
     */
    boolean locate(ByteBuf buf) {
        int s = 0;
        for (int depth = 0; depth <= MAX_DEPTH && buf != null; depth++) {
            if (buf instanceof RdmaByteBuf) {
                root = (RdmaByteBuf) buf;
                shift = s;
                return true;
            }
            int d = RdmaByteBufWrappers.indexShift(buf);
            if (d < 0) {
                break;
            }
            s += d;
            buf = buf.unwrap();
        }
        root = null;
        return false;
    }

    /** The registered buffer the last {@link #locate} found, or null. */
    RdmaByteBuf root() {
        return root;
    }

    /** The offset in the root's region of index {@code index} of the buffer last located. */
    int regionOffset(int index) {
        return root.regionOffset() + shift + index;
    }
}
