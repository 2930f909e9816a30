package org.nettyrdma.benchmarks.perf;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;

/**
 * The buffers a sender writes its messages from, filled once with the message pattern ({@link MessageReader}) and
 * written again and again: a message is the next buffer of the ring, stamped with its sequence number and retained
 * for the write. A buffer is reused only when nothing but the ring references it (reference count 1): the transport
 * released it after sending it (or, for {@code local}, the receiver after reading it). So messages cost no
 * allocation and no copy in the tool, and buffers from the channel's allocator (registered memory on RDMA) reach the
 * transport as they are, not wrapped in slices or duplicates, which the RDMA transport would have to copy.
 *
 * <p>Used on one event loop only.
 */
final class MessageRing {
    /** Bytes of a message that carry its sequence number (little-endian), at most the whole message. */
    static final int STAMP_BYTES = 8;
    /**
     * What Netty's {@code ChannelOutboundBuffer} counts for each message on top of its bytes (its entry overhead,
     * {@code io.netty.transport.outboundBufferEntrySizeOverhead}, 96 by default): sizes the ring so that a channel
     * turns unwritable before the ring runs out.
     */
    private static final int ENTRY_OVERHEAD = 96;
    private static final int MAX_BUFFERS = 4096;

    private final ByteBuf[] buffers;
    private final int size;
    private int next;

    /** A ring of {@code count} buffers of {@code size} bytes from {@code alloc}'s direct memory. */
    MessageRing(ByteBufAllocator alloc, int size, int count) {
        this.size = size;
        buffers = new ByteBuf[count];
        byte[] pattern = MessageReader.pattern(size);
        try {
            for (int i = 0; i < count; i++) {
                buffers[i] = alloc.directBuffer(size, size).writeBytes(pattern);
            }
        } catch (Throwable t) {
            release();
            throw t;
        }
    }

    /** Enough buffers to fill a channel's outbound buffer up to its high water mark twice, and at least 4. */
    static int countFor(int size, int writeBufferHighWaterMark) {
        long fill = 2L * writeBufferHighWaterMark / ((long) size + ENTRY_OVERHEAD);
        return (int) Math.min(MAX_BUFFERS, fill + 4);
    }

    int size() {
        return size;
    }

    int count() {
        return buffers.length;
    }

    /**
     * The next message, stamped with {@code sequence} and retained once for the caller's write; {@code null} while the
     * next buffer is still held by the transport or the receiver.
     */
    ByteBuf next(long sequence) {
        ByteBuf buf = buffers[next];
        if (buf.refCnt() != 1) {
            return null;
        }
        next = next + 1 == buffers.length ? 0 : next + 1;
        if (size >= STAMP_BYTES) {
            buf.setLongLE(0, sequence);
        } else {
            for (int j = 0; j < size; j++) {
                buf.setByte(j, (byte) (sequence >>> (j << 3)));
            }
        }
        buf.setIndex(0, size);
        return buf.retain();
    }

    /** Drops the ring's references; buffers still in flight are freed by whoever holds them last. */
    void release() {
        for (int i = 0; i < buffers.length; i++) {
            if (buffers[i] != null) {
                buffers[i].release();
                buffers[i] = null;
            }
        }
    }
}
