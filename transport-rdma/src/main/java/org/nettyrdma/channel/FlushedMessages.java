package org.nettyrdma.channel;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelOutboundBuffer;
import io.netty.channel.FileRegion;

/**
 * A channel's flushed messages, {@link ByteBuf}s and {@link FileRegion}s, as the data path counts their bytes: a
 * message's bytes are posted, then settled when their sends complete, and settled bytes are removed from the head of
 * the outbound buffer (Netty's {@code removeBytes} knows only ByteBufs). A ByteBuf's settled bytes are skipped
 * (its reader index); a FileRegion cannot be rewound or skipped, so the settled bytes of the one at the head are
 * counted here, and its posted bytes are {@link FileRegion#transferred()}. Event loop only.
 */
final class FlushedMessages {
    /** The FileRegion at the head of the outbound buffer whose first {@link #headSettled} bytes were settled. */
    private FileRegion head;
    private long headSettled;

    /** Bytes of a flushed message not settled yet: posted or not. */
    long unsettled(Object msg) {
        if (msg instanceof ByteBuf) {
            return ((ByteBuf) msg).readableBytes();
        }
        FileRegion region = (FileRegion) msg;
        return region.count() - (region == head ? headSettled : 0);
    }

    /**
     * Removes {@code n} settled bytes from the head of {@code out}, completing the writes they finish, and the empty
     * messages that follow them (which completes their writes too). Writes' listeners run meanwhile: a close among
     * them empties {@code out}, which ends the removal.
     */
    void remove(ChannelOutboundBuffer out, long n) {
        for (;;) {
            Object msg = out.current();
            if (msg == null) {
                break;
            }
            if (msg != head) {
                forgetHead(); // the region counted before is gone (its write completed or failed)
            }
            long left = unsettled(msg);
            if (left <= n) {
                if (left > 0) {
                    out.progress(left);
                }
                n -= left;
                forgetHead();
                out.remove();
            } else {
                if (n > 0) {
                    if (msg instanceof ByteBuf) {
                        ((ByteBuf) msg).skipBytes((int) n);
                    } else {
                        head = (FileRegion) msg;
                        headSettled += n;
                    }
                    out.progress(n);
                }
                break;
            }
        }
    }

    private void forgetHead() {
        head = null;
        headSettled = 0;
    }
}
