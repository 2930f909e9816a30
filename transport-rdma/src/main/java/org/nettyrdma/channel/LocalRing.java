package org.nettyrdma.channel;

import io.netty.buffer.ByteBuf;
import io.netty.util.internal.CleanableDirectBuffer;
import io.netty.util.internal.PlatformDependent;
import io.netty.util.internal.logging.InternalLogger;
import io.netty.util.internal.logging.InternalLoggerFactory;
import org.nettyrdma.verbs.Access;
import org.nettyrdma.verbs.MemoryRegion;
import org.nettyrdma.verbs.MemoryWindow;
import org.nettyrdma.verbs.ProtectionDomain;
import org.nettyrdma.verbs.VerbsException;
import org.nettyrdma.verbs.WorkRequestList;

import java.nio.ByteBuffer;

/**
 * The memory of one connection's WRITE ring (protocol v2, docs/protocol.md "Exposure"): a region of its own, registered
 * with {@code LOCAL_WRITE | MW_BIND} (no rkey of its own), exposed to the peer only through a type-2 memory window
 * bound on the connection's QP (rxe checks a window's accesses against its whole region, so the region holds nothing
 * but the ring). Its one owner is the connection's {@link ConnectionResources}: the window is deallocated before the
 * QP is destroyed, the region deregistered and freed after. Event loop only.
 */
final class LocalRing {
    private static final InternalLogger logger = InternalLoggerFactory.getInstance(LocalRing.class);
    final RingReceiveSpace space;
    private final CleanableDirectBuffer memory;
    private final ByteBuffer view;
    private final MemoryRegion mr;
    private final MemoryWindow mw;
    private int rkey;
    private boolean closed;

    /** A ring of {@code size} bytes in {@code pd}, for at most {@code maxMessages} outstanding messages. */
    LocalRing(ProtectionDomain pd, int size, int maxMessages) throws VerbsException {
        memory = PlatformDependent.allocateDirect(size, true);
        MemoryRegion region = null;
        boolean ok = false;
        try {
            region = pd.registerMemory(memory.buffer(), Access.LOCAL_WRITE | Access.MW_BIND);
            mw = pd.allocMemoryWindow();
            ok = true;
        } finally {
            if (!ok) {
                if (region != null) {
                    closeQuietly(region);
                }
                memory.clean();
            }
        }
        mr = region;
        view = memory.buffer().duplicate();
        space = new RingReceiveSpace(size, maxMessages);
    }

    int size() {
        return space.size();
    }

    /** Writes into {@code wrs[i]} the BIND_MW that exposes the whole ring, for remote writes, to the QP it is posted on. */
    void bind(WorkRequestList wrs, int i, long wrId, int sendFlags) {
        rkey = mw.nextRkey();
        wrs.bindWindow(i, wrId, sendFlags, mw, rkey, mr, mr.address(), space.size(), Access.REMOTE_WRITE);
    }

    /** Writes the RING message's payload at {@code at}: where the ring is and the key of the window last bound. */
    void putRingMessage(ByteBuffer buf, int at) {
        buf.putLong(at, mr.address());
        buf.putInt(at + 8, space.size());
        buf.putInt(at + 12, rkey);
    }

    /** Appends ring bytes {@code [offset, offset + n)} to {@code dst}. */
    void copyTo(ByteBuf dst, int offset, int n) {
        view.limit(offset + n).position(offset);
        dst.writeBytes(view);
        view.clear();
    }

    /** Deallocates the window: the peer can write no more. Before the QP is destroyed (a bound window holds it). */
    void closeWindow() {
        closeQuietly(mw);
    }

    /** Deregisters and frees the memory; only once no work request can name it (the QP is gone). */
    void close() {
        if (closed) {
            return;
        }
        closed = true;
        closeWindow();
        closeQuietly(mr);
        memory.clean();
    }

    private static void closeQuietly(AutoCloseable c) {
        try {
            c.close();
        } catch (Exception e) {
            logger.warn("closing {} of a WRITE ring failed", c, e);
        }
    }
}
