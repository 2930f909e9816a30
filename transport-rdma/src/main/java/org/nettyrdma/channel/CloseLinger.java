package org.nettyrdma.channel;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.ByteBufOutputStream;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelOutboundBuffer;
import io.netty.channel.FileRegion;

import java.io.IOException;
import java.nio.channels.Channels;
import java.nio.channels.WritableByteChannel;
import java.util.ArrayDeque;

/**
 * What the connection still sends after the channel's output ended ({@code close()} or {@code shutdownOutput()}), as
 * a socket's send buffer holds what the application wrote: the flushed bytes already posted, kept alive (retained, not
 * copied: a SEND may still read them) until their completions, then the flushed writes not posted yet, copied like
 * the kernel copies into its send buffer, up to {@code SO_SNDBUF} bytes of whole writes. The channel's writes of all
 * these bytes succeed when they are taken; the connection sends the copies, then its FIN (docs/protocol.md,
 * "Closing"). Its head bytes are the posted ones, so the {@link DataPath}'s count of unsettled bytes keeps applying.
 * A {@link FileRegion}'s posted bytes are in staging already: stand-ins of their length keep the count; the rest of
 * the region is copied like a buffer's (a {@code DefaultFileRegion}'s read from its file, {@link FileRegionReader}).
 * Event loop only.
 */
final class CloseLinger {
    /** Stands for bytes posted from staging: the data path skips posted bytes, so no byte of it is ever sent. */
    private static final ByteBuf POSTED_STAND_IN =
            Unpooled.unreleasableBuffer(Unpooled.wrappedBuffer(new byte[64 * 1024]).asReadOnly());

    private final ArrayDeque<ByteBuf> bufs = new ArrayDeque<>();
    /** Bytes of {@link #bufs}: what the data path still sends or waits to settle. */
    private long bytes;
    // one take()
    /** Bytes of the outbound buffer's messages taken (a region counts what it transferred, not what it wrote). */
    private long taken;
    private FlushedMessages flushed;
    /** Regions this take passed (FlushedMessages' index). */
    private int regionIndex;
    private long posted;
    private long copyLimit;
    private ByteBufAllocator alloc;
    /** Why the last take stopped at a write it could not copy (a region's file that ended early, no memory), if so. */
    private Throwable failure;

    private final ChannelOutboundBuffer.MessageProcessor taker = msg -> {
        if (msg instanceof FileRegion) {
            return takeRegion((FileRegion) msg);
        }
        ByteBuf buf = (ByteBuf) msg;
        int index = buf.readerIndex();
        int n = buf.readableBytes();
        if (posted > 0) {
            int inFlight = (int) Math.min(n, posted);
            bufs.add(buf.retainedSlice(index, inFlight)); // a posted SEND may still read this memory
            bytes += inFlight;
            taken += inFlight;
            posted -= inFlight;
            index += inFlight;
            n -= inFlight;
        }
        if (n == 0) {
            return true;
        }
        if (n > copyLimit) {
            return false; // this write and those after it fail, as they would not fit in a socket's send buffer
        }
        ByteBuf copy = alloc.directBuffer(n);
        copy.writeBytes(buf, index, n);
        bufs.add(copy);
        bytes += n;
        taken += n;
        copyLimit -= n;
        return true;
    };

    private boolean takeRegion(FileRegion region) throws IOException {
        int index = regionIndex++;
        long inFlight = Math.min(flushed.unsettled(region, index), posted);
        posted -= inFlight;
        bytes += inFlight;
        taken += inFlight;
        while (inFlight > 0) {
            int n = (int) Math.min(inFlight, POSTED_STAND_IN.capacity());
            bufs.add(POSTED_STAND_IN.slice(0, n));
            inFlight -= n;
        }
        long count = flushed.reach(region, index);
        long n = count - region.transferred();
        if (n <= 0) {
            return true;
        }
        if (n > copyLimit) {
            return false;
        }
        ByteBuf copy = alloc.directBuffer((int) n);
        try {
            boolean direct = FileRegionReader.canRead(region);
            WritableByteChannel into = direct ? null : Channels.newChannel(new ByteBufOutputStream(copy));
            while (region.transferred() < count) {
                long position = region.transferred();
                int written = copy.writerIndex();
                if (direct) {
                    // a DefaultFileRegion's bytes read from its file straight into the copy
                    int read = FileRegionReader.read(region, copy.internalNioBuffer(written, copy.writableBytes()));
                    copy.writerIndex(written + read);
                } else {
                    region.transferTo(into, position);
                }
                if (region.transferred() == position && copy.writerIndex() == written) {
                    throw new IOException("FileRegion " + region.getClass().getName() + " made no progress at "
                            + position + " of " + count);
                }
            }
        } catch (IOException | RuntimeException e) {
            copy.release();
            throw e;
        }
        bufs.add(copy);
        bytes += copy.readableBytes(); // a region may write more than it counts
        taken += n;
        copyLimit -= copy.readableBytes();
        return true;
    }

    /**
     * Takes the flushed messages of {@code out}: its first {@code postedBytes} bytes (in flight) retained, then whole
     * writes copied into buffers of {@code alloc} while they add up to at most {@code maxCopied} bytes. Returns the
     * bytes taken, even if it failed part-way (the caller removes them from {@code out}: their writes succeed; then
     * {@link #failure()} says why the write after them could not be taken).
     */
    long take(ChannelOutboundBuffer out, FlushedMessages flushed, long postedBytes, long maxCopied,
              ByteBufAllocator alloc) {
        taken = 0;
        regionIndex = 0;
        failure = null;
        this.flushed = flushed;
        posted = postedBytes;
        copyLimit = maxCopied;
        this.alloc = alloc;
        try {
            out.forEachFlushedMessage(taker);
        } catch (Exception | OutOfMemoryError e) {
            // a region's file ended early, or no memory for a copy: what was taken goes out, the write it stopped at
            // fails with this cause, those after it fail as Netty fails writes at the end of output
            failure = e instanceof IOException ? e : new IOException("taking a write along at the end of output "
                    + "failed: " + e, e);
        } finally {
            this.alloc = null;
            this.flushed = null;
        }
        return taken;
    }

    /** Why the last {@link #take} stopped at a write it could not take, or {@code null}. */
    Throwable failure() {
        return failure;
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

    /** Drops what is left (the connection ended without sending it); only once no send can read it. */
    void release() {
        ByteBuf buf;
        while ((buf = bufs.poll()) != null) {
            buf.release();
        }
        bytes = 0;
    }
}
