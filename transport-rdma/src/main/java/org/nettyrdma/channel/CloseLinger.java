package org.nettyrdma.channel;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.channel.ChannelOutboundBuffer;

import java.util.ArrayDeque;

/**
 * What an orderly close still sends: the flushed writes that were not posted yet when the channel closed, up to
 * {@code SO_SNDBUF} bytes, as a socket's send buffer holds what the application wrote before {@code close()}. Like
 * the kernel, it copies them: the writes succeed and their buffers are released at the close; the connection sends
 * the copies, then its FIN (docs/protocol.md, "Closing"). Event loop only.
 */
final class CloseLinger {
    private final ArrayDeque<ByteBuf> bufs = new ArrayDeque<>();
    private long bytes;
    private long limit;
    private ByteBufAllocator alloc;

    private final ChannelOutboundBuffer.MessageProcessor taker = msg -> {
        ByteBuf buf = (ByteBuf) msg;
        int n = buf.readableBytes();
        if (bytes + n > limit) {
            return false; // this write and those after it fail, as they would not fit in a socket's send buffer
        }
        ByteBuf copy = alloc.directBuffer(n);
        copy.writeBytes(buf, buf.readerIndex(), n);
        bufs.add(copy);
        bytes += n;
        return true;
    };

    /**
     * Copies whole flushed writes from the head of {@code out} into buffers of {@code alloc}, as long as they add up to
     * at most {@code maxBytes}, and removes them from {@code out}: their futures succeed. Returns the bytes taken.
     */
    long take(ChannelOutboundBuffer out, long maxBytes, ByteBufAllocator alloc) throws Exception {
        long before = bytes;
        this.alloc = alloc;
        limit = bytes + maxBytes;
        out.forEachFlushedMessage(taker);
        long taken = bytes - before;
        if (taken > 0) {
            out.removeBytes(taken);
        }
        return taken;
    }

    /** Bytes still to send or in flight. */
    long bytes() {
        return bytes;
    }

    /** Feeds the bytes to {@code processor} in order, until it returns false. */
    void forEach(ChannelOutboundBuffer.MessageProcessor processor) throws Exception {
        for (ByteBuf buf : bufs) {
            if (!processor.processMessage(buf)) {
                return;
            }
        }
    }

    /** {@code n} bytes from the head were sent and their sends completed. */
    void remove(long n) {
        while (n > 0) {
            ByteBuf head = bufs.peek();
            int readable = head.readableBytes();
            if (readable <= n) {
                bufs.poll().release();
                n -= readable;
                bytes -= readable;
            } else {
                head.skipBytes((int) n);
                bytes -= n;
                n = 0;
            }
        }
    }

    /** Drops what is left (the connection ended without sending it). */
    void release() {
        ByteBuf buf;
        while ((buf = bufs.poll()) != null) {
            buf.release();
        }
        bytes = 0;
    }
}
