package org.nettyrdma.channel;

import io.netty.channel.DefaultFileRegion;
import io.netty.channel.FileRegion;
import io.netty.util.IllegalReferenceCountException;
import io.netty.util.internal.SystemPropertyUtil;
import io.netty.util.internal.logging.InternalLogger;
import io.netty.util.internal.logging.InternalLoggerFactory;

import java.io.IOException;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;

/**
 * Reads a {@link DefaultFileRegion}'s bytes straight into a direct buffer (a send slot of registered staging memory)
 * with a positional {@link FileChannel#read(ByteBuffer, long)}: one copy, the kernel's, from the page cache. The
 * region's own {@code transferTo} into a channel that is neither a file nor a socket reads through the JDK's temporary
 * buffer of at most 8 KiB, then the target copies that again: two copies per byte, and a buffer per call.
 *
 * <p>Netty keeps a region's file channel and its progress in private fields (its epoll transport reaches them from
 * JNI, io_uring through its native library). Here they are reached through two {@link VarHandle}s, looked up once
 * when this class loads. Where that is refused (both jars on the module path, where Netty's module does not open
 * {@code io.netty.channel}; a Netty that renamed the fields) or switched off ({@code
 * -Dorg.nettyrdma.fileRegion.directRead=false}), {@link #isAvailable()} is false, said once at debug level, and every
 * region goes through its {@code transferTo} as before. Only a region of exactly {@code DefaultFileRegion}'s class
 * qualifies: a subclass may override {@code transferTo}; custom regions (Spark's {@code MessageWithHeader}) always use
 * their own. Allocates nothing. Event loop only: a region's progress is a plain field, as Netty's transports write it.
 */
final class FileRegionReader {
    private static final InternalLogger logger = InternalLoggerFactory.getInstance(FileRegionReader.class);
    /** {@code DefaultFileRegion.file}: its channel, null until {@code open()} for a region made from a File. */
    private static final VarHandle FILE;
    /** {@code DefaultFileRegion.transferred}: what {@code transferred()} returns. */
    private static final VarHandle TRANSFERRED;
    private static final Throwable UNAVAILABILITY_CAUSE;

    static {
        VarHandle file = null;
        VarHandle transferred = null;
        Throwable cause = null;
        if (SystemPropertyUtil.getBoolean("org.nettyrdma.fileRegion.directRead", true)) {
            try {
                MethodHandles.Lookup lookup =
                        MethodHandles.privateLookupIn(DefaultFileRegion.class, MethodHandles.lookup());
                file = lookup.findVarHandle(DefaultFileRegion.class, "file", FileChannel.class);
                transferred = lookup.findVarHandle(DefaultFileRegion.class, "transferred", long.class);
            } catch (Throwable t) {
                file = null;
                transferred = null;
                cause = t;
            }
        } else {
            cause = new UnsupportedOperationException("switched off by -Dorg.nettyrdma.fileRegion.directRead=false");
        }
        FILE = file;
        TRANSFERRED = transferred;
        UNAVAILABILITY_CAUSE = cause;
        if (cause == null) {
            logger.debug("DefaultFileRegions are read into send staging positionally (one copy)");
        } else {
            logger.debug("DefaultFileRegions are copied into send staging by their transferTo (two copies): their "
                    + "private fields are not accessible here; on the module path, --add-opens "
                    + "io.netty.transport/io.netty.channel=ALL-UNNAMED (or this transport's module) opens them", cause);
        }
    }

    private FileRegionReader() {
    }

    /** Whether DefaultFileRegions can be read directly here (decided once, when the class loads). */
    static boolean isAvailable() {
        return FILE != null;
    }

    /** Why {@link #isAvailable()} is false, or null. */
    static Throwable unavailabilityCause() {
        return UNAVAILABILITY_CAUSE;
    }

    /** Whether {@link #read} may take {@code region}'s bytes: a {@code DefaultFileRegion} itself, not a subclass. */
    static boolean canRead(FileRegion region) {
        return FILE != null && region.getClass() == DefaultFileRegion.class;
    }

    /**
     * Reads {@code region}'s next bytes, from its {@code transferred()} on and at most up to its {@code count()}, into
     * {@code dst}'s room (position to limit; {@code dst} direct, else the JDK copies through a temporary buffer), and
     * advances {@code transferred()} by them. Returns the bytes read, which a short read may make fewer than the room;
     * 0 only when the region is done or {@code dst} has no room. Opens a region made from a {@code File} (as its
     * {@code transferTo} would). Throws an {@link IOException} naming the file's size when the file ends before the
     * region does (truncated under it), with {@code transferred()} as it was.
     */
    static int read(FileRegion region, ByteBuffer dst) throws IOException {
        DefaultFileRegion r = (DefaultFileRegion) region;
        long done = r.transferred();
        long left = r.count() - done;
        int room = dst.remaining();
        if (left <= 0 || room == 0) {
            return 0;
        }
        if (r.refCnt() == 0) {
            throw new IllegalReferenceCountException(0);
        }
        r.open(); // a region made from a File opens it at its first transfer
        FileChannel file = (FileChannel) FILE.get(r);
        int limit = dst.limit();
        if (left < room) {
            dst.limit(dst.position() + (int) left);
        }
        int n;
        try {
            n = file.read(dst, r.position() + done);
        } finally {
            dst.limit(limit);
        }
        if (n <= 0) {
            throw truncated(r, file, done);
        }
        TRANSFERRED.set(r, done + n);
        return n;
    }

    private static IOException truncated(DefaultFileRegion region, FileChannel file, long done) {
        long end = region.position() + region.count();
        String size;
        try {
            size = file.size() + " bytes";
        } catch (IOException e) {
            size = "of unknown size (" + e + ")";
        }
        return new IOException("the file of a DefaultFileRegion ended at byte " + (region.position() + done)
                + ", before the region's end at byte " + end + " (position " + region.position() + " + count "
                + region.count() + "); the file is " + size + " now: it was truncated under the region, which must "
                + "lie within its file until its write completes (" + done + " of its bytes were written)");
    }
}
