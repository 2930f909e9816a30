package org.nettyrdma.channel;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelOutboundBuffer;
import io.netty.channel.FileRegion;

/**
 * A channel's flushed messages, {@link ByteBuf}s and {@link FileRegion}s, as the data path counts their bytes: a
 * message's bytes are posted, then settled when their sends complete, and settled bytes are removed from the head of
 * the outbound buffer (Netty's {@code removeBytes} knows only ByteBufs). A ByteBuf's settled bytes are skipped
 * (its reader index). A FileRegion cannot be rewound or skipped: the settled bytes of the one at the head are counted
 * here, its posted bytes are {@link FileRegion#transferred()}, and its size is the {@link FileRegion#count()} it had
 * when the data path reached it, remembered here, since some regions' count shrinks as they are written (Spark's
 * SASL encryption of a buffer counts the bytes it has not yet taken). Event loop only.
 *
 * <p>Walks over the flushed messages start at the head; the {@code index} of a region is how many regions came before
 * it in the walk. The regions the data path reached are remembered in that order, and leave when they are removed.
 */
final class FlushedMessages {
    /** The FileRegion at the head of the outbound buffer whose first {@link #headSettled} bytes were settled. */
    private FileRegion head;
    private long headSettled;
    // the regions the data path reached, in order, with their count() then: a ring of a power-of-two capacity
    private FileRegion[] regions = new FileRegion[16];
    private long[] counts = new long[16];
    private int first;
    private int size;

    /** Bytes of a flushed message not settled yet, posted or not; {@code index}: see the class comment. */
    long unsettled(Object msg, int index) {
        if (msg instanceof ByteBuf) {
            return ((ByteBuf) msg).readableBytes();
        }
        FileRegion region = (FileRegion) msg;
        return reach(region, index) - settled(region);
    }

    /** Bytes of {@code region} settled already: those of the head's, none of another's. */
    long settled(FileRegion region) {
        return region == head ? headSettled : 0;
    }

    /** A region's size: its {@code count()} when a walk first reached it (remembered from then on). */
    long reach(FileRegion region, int index) {
        if (index < size) {
            int at = (first + index) & (regions.length - 1);
            if (regions[at] == region) {
                return counts[at];
            }
            truncate(index); // those regions are gone: their writes failed with the channel's close
        }
        if (index == size) {
            add(region);
            return counts[(first + index) & (regions.length - 1)];
        }
        return region.count(); // not reached in order (cannot happen: walks start at the head)
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
            long left;
            if (msg instanceof ByteBuf) {
                left = ((ByteBuf) msg).readableBytes();
            } else {
                dropGoneRegions((FileRegion) msg);
                left = (isFirst(msg) ? counts[first] : ((FileRegion) msg).count()) - settled((FileRegion) msg);
            }
            if (left <= n) {
                if (left > 0) {
                    out.progress(left);
                }
                n -= left;
                forgetHead();
                if (isFirst(msg)) {
                    popFirst();
                }
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

    /** {@code region} is at the head: the remembered regions before it are gone (their writes failed). */
    private void dropGoneRegions(FileRegion region) {
        for (int i = 0; i < size; i++) {
            if (regions[(first + i) & (regions.length - 1)] == region) {
                while (i-- > 0) {
                    popFirst();
                }
                return;
            }
        }
    }

    private boolean isFirst(Object msg) {
        return size > 0 && regions[first] == msg;
    }

    private void popFirst() {
        regions[first] = null;
        first = (first + 1) & (regions.length - 1);
        size--;
    }

    private void add(FileRegion region) {
        if (size == regions.length) {
            FileRegion[] r = new FileRegion[size * 2];
            long[] c = new long[size * 2];
            for (int i = 0; i < size; i++) {
                r[i] = regions[(first + i) & (size - 1)];
                c[i] = counts[(first + i) & (size - 1)];
            }
            regions = r;
            counts = c;
            first = 0;
        }
        int at = (first + size) & (regions.length - 1);
        regions[at] = region;
        counts[at] = region.count();
        size++;
    }

    private void truncate(int index) {
        for (int i = index; i < size; i++) {
            regions[(first + i) & (regions.length - 1)] = null;
        }
        size = index;
        if (size == 0) {
            first = 0;
        }
    }

    private void forgetHead() {
        head = null;
        headSettled = 0;
    }
}
