package org.nettyrdma.channel;

import java.nio.ByteBuffer;
import java.nio.channels.WritableByteChannel;

/**
 * A {@link WritableByteChannel} that puts what it is given into a buffer's room (position to limit), as much as fits:
 * what a {@code FileRegion.transferTo} writes into the send staging. Allocates nothing; never closes.
 */
final class ByteBufferSink implements WritableByteChannel {
    private ByteBuffer target;

    ByteBufferSink(ByteBuffer target) {
        this.target = target;
    }

    /** Writes into {@code target} from now on (the send staging of the slot being filled). */
    ByteBufferSink target(ByteBuffer target) {
        this.target = target;
        return this;
    }

    @Override
    public int write(ByteBuffer src) {
        int n = Math.min(src.remaining(), target.remaining());
        int limit = src.limit();
        src.limit(src.position() + n);
        target.put(src);
        src.limit(limit);
        return n;
    }

    @Override
    public boolean isOpen() {
        return true;
    }

    @Override
    public void close() {
        // the target outlives any region
    }
}
